package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// TestKymaFunctionCommandsOnACluster runs the Kyma CLI's function commands
// as Kyma's CLI documents and suggests them (kyma function init, create
// nodejs|python with --source and --dependencies, get, delete, explain),
// with kfn in kyma's place, against an API server.
func TestKymaFunctionCommandsOnACluster(t *testing.T) {
	kc, c := kubeconfig(t)
	ns := namespaceFor(t, c, "kyma-cli")
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "my-function")

	code, out, errOut := run(t, "function", "init", "--dir", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Function files of runtime nodejs initialized to dir "+dir)
	assert.Contains(t, out, "kfn function create nodejs my-function --source "+filepath.Join(dir, "handler.js")+" --dependencies "+filepath.Join(dir, "package.json"))
	require.FileExists(t, filepath.Join(dir, "handler.js"))
	require.FileExists(t, filepath.Join(dir, "package.json"))

	t.Run("create nodejs from the files init wrote", func(t *testing.T) {
		code, out, errOut := run(t, "function", "create", "nodejs", "my-function", "--source", filepath.Join(dir, "handler.js"),
			"--dependencies", filepath.Join(dir, "package.json"), "-n", ns, "--kubeconfig", kc)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "resource my-function applied\n", out)
		fn := &serverlessv1alpha2.Function{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-function"}, fn))
		assert.Equal(t, serverlessv1alpha2.NodeJS24, fn.Spec.Runtime, "Kyma's default Node.js version")
		handler, err := os.ReadFile(filepath.Join(dir, "handler.js"))
		require.NoError(t, err)
		assert.Equal(t, string(handler), fn.Spec.Source.Inline.Source)
		assert.Equal(t, int32(1), *fn.Spec.Replicas)
	})
	t.Run("python defaults to the version Kyma recommends", func(t *testing.T) {
		pyDir := filepath.Join(t.TempDir(), "py")
		code, out, errOut := run(t, "function", "init", "python", "--dir", pyDir)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "kfn function create python my-function --source "+filepath.Join(pyDir, "handler.py"))
		handler, err := os.ReadFile(filepath.Join(pyDir, "handler.py"))
		require.NoError(t, err)
		assert.Contains(t, string(handler), "def main():", "python314's handler API")
		code, _, errOut = run(t, "function", "create", "python", "py-default", "--source", filepath.Join(pyDir, "handler.py"),
			"-n", ns, "--kubeconfig", kc)
		require.Equal(t, 0, code, errOut)
		assert.NotContains(t, errOut, "deprecated")
		fn := &serverlessv1alpha2.Function{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "py-default"}, fn))
		assert.Equal(t, serverlessv1alpha2.Python314, fn.Spec.Runtime, "python312 is deprecated: python314 is the default")
		require.NoError(t, c.Delete(ctx, fn), "the later subtests list the namespace's Functions")
	})
	t.Run("create with Kyma's flags", func(t *testing.T) {
		code, out, errOut := run(t, "function", "create", "python", "hello", "-v", "3.14", "--env", "GREETING=hi", "--env", "TARGET=world=all",
			"--secret-mount", "creds=/etc/creds", "--replicas", "2", "--runtime-image-override", "registry.example/py:1",
			"--istio-injection", "-n", ns, "-o", "json", "--kubeconfig", kc)
		require.Equal(t, 0, code, errOut)
		var printed map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &printed), out)
		assert.NotEmpty(t, printed["metadata"].(map[string]any)["uid"], "the object the API server stored")
		fn := &serverlessv1alpha2.Function{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, fn))
		assert.Equal(t, serverlessv1alpha2.Python314, fn.Spec.Runtime)
		assert.Equal(t, []serverlessv1alpha2.EnvVar{{Name: "GREETING", Value: "hi"}, {Name: "TARGET", Value: "world=all"}}, fn.Spec.Env)
		assert.Equal(t, []serverlessv1alpha2.SecretMount{{SecretName: "creds", MountPath: "/etc/creds"}}, fn.Spec.SecretMounts)
		assert.Equal(t, int32(2), *fn.Spec.Replicas)
		assert.Equal(t, "registry.example/py:1", fn.Spec.RuntimeImageOverride)
		assert.Equal(t, "true", fn.Annotations["sidecar.istio.io/inject"])
		assert.Contains(t, fn.Spec.Source.Inline.Source, "def main():", "python314's handler API")

		code, _, errOut = run(t, "function", "create", "nodejs", "old", "-v", "20", "-n", ns, "--kubeconfig", kc)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, errOut, "warning: runtime nodejs20 is deprecated", "as Kyma's CLI warns")
	})
	t.Run("dry run and wrong calls store nothing", func(t *testing.T) {
		code, out, errOut := run(t, "function", "create", "dry", "--dry-run", "-n", ns, "--kubeconfig", kc)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "resource dry applied (dry run)\n", out)
		assert.Error(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dry"}, &serverlessv1alpha2.Function{}))

		for _, args := range [][]string{
			{"create", "python", "x", "-v", "3.9"},
			{"create", "x", "--env", "NOVALUE"},
			{"create", "x", "--env", "A=1", "--env", "A=2"},
			{"create"},
		} {
			code, _, errOut := run(t, append(append([]string{"function"}, args...), "-n", ns, "--kubeconfig", kc)...)
			assert.Equal(t, 2, code, "%v: %s", args, errOut)
		}
		code, _, errOut = run(t, "function", "create", "BAD_NAME", "-n", ns, "--kubeconfig", kc)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "BAD_NAME", "the API server's reason")
	})
	t.Run("get", func(t *testing.T) {
		fn := &serverlessv1alpha2.Function{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-function"}, fn))
		fn.Status.Conditions = []metav1.Condition{
			{Type: string(serverlessv1alpha2.ConditionConfigurationReady), Status: metav1.ConditionTrue, Reason: "FunctionSpecValidated", LastTransitionTime: metav1.Now()},
			{Type: string(serverlessv1alpha2.ConditionRunning), Status: metav1.ConditionTrue, Reason: "DeploymentReady", LastTransitionTime: metav1.Now()},
		}
		require.NoError(t, c.Status().Update(ctx, fn))

		code, out, errOut := run(t, "function", "get", "-n", ns, "--kubeconfig", kc)
		require.Equal(t, 0, code, errOut)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 4, out)
		assert.Regexp(t, `^NAME\s+CONFIGURED\s+RUNNING\s+RUNTIME\s+GENERATION$`, lines[0])
		assert.Regexp(t, `^hello\s+python314\s+1$`, squeeze(lines[1]), "no status yet")
		assert.Regexp(t, `^my-function\s+True\s+True\s+nodejs24\s+1$`, lines[2])

		code, out, errOut = run(t, "function", "get", "my-function", "-n", ns, "-o", "json", "--kubeconfig", kc)
		require.Equal(t, 0, code, errOut)
		assert.JSONEq(t, `[{"name":"my-function","configured":"True","running":"True","runtime":"nodejs24","generation":"1"}]`, out)

		code, out, errOut = run(t, "function", "get", "-A", "--kubeconfig", kc)
		require.Equal(t, 0, code, errOut)
		assert.Regexp(t, `(?m)^NAMESPACE\s+NAME\s+CONFIGURED`, out)
		assert.Regexp(t, `(?m)^`+ns+`\s+my-function\s+True`, out)
	})
	t.Run("delete", func(t *testing.T) {
		code, out, errOut := run(t, "function", "delete", "my-function", "-n", ns, "--dry-run", "--kubeconfig", kc)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "resource my-function deleted (dry run)\n", out)
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-function"}, &serverlessv1alpha2.Function{}))

		code, out, errOut = run(t, "function", "delete", "my-function", "-n", ns, "--kubeconfig", kc)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "resource my-function deleted\n", out)
		assert.Error(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-function"}, &serverlessv1alpha2.Function{}))

		code, _, errOut = run(t, "function", "delete", "my-function", "-n", ns, "--kubeconfig", kc)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "there is none")
	})
	t.Run("explain", func(t *testing.T) {
		code, out, errOut := run(t, "function", "explain")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "A Function is code that runs without a server of your own")
	})
}

var spaces = regexp.MustCompile(`\s+`)

// squeeze collapses the runs of spaces of a table row into one.
func squeeze(s string) string { return spaces.ReplaceAllString(strings.TrimSpace(s), " ") }
