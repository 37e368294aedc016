// Package testcluster runs a real kube-apiserver and etcd for tests, with
// kfn's CRDs installed, and guarantees that both processes end with the test
// run.
//
// It wraps controller-runtime's envtest. The binaries come from the directory
// in KUBEBUILDER_ASSETS or, when that is unset, from hack/envtest-assets.sh,
// which builds them from their Go modules once per version into a cache
// outside the checkout, so a plain go test ./... works on a fresh machine.
//
// One cluster per test package is the usual shape, started in TestMain by
// [Main]:
//
//	var cluster *testcluster.Cluster
//
//	func TestMain(m *testing.M) {
//		os.Exit(testcluster.Main(m, testcluster.Into(&cluster), testcluster.WithScheme(v1alpha2.AddToScheme)))
//	}
//
// A package whose tests mostly need no cluster uses a [Lazy] one, started
// by the first test that asks for it.
//
// A test can instead call [New] to get a cluster of its own that is stopped
// when the test ends. If the test binary dies without calling Stop (a panic
// in a test, a go test timeout, os.Exit, Ctrl-C, kill -9), a watchdog process
// kills etcd and the API server and removes their data; it finds them
// through Linux's /proc.
package testcluster
