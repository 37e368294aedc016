// Package host is the HTTP contract of a function's host (the server a
// runtime image runs, package runtimes): the port it listens on in a pod,
// its health and ready paths, and how long it may take to load its
// handler. The controller's probes, the event bridge's endpoint probe and
// the runtimes' hosts all read it here, so they cannot drift apart.
package host
