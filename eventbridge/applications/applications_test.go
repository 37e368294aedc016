package applications_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kfn-dev/kfn/eventbridge/applications"
	"github.com/kfn-dev/kfn/test/testcluster"
)

func TestTypeOrName(t *testing.T) {
	tests := map[string]struct {
		labels map[string]string
		want   string
	}{
		"no labels":          {want: "commerce-prod"},
		"other labels":       {labels: map[string]string{"team": "shop"}, want: "commerce-prod"},
		"the type":           {labels: map[string]string{"application-type": "commerce"}, want: "commerce"},
		"any case, as Kyma":  {labels: map[string]string{"Application-Type": "commerce"}, want: "commerce"},
		"two cases, stable":  {labels: map[string]string{"application-type": "b", "Application-Type": "a"}, want: "a"},
		"empty type is kept": {labels: map[string]string{"application-type": ""}, want: ""},
	}
	for name, tt := range tests {
		assert.Equal(t, tt.want, applications.TypeOrName("commerce-prod", tt.labels), name)
	}
}

// TestWatcherFollowsApplications runs the Watcher against a real API
// server that has no Application CRD at first: it looks for it, starts
// watching once it is installed, and then knows each Application, its
// label changes and its deletion.
func TestWatcherFollowsApplications(t *testing.T) {
	cluster := testcluster.New(t, testcluster.WithoutKfnCRDs())
	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	disc, err := discovery.NewDiscoveryClientForConfig(cluster.Config)
	require.NoError(t, err)
	w, err := applications.New(disc, mgr.GetCache(), applications.WithCheckInterval(50*time.Millisecond))
	require.NoError(t, err)
	served, err := w.Served()
	require.NoError(t, err)
	require.False(t, served, "no Application CRD yet")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- mgr.Start(ctx) }()
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			select {
			case err := <-done:
				assert.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Error("manager or watcher did not stop")
			}
		}
	})

	_, err = envtest.InstallCRDs(cluster.Config, envtest.CRDInstallOptions{Paths: []string{"testdata/application-crd.yaml"}, ErrorIfPathMissing: true})
	require.NoError(t, err)
	app := &unstructured.Unstructured{}
	app.SetAPIVersion("applicationconnector.kyma-project.io/v1alpha1")
	app.SetKind("Application")
	app.SetName("commerce-prod")
	app.SetLabels(map[string]string{"application-type": "commerce"})
	require.NoError(t, cluster.Client.Create(ctx, app))

	const wait, tick = 30 * time.Second, 20 * time.Millisecond
	require.Eventually(t, func() bool { t2, ok := w.TypeOrName("commerce-prod"); return ok && t2 == "commerce" }, wait, tick)
	_, ok := w.TypeOrName("other")
	assert.False(t, ok)

	app.SetLabels(nil)
	require.NoError(t, cluster.Client.Update(ctx, app))
	require.Eventually(t, func() bool { t2, ok := w.TypeOrName("commerce-prod"); return ok && t2 == "commerce-prod" }, wait, tick)

	require.NoError(t, cluster.Client.Delete(ctx, app))
	require.Eventually(t, func() bool { _, ok := w.TypeOrName("commerce-prod"); return !ok }, wait, tick)
}
