// Package natsfault is, for tests, a TCP proxy in front of a real NATS
// server through which the server's faults can be made to happen to its
// clients on demand: a protocol error the server answers with -ERR and a
// close (which nats.go takes as final), a connection cut without a word (a
// server killed), or a partition that keeps clients away until it heals.
package natsfault
