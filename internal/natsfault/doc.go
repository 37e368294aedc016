// Package natsfault is, for tests, a TCP proxy in front of a real NATS
// server through which the server's faults can be made to happen to its
// clients on demand: a protocol error the server answers with -ERR and a
// close (which nats.go takes as final), or a connection cut without a word
// (a server killed, a network partition).
package natsfault
