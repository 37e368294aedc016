// Package install installs what kfn needs on a cluster and kfn
// itself: KEDA from its own manifests, and kfn with its Helm chart through
// the Helm SDK, as a user would with `helm install`. The single-node
// cluster (test/node/singlenode) uses it for `make cluster` and for the
// end-to-end tests on real pods.
package install
