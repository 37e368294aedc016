package chart_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/kfn-dev/kfn/internal/testcluster"
)

// The API server of this package's tests: started by the first test that
// needs it (render-only tests never wait for it), stopped by TestMain.
var (
	clusterOnce sync.Once
	cluster     *testcluster.Cluster
	clusterErr  error
	// binDir holds the component binaries the RBAC tests build.
	binDir string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop test cluster:", err)
			return 1
		}
	}
	return code
}

// sharedCluster returns a real kube-apiserver and etcd with no CRDs: the
// tests install the chart's CRDs from the rendered manifest, as helm does.
func sharedCluster(t testing.TB) *testcluster.Cluster {
	t.Helper()
	clusterOnce.Do(func() {
		cluster, clusterErr = testcluster.Start(testcluster.WithoutKfnCRDs())
	})
	if clusterErr != nil {
		t.Fatalf("start test cluster: %v", clusterErr)
	}
	return cluster
}
