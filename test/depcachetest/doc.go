// Package depcachetest is, for tests, a stand-in of the event bridge's
// dependency cache that speaks its contract (runtimes/README.md,
// "Dependency cache"), for the packages that cannot run the event bridge:
// the runtime images' cache clients (runtimes) and the install
// container's script (controller/resources). Package eventbridge/depcache
// tests the real handler, and the real node runs the two together.
package depcachetest
