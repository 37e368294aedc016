// Package auth is the optional bearer token of the event bridge's HTTP
// endpoints: with a token configured, the publisher and the gateway serve
// only requests that carry "Authorization: Bearer <token>" (compared in
// constant time); health and readiness probes stay open. Functions send
// the token when their PUBLISHER_TOKEN variable holds it.
package auth
