// Package testport gives a test a TCP port for a server it starts by port
// number (a child process, a component given a listen address), which the
// kernel gives to no other socket in the meantime.
//
// Why: the usual way, listening on port 0 and closing, returns a port of
// the kernel's ephemeral range, and the kernel hands that port to the next
// socket that listens on port 0 or connects anywhere. With the packages of
// `go test ./...` running side by side, a function process started on such
// a port found it taken by another package's server, which answered its
// events with 404 (e2e/faults, TestSlowFunctionThenFast in a CI run). Ports
// below the ephemeral range go only to those who ask for them by number.
//
// Test processes choose among those ports at random; so that two of them
// never choose the same port at once, each port given is locked with flock
// on an empty file under $TMPDIR/kfn-testport, which the kernel releases
// when the process exits.
package testport
