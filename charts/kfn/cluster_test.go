package chart_test

import (
	"os"
	"testing"

	"github.com/kfn-dev/kfn/test/testcluster"
)

// The API server of this package's tests: started by the first test that
// needs it (render-only tests never wait for it), stopped by TestMain. It
// has no CRDs: the tests install the chart's CRDs from the rendered
// manifest, as helm does.
var cluster = testcluster.Lazy{Options: []testcluster.Option{testcluster.WithoutKfnCRDs()}}

// binDir holds the component binaries the RBAC tests build.
var binDir string

func TestMain(m *testing.M) {
	code := cluster.Main(m)
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// sharedCluster returns the package's API server, starting it on first use.
func sharedCluster(t testing.TB) *testcluster.Cluster {
	t.Helper()
	return cluster.Get(t)
}
