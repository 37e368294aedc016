// Package connlimit bounds the connections an HTTP server holds at once on
// one listener, so that no client (and no number of them) can take the
// file descriptors the rest of the process needs: past the bound, the
// connection idle the longest is closed whenever a connection opens or
// becomes idle (one who holds idle keep-alive connections cannot keep
// others out), and new connections wait in the kernel's queue until one
// closes.
package connlimit
