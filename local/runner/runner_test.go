package runner_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/local/runner"
	"github.com/kfn-dev/kfn/local/supervisor"
	"github.com/kfn-dev/kfn/test/logtest"
)

func function(name string, rt serverlessv1alpha2.Runtime, source string, env ...serverlessv1alpha2.EnvVar) *serverlessv1alpha2.Function {
	return &serverlessv1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: serverlessv1alpha2.FunctionSpec{
			Runtime:  rt,
			Replicas: ptr.To[int32](1),
			Env:      env,
			Source:   serverlessv1alpha2.Source{Inline: &serverlessv1alpha2.InlineSource{Source: source}},
		},
	}
}

func call(t *testing.T, r *runner.Runner, name string) string {
	t.Helper()
	f := r.Get("default", name)
	require.NotNil(t, f)
	eps := f.Pool.Endpoints()
	require.NotEmpty(t, eps, "%s has no ready process", name)
	resp, err := http.Get("http://" + eps[0] + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

func newRunner(t *testing.T, log io.Writer) *runner.Runner {
	t.Helper()
	r, err := runner.New(runner.Config{
		StateDir:         t.TempDir(),
		PublisherAddress: "http://127.0.0.1:1/publish",
		Objects: runner.Objects{
			ConfigMaps: map[string]*corev1.ConfigMap{"default/settings": {Data: map[string]string{"color": "blue"}}},
			Secrets:    map[string]*corev1.Secret{"default/db": {Data: map[string][]byte{"password": []byte("s3cret")}}},
		},
		Pool: supervisor.PoolConfig{DrainDelay: 50 * time.Millisecond, DrainGrace: 5 * time.Second},
		Log:  supervisor.NewSyncWriter(log),
		// Every Apply waits for its functions, so that a test reads what
		// it applied right after.
		StartWait: -1, ApplyWait: -1,
	})
	require.NoError(t, err)
	t.Cleanup(r.Stop)
	return r
}

func TestRunnerRunsUpdatesAndRemovesFunctions(t *testing.T) {
	ctx := context.Background()
	var log logtest.Buffer
	r := newRunner(t, &log)

	node := function("hello", serverlessv1alpha2.NodeJS22, `module.exports = { main: () => "v1 " + process.env.COLOR + " " + process.env.FUNC_NAME }`,
		serverlessv1alpha2.EnvVar{Name: "COLOR", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "color"}}})
	py := function("py", serverlessv1alpha2.Python312, "import os\ndef main(event, context):\n    return 'pw=' + os.environ['PW'] + ' ns=' + context['namespace']\n",
		serverlessv1alpha2.EnvVar{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
		serverlessv1alpha2.EnvVar{Name: "MISSING", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "x"}}})
	require.Empty(t, r.Apply(ctx, []*serverlessv1alpha2.Function{node, py}))
	assert.Equal(t, "v1 blue hello", call(t, r, "hello"))
	assert.Equal(t, "pw=s3cret ns=default", call(t, r, "py"))
	assert.Contains(t, r.Get("default", "py").Warnings, "env MISSING: Secret default/nope is not in the project; left unset")
	assert.Contains(t, r.Get("default", "hello").Warnings, serverlessv1alpha2.NodeJS22.DeprecationWarning(),
		"a deprecated runtime runs and kfn dev says so, as the controller's status does")

	// Applying the same Functions again restarts nothing.
	pids := r.Get("default", "hello").Pool.PIDs()
	require.Empty(t, r.Apply(ctx, []*serverlessv1alpha2.Function{node, py}))
	assert.Equal(t, pids, r.Get("default", "hello").Pool.PIDs())

	// A source change rolls to the new version.
	node2 := node.DeepCopy()
	node2.Spec.Source.Inline.Source = `module.exports = { main: () => "v2" }`
	require.Empty(t, r.Apply(ctx, []*serverlessv1alpha2.Function{node2, py}))
	assert.Equal(t, "v2", call(t, r, "hello"))

	// A broken edit keeps v2 serving and reports the syntax error, once,
	// at the line of the user's file (the manifest's inline source).
	manifest := filepath.Join(t.TempDir(), "hello.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte("kind: Function"), 0o644))
	r.SetSources(map[string]string{"default/hello": manifest})
	broken := node.DeepCopy()
	broken.Spec.Source.Inline.Source = `module.exports = { main: () => "v3" `
	// The new host serves without its handler, as Kyma's does; its
	// readiness says so at once, and the runner stops it.
	began := time.Now()
	errs := r.Apply(ctx, []*serverlessv1alpha2.Function{broken, py})
	require.Len(t, errs, 1)
	msg := errs[0].Error()
	assert.Contains(t, msg, "default/hello")
	assert.Contains(t, msg, "User function not loaded: "+manifest+" (inline source) handler.js:1: SyntaxError: Unexpected end of input")
	assert.Equal(t, 1, strings.Count(msg, "SyntaxError"), "the reason once: %s", msg)
	assert.NotContains(t, msg, "/run/", "no path of kfn dev's own copies")
	assert.Less(t, time.Since(began), 10*time.Second, "failed by its readiness answer, not a timeout")
	assert.Equal(t, "v2", call(t, r, "hello"))
	require.Error(t, r.Get("default", "hello").Error())
	assert.Equal(t, msg, "default/hello: "+r.Get("default", "hello").Error().Error(), "the status shows the same")

	// Undoing the edit (the running version is wanted again) clears it.
	require.Empty(t, r.Apply(ctx, []*serverlessv1alpha2.Function{node2, py}))
	assert.NoError(t, r.Get("default", "hello").Error(), "no stale error after the edit is undone")
	assert.Equal(t, "v2", call(t, r, "hello"))

	// Removing a function drains its processes.
	pyPIDs := r.Get("default", "py").Pool.PIDs()
	require.Empty(t, r.Apply(ctx, []*serverlessv1alpha2.Function{node2}))
	assert.Nil(t, r.Get("default", "py"))
	for _, pid := range pyPIDs {
		assert.Error(t, syscall.Kill(pid, 0), "pid %d still runs", pid)
	}
	assert.Len(t, r.Functions(), 1)
}

func TestRunnerStartsScaleToZeroFunctionsAtZero(t *testing.T) {
	ctx := context.Background()
	r := newRunner(t, io.Discard)
	fn := function("lazy", serverlessv1alpha2.NodeJS22, `module.exports = { main: () => "up" }`)
	fn.Spec.ScaleConfig = &serverlessv1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](2)}
	require.Empty(t, r.Apply(ctx, []*serverlessv1alpha2.Function{fn}))
	f := r.Get("default", "lazy")
	assert.Empty(t, f.Pool.Endpoints())
	require.NoError(t, f.Pool.Scale(ctx, 1))
	assert.Equal(t, "up", call(t, r, "lazy"))
}

func TestRunnerRefusesWhatItCannotRun(t *testing.T) {
	r := newRunner(t, io.Discard)
	git := function("git", serverlessv1alpha2.NodeJS22, "")
	git.Spec.Source = serverlessv1alpha2.Source{GitRepository: &serverlessv1alpha2.GitRepositorySource{URL: "https://example.com/r.git", Repository: serverlessv1alpha2.Repository{BaseDir: "/", Reference: "main"}}}
	errs := r.Apply(context.Background(), []*serverlessv1alpha2.Function{git})
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "default/git")
}

// TestRunnerWithRelativeStateDir runs from a relative state directory, as
// `kfn dev examples/shop` gives one.
func TestRunnerWithRelativeStateDir(t *testing.T) {
	abs := t.TempDir()
	t.Chdir(abs)
	r, err := runner.New(runner.Config{StateDir: ".kfn", Log: io.Discard})
	require.NoError(t, err)
	t.Cleanup(r.Stop)
	require.Empty(t, r.Apply(context.Background(), []*serverlessv1alpha2.Function{
		function("rel", serverlessv1alpha2.NodeJS22, `module.exports = { main: () => "relative ok" }`),
	}))
	assert.Equal(t, "relative ok", call(t, r, "rel"))
}

// TestFunctionDirIsWritable runs Kyma handlers that write files next to
// themselves in kfn dev: each process has a directory of its own with the
// source copied in (as a pod's emptyDir), HANDLER_PATH or FUNCTION_PATH
// pointing there, its working directory; replicas do not share it, the
// source stays as written, and it is gone once the process stopped.
func TestFunctionDirIsWritable(t *testing.T) {
	ctx := context.Background()
	var log logtest.Buffer
	r := newRunner(t, &log)
	node := function("writer", serverlessv1alpha2.NodeJS22, `const fs = require('fs');
const path = require('path');
module.exports = { main: () => {
  const dir = path.dirname(process.env.HANDLER_PATH);
  fs.writeFileSync(path.join(dir, 'note.txt'), 'kept');
  fs.writeFileSync('relative.txt', 'too');
  return dir + ' ' + process.cwd() + ' ' + fs.readFileSync(path.join(__dirname, 'note.txt'), 'utf8');
} };
`)
	node.Spec.Replicas = ptr.To[int32](2)
	py := function("pywriter", serverlessv1alpha2.Python312, `import os
def main(event, context):
    d = os.environ['FUNCTION_PATH']
    with open(os.path.join(d, 'note.txt'), 'w') as f:
        f.write('kept')
    with open('relative.txt', 'w') as f:
        f.write('too')
    with open(os.path.join(os.path.dirname(__file__), 'note.txt')) as f:
        return d + ' ' + os.getcwd() + ' ' + f.read()
`)
	require.Empty(t, r.Apply(ctx, []*serverlessv1alpha2.Function{node, py}), log.String())

	var dirs []string
	for _, name := range []string{"writer", "pywriter"} {
		f := r.Get("default", name)
		for _, ep := range f.Pool.Endpoints() {
			resp, err := http.Get("http://" + ep + "/")
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode, string(body)+log.String())
			parts := strings.Fields(string(body))
			require.Len(t, parts, 3, string(body))
			assert.Equal(t, parts[0], parts[1], "the function's directory is the working directory")
			assert.Equal(t, "kept", parts[2])
			assert.FileExists(t, filepath.Join(parts[0], "relative.txt"))
			assert.FileExists(t, filepath.Join(parts[0], f.Plan.Runtime.SourceFile()), "the source is copied in")
			dirs = append(dirs, parts[0])
		}
	}
	require.Len(t, dirs, 3)
	assert.NotEqual(t, dirs[0], dirs[1], "replicas do not share a directory")

	r.Stop()
	for _, d := range dirs {
		assert.NoDirExists(t, d, "removed with the process")
	}
}

// TestNodeFunctionsGetTheImagesEnvironment: a Node.js Function in kfn dev
// sees NODE_ENV empty, as in its runtime image (and Kyma's), whatever the
// machine's environment says; a Function's own env sets it.
func TestNodeFunctionsGetTheImagesEnvironment(t *testing.T) {
	t.Setenv("NODE_ENV", "production") // the machine's: not passed on
	ctx := context.Background()
	var log logtest.Buffer
	r := newRunner(t, &log)
	const source = `module.exports = { main: () => JSON.stringify(process.env.NODE_ENV) };`
	plain := function("plain", serverlessv1alpha2.NodeJS22, source)
	own := function("own", serverlessv1alpha2.NodeJS22, source, serverlessv1alpha2.EnvVar{Name: "NODE_ENV", Value: "development"})
	require.Empty(t, r.Apply(ctx, []*serverlessv1alpha2.Function{plain, own}), log.String())
	assert.Equal(t, `""`, call(t, r, "plain"))
	assert.Equal(t, `"development"`, call(t, r, "own"))
}
