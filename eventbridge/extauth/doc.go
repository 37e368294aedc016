// Package extauth asks the external authorizers of an APIRule rule's
// extAuth about a request, as Istio's envoyExtAuthzHttp providers do: the
// authorizers are the operator's (the chart's eventbridge.gateway.
// authorizers, by name), each an HTTP service that is sent the request's
// method, path and query (after its URL's path), Host and the headers it
// names, without the body; it allows with 200, and may add headers to the
// request that goes on; any other answer is the client's (its status,
// the headers it may pass on, a bounded body); an authorizer that fails
// or does not answer in time refuses (403). Checks in flight are bounded
// per namespace, so that one tenant's traffic cannot take an authorizer
// every namespace shares.
package extauth
