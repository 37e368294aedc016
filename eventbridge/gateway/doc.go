// Package gateway is the synchronous HTTP entry of functions: it routes
// /{namespace}/{function}/path (or a request whose Host is the function's
// Service name) to a ready backend of the function, and when the function
// has none, as when it is scaled to zero, it tells the scaler (which has it
// started) and holds the request until a backend is ready or the hold
// timeout passes. Requests in flight are reported to the scaler, which
// scales functions on them as on queue depth.
package gateway
