// Package cluster holds kfn's end-to-end tests on a real node: a
// single-node Kubernetes cluster built from source on this machine
// (test/node/singlenode), KEDA and kfn installed by test/node/install (kfn with
// its Helm chart and its own images, built daemonless from its
// Dockerfiles), and scenarios on real pods: Kyma manifests running and
// answering through their Services, rolling updates without a failed
// request, events routed, chained and dead-lettered, scale to zero and
// back by push, scaling out on backlog, killed pods without lost events
// (each of profile ha's faults, killed with SIGKILL through the node:
// faultload_test.go), the loss of a whole second node that the test
// adds to the cluster for it (nodeloss_test.go), the restricted Pod
// Security Standard, and, last,
// helm upgrade from the previous release and from profile small to ha
// under load (upgrade_test.go, which reinstalls kfn and leaves this
// checkout's install behind).
//
// Scenarios that disturb the shared install (kill its pods, a node or a
// volume, reinstall it) run one at a time, first; every other scenario
// calls t.Parallel and runs beside the others once those are done (make
// test-cluster's -parallel bounds how many at once), each in namespaces of
// its own, with Function names and event types no other scenario uses, so
// that no scenario's events reach another's Functions.
//
// It is a module of its own so that go test ./... of the main module does
// not run it beside the unit tests: make test runs it after them. It needs
// root; KFN_SKIP_CLUSTER=1 skips it, saying so.
package cluster
