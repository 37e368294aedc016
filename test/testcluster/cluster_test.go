package testcluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const widgetCRD = "testdata/widgets.yaml"

// TestClusterServesTheRealAPI starts one cluster and checks, against it, the
// API server behaviour that kfn's CRDs and controllers depend on.
func TestClusterServesTheRealAPI(t *testing.T) {
	started := time.Now()
	c := New(t, WithCRDPaths(widgetCRD))
	t.Logf("cluster started in %s", time.Since(started).Round(time.Millisecond))
	ctx := t.Context()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "testcluster"}}
	require.NoError(t, c.Client.Create(ctx, ns))

	t.Run("is kube-apiserver 1.36", func(t *testing.T) {
		dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
		require.NoError(t, err)
		v, err := dc.ServerVersion()
		require.NoError(t, err)
		t.Logf("server version %s", v.GitVersion)
		require.True(t, strings.HasPrefix(v.GitVersion, "v1.36."), "server version %s", v.GitVersion)
	})

	t.Run("creates and reads a ConfigMap", func(t *testing.T) {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "source"},
			Data:       map[string]string{"handler.js": "module.exports = { main() { return 'hi' } }"},
		}
		require.NoError(t, c.Client.Create(ctx, cm))

		var got corev1.ConfigMap
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(cm), &got))
		require.Equal(t, cm.Data, got.Data)
		require.NotEmpty(t, got.UID, "stored objects get a UID")
	})

	t.Run("installs the CRD from testdata", func(t *testing.T) {
		var names []string
		for _, crd := range c.CRDs {
			names = append(names, crd.Name)
		}
		require.Contains(t, names, "widgets.testcluster.kfn.dev")
	})

	t.Run("refuses an object that breaks the CEL rule, with its message", func(t *testing.T) {
		w := widget(ns.Name, "inverted", map[string]any{"minReplicas": int64(5), "maxReplicas": int64(2)})
		err := c.Client.Create(ctx, w)
		require.Error(t, err)
		require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
		require.ErrorContains(t, err, "minReplicas must not be greater than maxReplicas")

		err = c.Client.Get(ctx, client.ObjectKeyFromObject(w), widget(ns.Name, "", nil))
		require.True(t, apierrors.IsNotFound(err), "refused object must not be stored, got %v", err)
	})

	t.Run("applies the OpenAPI default to a valid object", func(t *testing.T) {
		w := widget(ns.Name, "defaulted", map[string]any{"maxReplicas": int64(3)})
		require.NoError(t, c.Client.Create(ctx, w))

		got := widget(ns.Name, "", nil)
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(w), got))
		minReplicas, found, err := unstructured.NestedInt64(got.Object, "spec", "minReplicas")
		require.NoError(t, err)
		require.True(t, found, "spec.minReplicas defaulted: %v", got.Object["spec"])
		require.EqualValues(t, 1, minReplicas)
	})

	t.Run("serves the status subresource", func(t *testing.T) {
		w := widget(ns.Name, "status", map[string]any{"maxReplicas": int64(3)})
		require.NoError(t, c.Client.Create(ctx, w))
		generation := w.GetGeneration()

		// A status write changes status only, and not the generation.
		require.NoError(t, unstructured.SetNestedField(w.Object, true, "status", "ready"))
		require.NoError(t, unstructured.SetNestedField(w.Object, int64(9), "spec", "maxReplicas"))
		require.NoError(t, c.Client.Status().Update(ctx, w))

		got := widget(ns.Name, "", nil)
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(w), got))
		ready, _, _ := unstructured.NestedBool(got.Object, "status", "ready")
		require.True(t, ready)
		maxReplicas, _, _ := unstructured.NestedInt64(got.Object, "spec", "maxReplicas")
		require.EqualValues(t, 3, maxReplicas, "a status write must not change spec")
		require.Equal(t, generation, got.GetGeneration())

		// A write to the main resource ignores status.
		require.NoError(t, unstructured.SetNestedField(got.Object, false, "status", "ready"))
		require.NoError(t, c.Client.Update(ctx, got))
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(w), got))
		ready, _, _ = unstructured.NestedBool(got.Object, "status", "ready")
		require.True(t, ready, "a write to the main resource must not change status")
	})

	t.Run("Stop ends etcd and the API server and removes their data", func(t *testing.T) {
		require.NotEmpty(t, processesMentioning(t, c.dir), "etcd and kube-apiserver run before Stop")
		require.NoError(t, c.Stop())
		require.Empty(t, processesMentioning(t, c.dir))
		require.NoDirExists(t, c.dir)
		require.NoError(t, c.Stop(), "a second Stop is a no-op")
	})
}

func TestStartRefusesBadOptions(t *testing.T) {
	tests := map[string][]Option{
		"nil option":         {nil},
		"empty CRD path":     {WithCRDPaths("")},
		"missing CRD path":   {WithCRDPaths("testdata/missing.yaml")},
		"nil scheme func":    {WithScheme(nil)},
		"zero start timeout": {WithStartTimeout(0)},
	}
	for name, opts := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := Start(opts...)
			require.ErrorIs(t, err, ErrInvalidOption)
			require.Nil(t, c)
		})
	}
}

func TestStartReturnsSchemeErrorsBeforeStarting(t *testing.T) {
	errBoom := errors.New("boom")
	c, err := Start(WithScheme(func(*runtime.Scheme) error { return errBoom }))
	require.ErrorIs(t, err, errBoom)
	require.Nil(t, c)
}

func TestModuleRootHoldsTheAssetsScript(t *testing.T) {
	root, err := moduleRoot()
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, assetsScript))
}

func widget(namespace, name string, spec map[string]any) *unstructured.Unstructured {
	w := &unstructured.Unstructured{Object: map[string]any{}}
	w.SetAPIVersion("testcluster.kfn.dev/v1")
	w.SetKind("Widget")
	w.SetNamespace(namespace)
	w.SetName(name)
	if spec != nil {
		w.Object["spec"] = spec
	}
	return w
}

// processesMentioning lists the pids of the processes whose command line
// contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	files, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	var pids []string
	for _, f := range files {
		cmdline, err := os.ReadFile(f)
		if err != nil {
			continue // the process ended while we looked
		}
		if strings.Contains(string(cmdline), s) {
			pids = append(pids, filepath.Base(filepath.Dir(f)))
		}
	}
	return pids
}

func TestFailedStartQuotesOutputAndLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where Start makes the cluster directory
	assets := t.TempDir()
	fake := map[string]string{
		// Answers envtest's --help probe, then fails as a broken etcd would.
		"etcd":           "#!/bin/sh\n[ \"$1\" = --help ] && exit 0\necho 'etcd: data dir is on fire' >&2\nexit 1\n",
		"kube-apiserver": "#!/bin/sh\nexit 1\n",
	}
	for name, script := range fake {
		require.NoError(t, os.WriteFile(filepath.Join(assets, name), []byte(script), 0o755))
	}

	c, err := Start(WithoutKfnCRDs(), func(o *options) error { o.assetsDir = assets; return nil })
	require.Nil(t, c)
	require.ErrorContains(t, err, "last output of etcd ---\netcd: data dir is on fire")

	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left, "cluster directory removed")
	require.Empty(t, processesMentioning(t, tmp))
}
