// Package auth is who may use the event bridge's listeners. Kubernetes is
// the identity provider: Kubernetes authenticates callers as the API
// server does (a bearer token by TokenReview: of kfn's audience, and over
// TLS also of the API server's, so that no listener over plain HTTP takes
// a token the API server would; a client certificate against the
// cluster's client CA), with new tokens reviewed within a budget per
// listener, shared per namespace for the tokens the cluster signed (their
// signature checked against its issuer's keys first) and per caller
// address for the others, and refused tokens not reviewed again,
// and authorizes them with RBAC
// (SubjectAccessReview): the dead-letter admin API and the gateway ask it,
// and the publisher learns from it which namespace sends an event.
// RequireToken is the optional shared bearer token for callers outside
// Kubernetes (compared in constant time, taken out of the request);
// health and readiness probes stay open. ClientTransport is how kfn's
// command sends the kubeconfig's credentials.
package auth
