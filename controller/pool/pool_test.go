package pool_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/contract/claim"
	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/controller/pool"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/internal/claims"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
	"github.com/kfn-dev/kfn/test/testcluster"
	"github.com/kfn-dev/kfn/test/testport"
)

const wait = 30 * time.Second

// kubelet plays the kubelet's part for the pool's pods on a test API
// server, which runs no node: for each pod the pool makes, it starts the
// real host of the pod's runtime with the pod's environment (its port and
// function directory moved to this machine) and reports the pod running
// and started, as a kubelet would; the pool reaches each host at the
// address the kubelet gave it.
type kubelet struct {
	t       *testing.T
	c       client.Client
	hostDir string
	mu      sync.Mutex
	addrs   map[string]string // pod namespace/name -> host:port
}

func (k *kubelet) address(pod *corev1.Pod) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.addrs[pod.Namespace+"/"+pod.Name]
}

// run starts the host of every standby pod of namespace ns not yet run.
func (k *kubelet) run(ctx context.Context, ns string) int {
	k.t.Helper()
	var pods corev1.PodList
	require.NoError(k.t, k.c.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{pool.LabelShape}))
	n := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		key := pod.Namespace + "/" + pod.Name
		k.mu.Lock()
		_, running := k.addrs[key]
		k.mu.Unlock()
		if running || pod.DeletionTimestamp != nil {
			continue
		}
		k.start(ctx, pod)
		n++
	}
	return n
}

func (k *kubelet) start(ctx context.Context, pod *corev1.Pod) {
	k.t.Helper()
	c := pod.Spec.Containers[0]
	port := testport.Port(k.t)
	env := os.Environ()
	rt := ""
	for _, e := range c.Env {
		switch e.Name {
		case runtimes.EnvPort:
			e.Value = strconv.Itoa(port)
		case runtimes.EnvFunctionDir:
			e.Value = k.t.TempDir()
		case runtimes.EnvRuntime:
			rt = e.Value
		}
		env = append(env, e.Name+"="+e.Value)
	}
	r, err := runtimes.Lookup(rt)
	require.NoError(k.t, err)
	argv := r.Command(k.hostDir)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	require.NoError(k.t, cmd.Start())
	k.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	require.Eventually(k.t, func() bool {
		resp, err := http.Get("http://" + addr + runtimes.HealthPath)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, wait, 5*time.Millisecond, "the standby host serves")
	k.mu.Lock()
	k.addrs[pod.Namespace+"/"+pod.Name] = addr
	k.mu.Unlock()
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.244.0.9", PodIPs: []corev1.PodIP{{IP: "10.244.0.9"}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, ImageID: c.Image, Started: ptr.To(true), Ready: false,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}},
	}
	require.NoError(k.t, k.c.Status().Update(ctx, pod))
}

// function creates a Function that scales to zero and returns its plan.
func newFunction(t *testing.T, ctx context.Context, c client.Client, ns, name string, deps string) plan.Plan {
	t.Helper()
	return newFunctionFrom(t, ctx, c, ns, name, deps, 0)
}

// newFunctionFrom is newFunction with minReplicas minimum.
func newFunctionFrom(t *testing.T, ctx context.Context, c client.Client, ns, name string, deps string, minimum int32) plan.Plan {
	t.Helper()
	return newFunctionOf(t, ctx, c, ns, name, greeting, deps, minimum)
}

// greeting is the source of the tests' Functions: it answers with its
// namespace, name and environment.
const greeting = `module.exports = { main: (event, context) => 'hello from ' + context.namespace + '/' + context['function-name'] + ' ' + process.env.GREETING };`

// newFunctionOf creates Function ns/name of source and dependencies deps,
// with minReplicas minimum and GREETING=warm and env (name, value pairs)
// in its environment, and returns its plan.
func newFunctionOf(t *testing.T, ctx context.Context, c client.Client, ns, name, source, deps string, minimum int32, env ...string) plan.Plan {
	t.Helper()
	vars := []v1alpha2.EnvVar{{Name: "GREETING", Value: "warm"}}
	for i := 0; i+1 < len(env); i += 2 {
		vars = append(vars, v1alpha2.EnvVar{Name: env[i], Value: env[i+1]})
	}
	fn := &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha2.FunctionSpec{
			Runtime:     "nodejs22",
			Source:      v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: source, Dependencies: deps}},
			Env:         vars,
			ScaleConfig: &v1alpha2.ScaleConfig{MinReplicas: ptr.To(minimum), MaxReplicas: ptr.To[int32](3)},
		},
	}
	require.NoError(t, c.Create(ctx, fn))
	p, err := plan.For(fn, function.DefaultConfig().Plan)
	require.NoError(t, err)
	require.NoError(t, p.SetAutoscaler(true, true))
	return p
}

// deployment creates the Function's Deployment as the reconciler applies
// it, at zero as KEDA leaves it.
func deployment(t *testing.T, ctx context.Context, c client.Client, p plan.Plan) *appsv1.Deployment {
	t.Helper()
	require.NoError(t, c.Apply(ctx, resources.Deployment(p, function.DefaultConfig().Resources), client.FieldOwner("test"), client.ForceOwnership))
	d := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Name}, d))
	scale(t, ctx, c, d, 0) // KEDA's part: the ScaledObject takes it to zero
	return d
}

func scale(t *testing.T, ctx context.Context, c client.Client, d *appsv1.Deployment, n int32) {
	t.Helper()
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(d), d))
	d.Spec.Replicas = ptr.To(n)
	require.NoError(t, c.Update(ctx, d))
}

func podsOf(t *testing.T, ctx context.Context, c client.Client, ns string, sel client.ListOption) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	require.NoError(t, c.List(ctx, &pods, client.InNamespace(ns), sel))
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func ready(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + runtimes.ReadyPath)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Kfn-Function")
}

// TestPoolGivesAStandbyPodToAFunctionWokenFromZero runs the pool against a
// real API server and real standby hosts: it keeps one standby pod per
// namespace and shape of Function that scales to zero (none for a
// Function with dependencies, which says why); when a Function's
// Deployment is scaled up from zero it gives it a standby pod (the host
// serves that Function, the pod wears its labels and is owned by it) and
// makes a new standby pod; a second Function woken meanwhile never gets
// the same pod; and the pod is deleted once the Deployment has a ready pod
// of its own. Fails when a pod is given to two Functions, the labels or
// the owner are not set, the pool is not refilled, or the pod stays.
func TestPoolGivesAStandbyPodToAFunctionWokenFromZero(t *testing.T) {
	ctx, c, k, p := startPool(t)
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}))
	bank := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bank", Annotations: map[string]string{pool.AnnotationSize: "2"}}}
	require.NoError(t, c.Create(ctx, bank))

	orders := newFunction(t, ctx, c, "shop", "orders", "")
	refunds := newFunction(t, ctx, c, "shop", "refunds", "")
	accounts := newFunction(t, ctx, c, "bank", "accounts", "")
	heavy := newFunction(t, ctx, c, "bank", "heavy", `{"dependencies": {"left-pad": "1.3.0"}}`)
	for _, fn := range []plan.Plan{orders, refunds, accounts} {
		require.NoError(t, p.Observe(fn), fn.Name)
	}
	err := p.Observe(heavy)
	require.ErrorIs(t, err, pool.ErrNotPoolable)
	assert.ErrorContains(t, err, "dependencies to install")
	assert.Equal(t, pool.Shape(orders, function.DefaultConfig().Resources), pool.Shape(accounts, function.DefaultConfig().Resources), "the same shape in both namespaces")

	// One standby pod in shop (orders and refunds share a shape), two in
	// bank (its annotation), each in its Function's namespace, serving
	// nothing yet.
	for ns, n := range map[string]int{"shop": 1, "bank": 2} {
		require.Eventually(t, func() bool {
			return len(podsOf(t, ctx, c, ns, client.HasLabels{pool.LabelShape})) == n
		}, wait, 10*time.Millisecond, "%d standby pods in %s", n, ns)
		require.Equal(t, n, k.run(ctx, ns))
	}
	standby := podsOf(t, ctx, c, "shop", client.HasLabels{pool.LabelShape})[0]
	assert.NotContains(t, standby.Labels, v1alpha2.LabelFunctionName, "a standby pod is in no Function's Service")
	assert.Equal(t, ptr.To(false), standby.Spec.AutomountServiceAccountToken)
	assert.Equal(t, ptr.To(true), standby.Spec.SecurityContext.RunAsNonRoot, "the Function's restricted security context")
	code, name := ready(t, k.address(&standby))
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Empty(t, name)

	// A pod of the namespace's that wears the standby label, not made by
	// the pool, is never given a Function nor counted.
	fake := standby.DeepCopy()
	fake.ObjectMeta = metav1.ObjectMeta{Namespace: "shop", Name: "impostor", Labels: standby.Labels}
	fake.Status = corev1.PodStatus{}
	require.NoError(t, c.Create(ctx, fake))
	k.start(ctx, fake)

	// orders and refunds are woken at once: one standby pod, one of them
	// gets it.
	ordersDep, refundsDep := deployment(t, ctx, c, orders), deployment(t, ctx, c, refunds)
	scale(t, ctx, c, ordersDep, 1)
	scale(t, ctx, c, refundsDep, 1)
	var claimed corev1.Pod
	require.Eventually(t, func() bool {
		pods := podsOf(t, ctx, c, "shop", client.HasLabels{pool.LabelClaimedBy})
		if len(pods) == 1 {
			claimed = pods[0]
		}
		return len(pods) == 1
	}, wait, 10*time.Millisecond, "a standby pod is given to a woken Function")
	winner := claimed.Labels[pool.LabelClaimedBy]
	require.Contains(t, []string{"orders", "refunds"}, winner)
	assert.Equal(t, standby.Name, claimed.Name, "the pool's own standby pod, not the impostor")
	assert.Equal(t, winner, claimed.Labels[v1alpha2.LabelFunctionName], "in its Function's Service")
	assert.NotContains(t, claimed.Labels, pool.LabelShape, "no longer standby")
	require.Len(t, claimed.OwnerReferences, 1)
	assert.Equal(t, "Function", claimed.OwnerReferences[0].Kind)
	assert.Equal(t, winner, claimed.OwnerReferences[0].Name)
	code, name = ready(t, k.address(&claimed))
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "shop/"+winner, name)
	resp, err := http.Get("http://" + k.address(&claimed) + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "hello from shop/"+winner+" warm", string(body), "the Function's source and environment")

	// The pool is refilled (the impostor does not count); the loser of
	// the race never got the same pod.
	require.Eventually(t, func() bool {
		return len(podsOf(t, ctx, c, "shop", client.HasLabels{pool.LabelShape})) == 2
	}, wait, 10*time.Millisecond, "a new standby pod beside the impostor")
	code, name = ready(t, k.address(fake))
	assert.Equal(t, http.StatusServiceUnavailable, code, "the impostor was given nothing")
	assert.Empty(t, name)
	assert.Len(t, podsOf(t, ctx, c, "shop", client.HasLabels{pool.LabelClaimedBy}), 1, "a pod is given to one Function only")
	assert.Empty(t, podsOf(t, ctx, c, "bank", client.HasLabels{pool.LabelClaimedBy}), "another namespace's pool is not touched")

	// The Deployment's own pod is ready: the pool's pod goes.
	winnerDep := ordersDep
	if winner == "refunds" {
		winnerDep = refundsDep
	}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(winnerDep), winnerDep))
	winnerDep.Status.Replicas, winnerDep.Status.ReadyReplicas, winnerDep.Status.AvailableReplicas = 1, 1, 1
	require.NoError(t, c.Status().Update(ctx, winnerDep))
	require.Eventually(t, func() bool {
		err := c.Get(ctx, client.ObjectKeyFromObject(&claimed), &corev1.Pod{})
		return apierrors.IsNotFound(err)
	}, wait, 10*time.Millisecond, "the claimed pod is deleted once the Function has a ready pod")

	// A namespace that turns its pool off, and a Function the pool no
	// longer serves, lose their standby pods.
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(bank), bank))
	bank.Annotations[pool.AnnotationSize] = "0"
	require.NoError(t, c.Update(ctx, bank))
	require.Eventually(t, func() bool {
		return len(podsOf(t, ctx, c, "bank", client.HasLabels{pool.LabelShape})) == 0
	}, wait, 10*time.Millisecond, "no standby pod in a namespace whose pool is off")
	// An absurd size is ignored: the chart's size (1) holds there.
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(bank), bank))
	bank.Annotations[pool.AnnotationSize] = "9999"
	require.NoError(t, c.Update(ctx, bank))
	require.Eventually(t, func() bool {
		return len(podsOf(t, ctx, c, "bank", client.HasLabels{pool.LabelShape})) == 1
	}, wait, 10*time.Millisecond, "an absurd size is the chart's size, not 9999 pods")
	// More would be made at once (refill makes what is missing in one
	// pass); a second of none is the negative to check.
	require.Never(t, func() bool {
		return len(podsOf(t, ctx, c, "bank", client.HasLabels{pool.LabelShape})) > 1
	}, time.Second, 10*time.Millisecond, "never more than the chart's size")
	// A namespace being deleted has no pool: nothing can be made there
	// (the API server forbids it) and its standby pod goes.
	require.NoError(t, c.Delete(ctx, bank))
	require.Eventually(t, func() bool {
		return len(podsOf(t, ctx, c, "bank", client.HasLabels{pool.LabelShape})) == 0
	}, wait, 10*time.Millisecond, "no standby pod in a namespace being deleted")
	p.Forget(client.ObjectKeyFromObject(&v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"}}))
	p.Forget(client.ObjectKeyFromObject(&v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "refunds"}}))
	require.Eventually(t, func() bool {
		return len(podsOf(t, ctx, c, "shop", client.HasLabels{pool.LabelShape})) == 1
	}, wait, 10*time.Millisecond, "no standby pod of the pool's where no Function needs one (the impostor is not the pool's to delete)")
}

// TestPoolKnowsItsPodsByUIDNotName: a tenant deletes the pool's standby
// pod and creates an impostor of the same name, labels and spec (the
// token hash in its environment copied): the pool never gives it a
// Function (neither its source nor its traffic) nor counts it, makes a
// standby pod of its own instead, and gives that one to the Function it
// wakes. Fails when the pool recognises its pods by name.
func TestPoolKnowsItsPodsByUIDNotName(t *testing.T) {
	ctx, c, k, p := startPool(t)
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}))
	orders := newFunction(t, ctx, c, "shop", "orders", "")
	require.NoError(t, p.Observe(orders))
	require.Eventually(t, func() bool {
		return len(podsOf(t, ctx, c, "shop", client.HasLabels{pool.LabelShape})) == 1
	}, wait, 10*time.Millisecond, "a standby pod")
	require.Equal(t, 1, k.run(ctx, "shop"))
	standby := podsOf(t, ctx, c, "shop", client.HasLabels{pool.LabelShape})[0]

	// The tenant's impostor: the same pod under the same name.
	require.NoError(t, c.Delete(ctx, &standby))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(&standby), &corev1.Pod{}))
	}, wait, 10*time.Millisecond, "the pool's pod is gone")
	impostor := standby.DeepCopy()
	impostor.ObjectMeta = metav1.ObjectMeta{Namespace: standby.Namespace, Name: standby.Name, Labels: standby.Labels}
	impostor.Status = corev1.PodStatus{}
	require.NoError(t, c.Create(ctx, impostor))
	k.start(ctx, impostor)
	require.NotEqual(t, standby.UID, impostor.UID)

	// The Function is woken: the impostor is the only started pod of the
	// pool's shape.
	ordersDep := deployment(t, ctx, c, orders)
	scale(t, ctx, c, ordersDep, 1)
	var own corev1.Pod
	require.Eventually(t, func() bool {
		for _, pod := range podsOf(t, ctx, c, "shop", client.HasLabels{pool.LabelShape}) {
			if pod.UID != impostor.UID {
				own = pod
				return true
			}
		}
		return false
	}, wait, 10*time.Millisecond, "the pool makes a standby pod of its own: the impostor does not count")
	code, name := ready(t, k.address(impostor))
	assert.Equal(t, http.StatusServiceUnavailable, code, "the impostor was sent no source")
	assert.Empty(t, name, "the impostor serves no Function")
	require.Equal(t, 1, k.run(ctx, "shop"), "the kubelet starts the pool's new pod")

	// Woken again, it gets the pool's own pod.
	scale(t, ctx, c, ordersDep, 0)
	scale(t, ctx, c, ordersDep, 1)
	var claimed corev1.Pod
	require.Eventually(t, func() bool {
		pods := podsOf(t, ctx, c, "shop", client.HasLabels{pool.LabelClaimedBy})
		if len(pods) == 1 {
			claimed = pods[0]
		}
		return len(pods) == 1
	}, wait, 10*time.Millisecond, "a standby pod is given to the woken Function")
	assert.Equal(t, own.UID, claimed.UID, "the pool's own pod, not the impostor")
	code, name = ready(t, k.address(&claimed))
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "shop/orders", name)

	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(impostor), impostor))
	assert.Equal(t, standby.Labels, impostor.Labels, "the impostor is in no Function's Service")
	assert.Empty(t, impostor.OwnerReferences)
	code, name = ready(t, k.address(impostor))
	assert.Equal(t, http.StatusServiceUnavailable, code, "the impostor was sent no source")
	assert.Empty(t, name)
}

// TestPoolGivesBackAFunctionWhoseDependenciesAreNotCached: a Function
// with dependencies is pooled when a dependency cache is configured; when
// it is woken and the cache does not hold its dependencies yet (the
// first install has not stored them), the standby host's specialize
// request fails, the pool deletes that pod (it serves nobody), the
// Function wakes on its Deployment's own pod, and ClaimFailure says why
// (the Function's status shows it); a new standby pod replaces the
// deleted one. Before that, the started standby pod was asked to prepare
// the pool's dependency set (its host asked the cache, which had none).
// The cache is a stand-in that holds nothing: the real one is the event
// bridge's, tested there and on the real node (where a prepared pod is
// given out: e2e/cluster's dependency scenario). Fails when a failed pod
// is kept or given out, the failure is not recorded, or the standby pod
// is not asked to prepare.
func TestPoolGivesBackAFunctionWhoseDependenciesAreNotCached(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	cache := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.URL.Path)
		mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(cache.Close)

	ctx, c, k, p := startPool(t)
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "deps"}}))

	fn := &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: "deps", Name: "orders"},
		Spec: v1alpha2.FunctionSpec{
			Runtime: "nodejs22",
			Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{
				Source:       `module.exports = { main: () => require('left-pad')('x', 3) };`,
				Dependencies: `{"dependencies": {"left-pad": "1.3.0"}}`,
			}},
			ScaleConfig: &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](3)},
		},
	}
	require.NoError(t, c.Create(ctx, fn))
	cfg := function.DefaultConfig().Plan
	cfg.DependencyCacheAddress = cache.URL + "/_kfn/dependencies"
	orders, err := plan.For(fn, cfg)
	require.NoError(t, err)
	require.NoError(t, orders.SetAutoscaler(true, true))
	require.NoError(t, p.Observe(orders), "pooled: its dependencies come from the cache")

	require.Eventually(t, func() bool {
		return len(podsOf(t, ctx, c, "deps", client.HasLabels{pool.LabelShape})) == 1
	}, wait, 10*time.Millisecond, "a standby pod")
	require.Equal(t, 1, k.run(ctx, "deps"))
	standby := podsOf(t, ctx, c, "deps", client.HasLabels{pool.LabelShape})[0]
	want := "GET /_kfn/dependencies/nodejs22/" + orders.Dependencies.Hash
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(asked) > 0
	}, wait, 10*time.Millisecond, "the started standby pod is asked to prepare the pool's dependencies before any wake")

	scale(t, ctx, c, deployment(t, ctx, c, orders), 1)
	key := client.ObjectKeyFromObject(fn)
	require.Eventually(t, func() bool {
		return p.ClaimFailure(key) != ""
	}, wait, 10*time.Millisecond, "the failed claim is recorded")
	assert.Contains(t, p.ClaimFailure(key), "not in the dependency cache (404)")
	mu.Lock()
	require.GreaterOrEqual(t, len(asked), 2, "the prepare, then the specialize")
	for _, a := range asked {
		assert.Equal(t, want, a, "the host asked the cache for the Function's set")
	}
	mu.Unlock()
	require.Eventually(t, func() bool {
		err := c.Get(ctx, client.ObjectKeyFromObject(&standby), &corev1.Pod{})
		return apierrors.IsNotFound(err)
	}, wait, 10*time.Millisecond, "the pod that failed is deleted")
	assert.Empty(t, podsOf(t, ctx, c, "deps", client.HasLabels{pool.LabelClaimedBy}), "no pod serves the Function: its Deployment's own does")
	require.Eventually(t, func() bool {
		pods := podsOf(t, ctx, c, "deps", client.HasLabels{pool.LabelShape})
		return len(pods) == 1 && pods[0].Name != standby.Name
	}, wait, 10*time.Millisecond, "a new standby pod")
}

// startPool starts a pool of Size 1 in a manager on a test API server, its
// standby pods run by a kubelet of the test's (real standby hosts): the
// context (ended when the test ends), the cluster, the kubelet and the
// pool.
// TestClaimGivesAFunctionAStandbyPodAtItsFirstEvent: a Function at zero
// whose Deployment KEDA has not scaled yet is claimed by its first event
// (Claim, as the event bridge calls it): every caller at once gets the
// same pod, whose host serves the Function when Claim answers; the pod is
// labelled as the Function's behind it, kept while the Deployment is at
// zero for ClaimHold, then retired; a second claim after that takes a new
// pod. Claims of a Function the pool does not serve, of one with a ready
// pod, and with no standby pod fail and say why. Fails when two callers
// get two pods, when Claim answers before the host serves the Function,
// or when the pod is retired at once because the Deployment is at zero.
func TestClaimGivesAFunctionAStandbyPodAtItsFirstEvent(t *testing.T) {
	const hold = 3 * time.Second
	ctx, c, k, p := startPool(t, func(c *pool.Config) { c.ClaimHold, c.Resync = hold, 200*time.Millisecond })
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}))
	orders := newFunction(t, ctx, c, "shop", "orders", "")
	require.NoError(t, p.Observe(orders))
	deployment(t, ctx, c, orders) // at zero: KEDA has not scaled it up
	fn := client.ObjectKey{Namespace: "shop", Name: "orders"}

	_, err := p.Claim(ctx, fn)
	require.ErrorIs(t, err, pool.ErrNoStandby, "no standby pod has started yet")
	_, err = p.Claim(ctx, client.ObjectKey{Namespace: "shop", Name: "unknown"})
	require.ErrorIs(t, err, pool.ErrNotPooled)

	require.Eventually(t, func() bool {
		return len(podsOf(t, ctx, c, "shop", client.HasLabels{pool.LabelShape})) == 1
	}, wait, 10*time.Millisecond, "a standby pod")
	require.Equal(t, 1, k.run(ctx, "shop"))
	standby := podsOf(t, ctx, c, "shop", client.HasLabels{pool.LabelShape})[0]
	// The pool takes only pods its cache has seen started.
	require.Eventually(t, func() bool {
		var pod corev1.Pod
		return c.Get(ctx, client.ObjectKeyFromObject(&standby), &pod) == nil && pod.Status.PodIP != ""
	}, wait, 10*time.Millisecond)

	// Half the callers claim over HTTP, as the event bridge does (the
	// controller's listener adds authentication in front of Handler).
	srv := httptest.NewServer(p.Handler(func(*http.Request, string, string) error { return nil }))
	t.Cleanup(srv.Close)
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	portN, err := strconv.Atoi(port)
	require.NoError(t, err)
	claimer := claims.NewClient(host, portN, func() (string, error) { return "test", nil })
	const callers = 4
	got := make([]pool.Claimed, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			if i%2 == 0 {
				got[i], errs[i] = eventuallyClaim(t, ctx, p, fn)
				return
			}
			var a claim.Answer
			require.Eventually(t, func() bool {
				a, errs[i] = claimer.Claim(ctx, fn.Namespace, fn.Name)
				return !errors.Is(errs[i], claim.ErrNoStandby)
			}, wait, 10*time.Millisecond)
			got[i] = pool.Claimed{Pod: a.Pod, Address: a.Address}
		})
	}
	wg.Wait()
	for i := range callers {
		require.NoError(t, errs[i])
		assert.Equal(t, got[0], got[i], "every caller is given the same pod")
	}
	assert.Equal(t, pool.Claimed{Pod: standby.Name, Address: k.address(&standby)}, got[0])
	code, name := ready(t, got[0].Address)
	assert.Equal(t, http.StatusOK, code, "the host serves the Function when Claim answers")
	assert.Equal(t, "shop/orders", name)

	require.Eventually(t, func() bool {
		pods := podsOf(t, ctx, c, "shop", client.MatchingLabels{pool.LabelClaimedBy: "orders"})
		return len(pods) == 1 && pods[0].Name == standby.Name && pods[0].Labels[v1alpha2.LabelFunctionName] == "orders"
	}, wait, 10*time.Millisecond, "the pod is labelled as the Function's behind the answer")
	claimedAt := time.Now()
	again, err := p.Claim(ctx, fn)
	require.NoError(t, err)
	assert.Equal(t, got[0], again, "a later first event of another replica is given the same pod")

	// The Deployment stays at zero (KEDA never scales it): the pod is kept
	// for the hold, then retired.
	require.Never(t, func() bool {
		return len(podsOf(t, ctx, c, "shop", client.MatchingLabels{pool.LabelClaimedBy: "orders"})) == 0
	}, hold-time.Since(claimedAt)-500*time.Millisecond, 50*time.Millisecond, "kept while KEDA may still scale the Deployment up")
	require.Eventually(t, func() bool {
		return len(podsOf(t, ctx, c, "shop", client.MatchingLabels{pool.LabelClaimedBy: "orders"})) == 0
	}, wait, 10*time.Millisecond, "retired after the hold with its Deployment at zero")

	// The next first event takes the next standby pod.
	require.Eventually(t, func() bool {
		k.run(ctx, "shop")
		next, err := p.Claim(ctx, fn)
		return err == nil && next.Pod != standby.Name
	}, wait, 50*time.Millisecond, "the next claim takes a new pod")

	// The listener's refusals, as the client reads them.
	_, err = claimer.Claim(ctx, "shop", "unknown")
	require.ErrorIs(t, err, claim.ErrNotPooled)
	for path, code := range map[string]int{"/claims/shop": 404, "/claims/shop/orders/x": 404, "/claims/Shop/orders": 404, "/other": 404} {
		resp, err := http.Post(srv.URL+path, "", nil)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, code, resp.StatusCode, path)
	}
	resp, err := http.Get(srv.URL + claim.Path("shop", "orders"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	refusing := httptest.NewServer(p.Handler(func(*http.Request, string, string) error { return errors.New("no") }))
	t.Cleanup(refusing.Close)
	resp, err = http.Post(refusing.URL+claim.Path("shop", "orders"), "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "allow's refusal")
	// The warm-up is checked as a claim for every Function is, and claims
	// nothing.
	var warmed [][2]string
	warming := httptest.NewServer(p.Handler(func(_ *http.Request, ns, name string) error {
		warmed = append(warmed, [2]string{ns, name})
		return nil
	}))
	t.Cleanup(warming.Close)
	resp, err = http.Post(warming.URL+claim.WarmPath, "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, [][2]string{{"", ""}}, warmed, "allowed for every Function")
	resp, err = http.Post(refusing.URL+claim.WarmPath, "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "allow's refusal of a warm-up")

	// A Function with a ready pod of its own is not claimed for.
	var d appsv1.Deployment
	require.NoError(t, c.Get(ctx, fn, &d))
	d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1, 1
	require.NoError(t, c.Status().Update(ctx, &d))
	require.Eventually(t, func() bool {
		_, err := p.Claim(ctx, fn)
		return errors.Is(err, pool.ErrServed)
	}, wait, 10*time.Millisecond)
	_, err = claimer.Claim(ctx, fn.Namespace, fn.Name)
	require.ErrorIs(t, err, claim.ErrServed)
}

// TestPoolServesABurstWithStandbyPods: a Function serving on one ready
// pod of its own is scaled up to three replicas (a burst its backlog
// needs): the pool gives it a standby pod for each of the two replicas its
// Deployment has not made ready, which serve the Function at once, and
// deletes one for each of the Deployment's own pods that becomes ready;
// scaled up from zero to three, it gets a claim and two more. Fails when
// the pool gives none (only a wake from zero), more than the replicas
// missing, or keeps them once the Deployment serves alone.
func TestPoolServesABurstWithStandbyPods(t *testing.T) {
	ctx, c, k, p := startPool(t)
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Annotations: map[string]string{pool.AnnotationSize: "3"}}}))
	orders := newFunction(t, ctx, c, "shop", "orders", "")
	require.NoError(t, p.Observe(orders))
	d := deployment(t, ctx, c, orders)
	givenTo := func(fn string) []corev1.Pod {
		return podsOf(t, ctx, c, "shop", client.MatchingLabels{pool.LabelClaimedBy: fn})
	}
	given := func() []corev1.Pod { return givenTo("orders") }
	readyOf := func(d *appsv1.Deployment, n int32) {
		t.Helper()
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(d), d))
		d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = n, n, n
		require.NoError(t, c.Status().Update(ctx, d))
	}
	setReady := func(n int32) { t.Helper(); readyOf(d, n) }
	startStandby := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool {
			k.run(ctx, "shop")
			started := 0
			for _, pod := range podsOf(t, ctx, c, "shop", client.HasLabels{pool.LabelShape}) {
				if pod.Status.PodIP != "" {
					started++
				}
			}
			return started == n
		}, wait, 10*time.Millisecond, "%d standby pods started", n)
	}
	startStandby(3)

	// One ready pod of its own, then three replicas wanted: two pods of
	// the pool's, serving the Function.
	setReady(1)
	scale(t, ctx, c, d, 1)
	require.Never(t, func() bool { return len(given()) > 0 }, 300*time.Millisecond, 10*time.Millisecond, "nothing given to a Function its own pod serves")
	scale(t, ctx, c, d, 3)
	require.Eventually(t, func() bool { return len(given()) == 2 }, wait, 10*time.Millisecond, "a standby pod for each replica not ready")
	for _, pod := range given() {
		code, name := ready(t, k.address(&pod))
		assert.Equal(t, http.StatusOK, code, pod.Name)
		assert.Equal(t, "shop/orders", name, pod.Name)
		assert.Equal(t, "orders", pod.Labels[v1alpha2.LabelFunctionName], "in the Function's Service")
	}
	require.Never(t, func() bool { return len(given()) > 2 }, 300*time.Millisecond, 10*time.Millisecond, "no more than the replicas missing")

	// The Deployment's own pods become ready: one of the pool's goes for
	// each.
	setReady(2)
	require.Eventually(t, func() bool { return len(given()) == 1 }, wait, 10*time.Millisecond, "one retired for the second ready pod")
	require.Never(t, func() bool { return len(given()) != 1 }, 300*time.Millisecond, 10*time.Millisecond, "the other kept while the third replica is not ready")
	setReady(3)
	require.Eventually(t, func() bool { return len(given()) == 0 }, wait, 10*time.Millisecond, "all retired once the Deployment serves alone")

	// From zero to three at once: the claim and two more.
	scale(t, ctx, c, d, 0)
	setReady(0)
	startStandby(3)
	scale(t, ctx, c, d, 3)
	require.Eventually(t, func() bool { return len(given()) == 3 }, wait, 10*time.Millisecond, "a claim from zero and two more")
	scale(t, ctx, c, d, 0)
	require.Eventually(t, func() bool { return len(given()) == 0 }, wait, 10*time.Millisecond, "all retired at zero")

	// A Function that does not scale to zero: never claimed, its bursts
	// served as any.
	steady := newFunctionFrom(t, ctx, c, "shop", "steady", "", 1)
	require.NoError(t, p.Observe(steady), "a Function with minReplicas 1 is pooled for its bursts")
	_, err := p.Claim(ctx, client.ObjectKey{Namespace: "shop", Name: "steady"})
	require.ErrorIs(t, err, pool.ErrNotPooled, "never claimed")
	assert.ErrorContains(t, err, "does not scale to zero")
	sd := deployment(t, ctx, c, steady)
	scale(t, ctx, c, sd, 1)
	readyOf(sd, 1)
	startStandby(3)
	scale(t, ctx, c, sd, 3)
	require.Eventually(t, func() bool { return len(givenTo("steady")) == 2 }, wait, 10*time.Millisecond, "a standby pod for each replica of its burst not ready")
	for _, pod := range givenTo("steady") {
		code, name := ready(t, k.address(&pod))
		assert.Equal(t, http.StatusOK, code, pod.Name)
		assert.Equal(t, "shop/steady", name, pod.Name)
	}
	readyOf(sd, 3)
	require.Eventually(t, func() bool { return len(givenTo("steady")) == 0 }, wait, 10*time.Millisecond, "all retired once its Deployment serves alone")
}

// eventuallyClaim claims a pod for fn, again while the pool's cache has
// not seen its standby pod started.
// TestAClaimedPodIsLabelledOnceItsHostServes: a claimed pod joins its
// Function's Service (its labels, its owner) only once its host has
// loaded the Function, so that the label's patch and what follows it (the
// EndpointSlice controller, every watcher of pods and slices) do not take
// the node's CPU while the host loads, on the wake's path. The Function's
// module marks a file when its load starts, then takes 600 ms: the pod is
// not labelled in the 300 ms after the mark, and is labelled behind the
// claim's answer. Fails when the pod is labelled while its host loads.
func TestAClaimedPodIsLabelledOnceItsHostServes(t *testing.T) {
	ctx, c, k, p := startPool(t)
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}))
	mark := filepath.Join(t.TempDir(), "loading")
	slow := newFunctionOf(t, ctx, c, "shop", "slow", `require('fs').writeFileSync(process.env.MARK, 'loading');
const end = Date.now() + 600;
while (Date.now() < end) {}
module.exports = { main: () => 'loaded' };`, "", 0, "MARK", mark)
	require.NoError(t, p.Observe(slow))
	deployment(t, ctx, c, slow)
	require.Eventually(t, func() bool {
		return len(podsOf(t, ctx, c, "shop", client.HasLabels{pool.LabelShape})) == 1
	}, wait, 10*time.Millisecond, "a standby pod")
	require.Equal(t, 1, k.run(ctx, "shop"))

	claimed := make(chan error, 1)
	go func() {
		_, err := eventuallyClaim(t, ctx, p, client.ObjectKey{Namespace: "shop", Name: "slow"})
		claimed <- err
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(mark); return err == nil }, wait, 5*time.Millisecond, "the host loads the Function")
	labelled := func() bool {
		return len(podsOf(t, ctx, c, "shop", client.MatchingLabels{pool.LabelClaimedBy: "slow"})) > 0
	}
	require.Never(t, labelled, 300*time.Millisecond, 10*time.Millisecond, "not labelled while its host loads the Function")
	require.NoError(t, <-claimed)
	require.Eventually(t, labelled, wait, 10*time.Millisecond, "labelled behind the claim's answer")
}

func eventuallyClaim(t *testing.T, ctx context.Context, p *pool.Pool, fn client.ObjectKey) (pool.Claimed, error) {
	var got pool.Claimed
	var err error
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got, err = p.Claim(ctx, fn); !errors.Is(err, pool.ErrNoStandby) {
			break
		}
	}
	return got, err
}

// startPool starts an API server, a manager with a pool configured by
// mods, and a kubelet that runs its standby pods' hosts; the test is
// skipped in -short.
func startPool(t *testing.T, mods ...func(*pool.Config)) (context.Context, client.Client, *kubelet, *pool.Pool) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an API server")
	}
	cluster := testcluster.New(t, testcluster.WithScheme(function.AddToScheme))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	ctrl.SetLogger(logr.Discard())
	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{
		Scheme: cluster.Scheme, Cache: function.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	require.NoError(t, err)
	hostDir, err := runtimes.WriteHost(t.TempDir())
	require.NoError(t, err)
	k := &kubelet{t: t, c: cluster.Client, hostDir: hostDir, addrs: map[string]string{}}
	cfg := pool.Config{Size: 1, Resources: function.DefaultConfig().Resources, Resync: time.Minute}
	for _, m := range mods {
		m(&cfg)
	}
	p, err := pool.New(mgr.GetClient(), mgr.GetCache(), cfg, pool.WithAddress(k.address), pool.WithLogger(testr.New(t)))
	require.NoError(t, err)
	require.NoError(t, mgr.Add(p))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	return ctx, cluster.Client, k, p
}
