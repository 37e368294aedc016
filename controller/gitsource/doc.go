// Package gitsource reads a Git Function's source with go-git: it resolves
// a reference (branch, tag, full ref name or commit hash) to a commit
// without cloning, and fetches one directory of a repository at a commit
// into a local directory (what the fetch-source init container runs).
// Credentials come from a Kubernetes Secret's data, as Kyma defines them:
// basic (username, password) or key (ssh-privatekey, legacy key). A
// repository's server, and every address its redirects lead to (at most
// MaxRedirects), must be one the caller's egress policy allows (package
// internal/egress, as for the event bridge's deliveries): a tenant's URL
// cannot make the controller connect to loopback, the cloud metadata
// address or the API server. A resolve ends when its context does,
// whatever step it is at, and reads at most MaxReferenceListBytes from the
// server, so that a tenant's server can neither hold nor fill the
// controller.
package gitsource
