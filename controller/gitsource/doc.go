// Package gitsource reads a Git Function's source with go-git: it resolves
// a reference (branch, tag, full ref name or commit hash) to a commit
// without cloning, and fetches one directory of a repository at a commit
// into a local directory (what the fetch-source init container runs).
// Credentials come from a Kubernetes Secret's data, as Kyma defines them:
// basic (username, password) or key (ssh-privatekey, legacy key).
package gitsource
