// Package apiroute decides which rule of which APIRule serves a request,
// with the semantics of Kyma's APIRule v2 (gateway.kyma-project.io/v2):
// hosts (fully qualified, short or wildcard), rule paths with the {*} and
// {**} operators, rules tried in order with their methods, and one APIRule
// per host.
//
// It is the matching core only: it knows no HTTP server and no Kubernetes
// types. The caller converts its APIRules to APIRule values, builds a
// Table with Build, which also says per APIRule why it was refused (for the
// APIRule's status), and asks the Table about each request's host, escaped
// path and method. A Table is immutable and safe for concurrent use; the
// caller builds a new one when APIRules change.
//
// Paths are matched as received, without normalization. A request path
// that is not in canonical form (a "." or ".." segment, a percent escape of
// an unreserved character such as %2e or %41, a malformed escape) matches
// no rule at all: a backend that normalized it could otherwise be reached,
// under the rule of one path, at another.
package apiroute
