package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/test/node/install"
	"github.com/kfn-dev/kfn/test/node/singlenode"
)

var metav1GetOptions = metav1.GetOptions{}

// functionLabel is the label of a Function's pods that holds its name.
const functionLabel = "serverless.kyma-project.io/function-name"

// fieldOwner is the field manager of what the tests apply.
const fieldOwner = "e2e-cluster"

// suffix returns a short random string for unique names.
func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// namespace creates a namespace for one test that enforces the restricted
// Pod Security Standard, as a function namespace should. When the test
// fails it prints the namespace's pods, events and logs and those of kfn;
// the namespace is deleted when the test ends.
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ctx := context.Background()
	name := prefix + "-" + suffix()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	require.NoError(t, platform.client.Create(ctx, ns))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("\n" + platform.cluster.Describe(context.Background(), name, install.Namespace))
		}
		_ = platform.client.Delete(context.Background(), ns)
	})
	return name
}

// apply applies a YAML manifest (one or more objects) in namespace ns, as
// kubectl apply -n ns does.
func apply(t *testing.T, ns, manifest string) {
	t.Helper()
	objs, err := singlenode.DecodeObjects([]byte(manifest))
	require.NoError(t, err)
	for _, o := range objs {
		o.SetNamespace(ns)
		require.NoError(t, platform.client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o),
			client.FieldOwner(fieldOwner), client.ForceOwnership), "apply %s %s", o.GetKind(), o.GetName())
	}
}

// eventually calls check every 250 ms until it returns nil, and fails t
// with check's last error after d.
func eventually(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, d, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// function reads a Function.
func function(ns, name string) (*serverlessv1alpha2.Function, error) {
	fn := &serverlessv1alpha2.Function{}
	err := platform.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, fn)
	return fn, err
}

// condition returns a Function's condition of type ct, or nil.
func condition(fn *serverlessv1alpha2.Function, ct serverlessv1alpha2.ConditionType) *metav1.Condition {
	for i := range fn.Status.Conditions {
		if fn.Status.Conditions[i].Type == string(ct) {
			return &fn.Status.Conditions[i]
		}
	}
	return nil
}

// waitRunning waits until the Function is ConfigurationReady and Running
// (both True) for its current generation.
func waitRunning(t *testing.T, ns, name string, d time.Duration) *serverlessv1alpha2.Function {
	t.Helper()
	var fn *serverlessv1alpha2.Function
	eventually(t, d, "function "+name+" running", func() error {
		var err error
		if fn, err = function(ns, name); err != nil {
			return err
		}
		for _, ct := range []serverlessv1alpha2.ConditionType{serverlessv1alpha2.ConditionConfigurationReady, serverlessv1alpha2.ConditionRunning} {
			c := condition(fn, ct)
			if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != fn.Generation {
				return fmt.Errorf("condition %s: %+v", ct, c)
			}
		}
		return nil
	})
	return fn
}

// deployment reads a Function's Deployment.
func deployment(ns, name string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	err := platform.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d)
	return d, err
}

// serviceURL returns http://<cluster IP> of a Function's Service.
func functionURL(t *testing.T, ns, name string) string {
	t.Helper()
	svc := &corev1.Service{}
	require.NoError(t, platform.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc))
	require.NotEmpty(t, svc.Spec.Ports)
	return fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
}

// httpClient bounds every request of the tests.
var httpClient = &http.Client{Timeout: 30 * time.Second}

// get returns the status and body of a GET.
func get(url string) (int, string, error) {
	return getAs(url, "")
}

// getAs is get with a bearer token, when not empty.
func getAs(url, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// publish posts a binary-mode CloudEvent to kfn's publisher Service and
// fails t unless it is stored (2xx).
func publish(t *testing.T, typ, source, id, data string) {
	t.Helper()
	code, body, err := publishEvent(typ, source, id, data)
	require.NoError(t, err, "publish %s", id)
	require.Equal(t, 2, code/100, "publish %s: %d %s", id, code, body)
}

func publishEvent(typ, source, id, data string) (int, string, error) {
	code, _, body, err := publishEventAs("", typ, source, id, data)
	return code, body, err
}

// publishEventAs publishes as publishEvent does, with token as the bearer
// token when not empty (a sender's identity), and returns the answer's
// headers too.
func publishEventAs(token, typ, source, id, data string) (int, http.Header, string, error) {
	return publishEventWith(token, typ, source, id, data, nil)
}

// publishEventWith is publishEventAs with the extra headers (CloudEvents
// extensions, ce-<name>).
func publishEventWith(token, typ, source, id, data string, extra http.Header) (int, http.Header, string, error) {
	req, err := http.NewRequest(http.MethodPost, platform.publisher+"/publish", bytes.NewBufferString(data))
	if err != nil {
		return 0, nil, "", err
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	req.Header.Set("ce-specversion", "1.0")
	req.Header.Set("ce-type", typ)
	req.Header.Set("ce-source", source)
	req.Header.Set("ce-id", id)
	req.Header.Set("content-type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, strings.TrimSpace(string(body)), nil
}

// senderToken returns a token of kfn's audience for a ServiceAccount of ns
// with no role: what the publisher takes as a sender of ns.
func senderToken(t *testing.T, ns string) string {
	t.Helper()
	return accountToken(t, ns, "sender")
}

// accountToken makes ServiceAccount name in ns and returns a token of
// kfn's audience for it, valid for an hour.
func accountToken(t *testing.T, ns, name string) string {
	t.Helper()
	cs := platform.cluster.Clientset
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"kfn"}, ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// ids returns n event ids with a common prefix.
func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

// invoker returns a bearer token of kfn's audience for a ServiceAccount of
// ns bound to the cluster's edit role there, into which the chart
// aggregates functions/invoke: what a pod of ns that calls its
// namespace's Functions through the gateway sends.
func invoker(t *testing.T, ns string) string {
	t.Helper()
	token := accountToken(t, ns, "invoker")
	_, err := platform.cluster.Clientset.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "invoker"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "invoker"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return token
}

// inlineFunction is the manifest of a Function named name with runtime
// and inline source (written without indentation), and env (sorted by
// name) when not empty.
func inlineFunction(name, runtime string, env map[string]string, source string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\napiVersion: serverless.kyma-project.io/v1alpha2\nkind: Function\nmetadata:\n  name: %s\nspec:\n  runtime: %s\n", name, runtime)
	if len(env) > 0 {
		b.WriteString("  env:\n")
		for _, k := range slices.Sorted(maps.Keys(env)) {
			fmt.Fprintf(&b, "    - name: %s\n      value: %q\n", k, env[k])
		}
	}
	b.WriteString("  source:\n    inline:\n      source: |\n")
	for _, line := range strings.Split(strings.TrimPrefix(source, "\n"), "\n") {
		if line != "" {
			b.WriteString("        " + line)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// recorderEnv is the environment of a Function that reports to the
// test's recorder (RECORDER_URL).
func recorderEnv() map[string]string {
	return map[string]string{"RECORDER_URL": platform.recorder.URL}
}
