package cli_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/local/dev"
	"github.com/kfn-dev/kfn/test/testcluster"
)

// The API server of the cluster-mode tests: no kubelet runs, so these
// cover what needs only the API (get, apply, logs of a Function without
// pods); the port-forwards to kfn's pods run in e2e/cluster on a real node.
var shared = testcluster.Lazy{Options: []testcluster.Option{
	testcluster.WithScheme(serverlessv1alpha2.AddToScheme, eventingv1alpha2.AddToScheme),
}}

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// kubeconfig starts the package's API server (once) and returns a
// kubeconfig file for it and a client.
func kubeconfig(t *testing.T) (string, client.Client) {
	t.Helper()
	c := shared.Get(t)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, c.KubeConfig, 0o600))
	return path, c.Client
}

// namespaceFor creates a namespace named prefix and a suffix of its own:
// the package's API server lives across a test's runs (-count).
func namespaceFor(t *testing.T, c client.Client, prefix string) string {
	t.Helper()
	name := prefix + "-" + strings.ToLower(rand.Text()[:6])
	require.NoError(t, c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	return name
}

func TestApplyFolderToTheCluster(t *testing.T) {
	kc, c := kubeconfig(t)
	ns := namespaceFor(t, c, "apply")
	dir := filepath.Join(t.TempDir(), "orders")
	code, _, errOut := run(t, "init", "--runtime", "python312", dir)
	require.Equal(t, 0, code, errOut)

	code, out, errOut := run(t, "apply", "--kubeconfig", kc, "-n", ns, dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Function "+ns+"/orders applied")
	assert.Contains(t, out, "Subscription "+ns+"/orders")

	fn := &serverlessv1alpha2.Function{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "orders"}, fn))
	assert.Equal(t, serverlessv1alpha2.Python312, fn.Spec.Runtime)
	var subs eventingv1alpha2.SubscriptionList
	require.NoError(t, c.List(context.Background(), &subs, client.InNamespace(ns)))
	require.Len(t, subs.Items, 1)
	assert.Equal(t, "http://orders."+ns+".svc.cluster.local", subs.Items[0].Spec.Sink, "the sink follows -n")

	t.Run("a second apply after an edit updates the Function", func(t *testing.T) {
		handler := filepath.Join(dir, "handler.py")
		require.NoError(t, os.WriteFile(handler, []byte("def main(event, context):\n    return 'v2'\n"), 0o644))
		code, _, errOut := run(t, "apply", "--kubeconfig", kc, "-n", ns, dir, "-o", "yaml")
		require.Equal(t, 0, code, errOut)
		require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "orders"}, fn))
		assert.Contains(t, fn.Spec.Source.Inline.Source, "'v2'")
	})
	t.Run("an invalid Function is refused with the API server's reason", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad")
		code, _, errOut := run(t, "init", bad)
		require.Equal(t, 0, code, errOut)
		cfg := filepath.Join(bad, "config.yaml")
		data, err := os.ReadFile(cfg)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(cfg, []byte(strings.Replace(string(data), "maxReplicas: 3", "maxReplicas: 0", 1)), 0o644))
		code, _, errOut = run(t, "apply", "--kubeconfig", kc, "-n", ns, bad)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "apply Function "+ns+"/bad from "+cfg)
		assert.Contains(t, errOut, "maxReplicas")
		err = c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "bad"}, &serverlessv1alpha2.Function{})
		assert.Error(t, err, "nothing was stored")
	})
	t.Run("a folder without config.yaml is a wrong call", func(t *testing.T) {
		code, _, errOut := run(t, "apply", "--kubeconfig", kc, t.TempDir())
		assert.Equal(t, 2, code)
		assert.Contains(t, errOut, "is not a function folder")
	})
}

func TestGetFromTheCluster(t *testing.T) {
	kc, c := kubeconfig(t)
	ns := namespaceFor(t, c, "get")
	dir := filepath.Join(t.TempDir(), "notify")
	code, _, errOut := run(t, "init", "--runtime", "nodejs22", dir)
	require.Equal(t, 0, code, errOut)
	code, _, errOut = run(t, "apply", "--kubeconfig", kc, "-n", ns, dir)
	require.Equal(t, 0, code, errOut)
	fn := &serverlessv1alpha2.Function{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "notify"}, fn))
	fn.Status.Conditions = []metav1.Condition{{Type: string(serverlessv1alpha2.ConditionRunning), Status: metav1.ConditionFalse,
		Reason: string(serverlessv1alpha2.ReasonDeploymentFailed), Message: "image not found", LastTransitionTime: metav1.Now()}}
	require.NoError(t, c.Status().Update(context.Background(), fn))

	code, out, errOut := run(t, "get", "--kubeconfig", kc, "-n", ns)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, ns+"/notify")
	assert.Contains(t, out, "Running: DeploymentFailed: image not found", "a False condition shows with its reason")
	assert.Contains(t, out, "SUBSCRIPTION")
	assert.Contains(t, out, "no ready eventbridge pod of kfn", "what could not be read from kfn's pods is said")

	code, out, errOut = run(t, "get", "--kubeconfig", kc, "-A", "-o", "json")
	require.Equal(t, 0, code, errOut)
	var st dev.Status
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	found := false
	for _, f := range st.Functions {
		found = found || (f.Namespace == ns && f.Name == "notify" && f.Autoscaled && f.Min == 0)
	}
	assert.True(t, found, "-A lists the function of namespace %s: %+v", ns, st.Functions)

	code, out, errOut = run(t, "get", "--kubeconfig", kc, "-n", ns, "-o", "yaml")
	require.Equal(t, 0, code, errOut)
	var viaYAML dev.Status
	require.NoError(t, yaml.Unmarshal([]byte(out), &viaYAML))
	require.Len(t, viaYAML.Functions, 1)

	code, _, errOut = run(t, "logs", "--kubeconfig", kc, "-n", ns, "nope")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no such function")
	code, out, errOut = run(t, "logs", "--kubeconfig", kc, "-n", ns, "notify")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "has no running pod")
}

func TestKubeconfigErrorsAreWrongCalls(t *testing.T) {
	code, _, errOut := run(t, "get", "--kubeconfig", filepath.Join(t.TempDir(), "missing"))
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "kubeconfig")
}

func TestOneAddressFormEverywhere(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(dev.Status{Ready: true})
	}))
	defer srv.Close()
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	for _, addr := range []string{srv.URL, hostPort, srv.URL + "/"} {
		code, out, errOut := run(t, "get", "--addr", addr, "-o", "json")
		require.Equal(t, 0, code, "--addr %s: %s", addr, errOut)
		assert.Contains(t, out, `"ready": true`)
	}
	for _, bad := range []string{"", "ftp://x:1", "http://x:1/some/path"} {
		code, _, errOut := run(t, "get", "--addr", bad)
		assert.Equal(t, 2, code, "--addr %q", bad)
		assert.Contains(t, errOut, "want host:port or http://host:port")
	}
	code, _, errOut := run(t, "get", "--addr", hostPort, "-o", "xml")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "want table, json or yaml")
}

func TestWrongCallsExitTwo(t *testing.T) {
	for name, args := range map[string][]string{
		"unknown command": {"bogus"},
		"unknown flag":    {"get", "--nope"},
		"extra argument":  {"version", "x"},
	} {
		code, _, errOut := run(t, args...)
		assert.Equal(t, 2, code, "%s: %s", name, errOut)
		assert.Contains(t, errOut, "kfn --help")
	}
	code, out, _ := run(t, "--version")
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "kfn "))
}

func TestInitTakesAPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "deep", "hello")
	code, out, errOut := run(t, "init", "--runtime", "nodejs22", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `function "hello" in `+dir)
	assert.Contains(t, out, "Run it with: kfn dev "+dir, "the folder itself, not its parent")
	assert.FileExists(t, filepath.Join(dir, "config.yaml"))
}
