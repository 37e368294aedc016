// Package connlimit bounds the connections an HTTP server holds at once on
// one listener, so that no client (and no number of them) can take the
// file descriptors the rest of the process needs, nor keep other clients
// out: one source address holds at most a share of them (a connection
// past it is closed at once), and when all are open, a new connection is
// made room for by closing the connection idle the longest or, failing
// that, the one that has waited the longest for its first request's
// headers (slowloris); a request being served is never cut, and when
// every connection serves one, new ones wait in the kernel's queue until
// one closes.
package connlimit
