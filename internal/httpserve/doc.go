// Package httpserve runs an http.Server for as long as a context lives:
// it serves until the context ends, then shuts the server down
// gracefully within a bound, so that a program's servers stop with it
// and a failure to serve is told apart from the shutdown.
package httpserve
