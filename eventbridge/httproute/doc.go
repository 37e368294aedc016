// Package httproute serves APIRules through a cluster's own Gateway API
// implementation instead of kfn's gateway: Build turns an APIRule into an
// HTTPRoute of a named Gateway (hosts, paths, methods, the Service,
// timeouts, request headers, CORS), leaving out, fail closed, the rules
// an HTTPRoute cannot enforce (jwt, extAuth, request cookies, a Service of
// another namespace or outside the cluster) and saying so; Writer applies
// the routes of every APIRule (server-side apply), deletes those of
// APIRules gone or refused, and reports each APIRule's status, in place of
// the gateway for package apirules.
package httproute
