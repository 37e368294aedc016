package chart_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/contract/claim"
	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/controller/pool"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/internal/claims"
	"github.com/kfn-dev/kfn/test/certtest"
	"github.com/kfn-dev/kfn/test/testcluster"
	"github.com/kfn-dev/kfn/test/testport"
)

// appsNamespace is where the running scenario puts Functions and
// Subscriptions: not the release's namespace, as in a real installation.
// Each scenario gets a new one (useApps), so that go test -count=N works
// on one API server; the scenarios do not run in parallel.
var (
	appsNamespace string
	appsCount     int
)

// useApps creates a fresh namespace for the scenario's objects and deletes
// the component's Lease left by an earlier run, so that every run starts as
// a first installation does.
func useApps(t *testing.T, ctx context.Context, a client.Client, lease string) {
	t.Helper()
	appsCount++
	appsNamespace = fmt.Sprintf("apps-%d", appsCount)
	require.NoError(t, a.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appsNamespace}}))
	err := a.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: lease}})
	require.NoError(t, client.IgnoreNotFound(err))
}

// installation is the chart installed for real (CRDs, KEDA's ScaledObject
// CRD, ServiceAccounts and RBAC; no workloads, which nothing would run) and
// the binaries of the components, built from this repository.
type installation struct {
	cluster *testcluster.Cluster
	objs    []*unstructured.Unstructured
	admin   client.Client
	bin     string
}

var (
	installOnce sync.Once
	installed   *installation
	installErr  string
)

func install(t *testing.T) *installation {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the components and runs them against an API server")
	}
	c := sharedCluster(t)
	installOnce.Do(func() {
		ok := t.Run("install", func(t *testing.T) { installed = doInstall(t, c) })
		if !ok {
			installErr = "installing the chart failed (see the install subtest)"
		}
	})
	if installed == nil {
		t.Fatal(installErr)
	}
	return installed
}

func doInstall(t *testing.T, c *testcluster.Cluster) *installation {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objs := renderForKEDA(t, nil) // KEDA's CRDs are installed below
	installCRDs(t, ctx, c, objs)

	kedaDir := goOutput(t, "list", "-m", "-f", "{{.Dir}}", "github.com/kedacore/keda/v2")
	data, err := os.ReadFile(filepath.Join(kedaDir, "config", "crd", "bases", "keda.sh_scaledobjects.yaml"))
	require.NoError(t, err, "KEDA's ScaledObject CRD from the module cache")
	keda := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(data, &keda.Object))
	installCRDs(t, ctx, c, []*unstructured.Unstructured{keda})
	// Kyma's Application CRD (its shape, from the event bridge's tests): the
	// event bridge watches Applications where it is served.
	data, err = os.ReadFile(filepath.Join("..", "..", "eventbridge", "applications", "testdata", "application-crd.yaml"))
	require.NoError(t, err)
	app := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(data, &app.Object))
	installCRDs(t, ctx, c, []*unstructured.Unstructured{app})

	scheme := runtime.NewScheme()
	require.NoError(t, function.AddToScheme(scheme))
	admin, err := client.New(c.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}))
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
			require.NoError(t, c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner(fieldOwner), client.ForceOwnership),
				"apply %s %s", o.GetKind(), o.GetName())
		}
	}

	// Outlives this subtest; TestMain removes it.
	bin, err := os.MkdirTemp("", "kfn-chart-bin-")
	require.NoError(t, err)
	binDir = bin
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	build := exec.Command(goTool(t), "build", "-o", bin+string(filepath.Separator), "./cmd/controller", "./cmd/eventbridge", "./cmd/scaler")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the components:\n%s", out)
	return &installation{cluster: c, objs: objs, admin: admin, bin: bin}
}

func goTool(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command builds the components")
	return goBin
}

func goOutput(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(goTool(t), args...).Output()
	require.NoError(t, err, "go %s", strings.Join(args, " "))
	return strings.TrimSpace(string(out))
}

// process runs one component binary until stop.
type process struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan error
}

// start runs binary with args, its Kubernetes client pointed at kubeconfig;
// the test's end stops it if stop was not called.
func start(t *testing.T, binary, kubeconfig string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(binary, args...)
	// Without WatchListClient, informers start with a LIST, as they do
	// against API servers that cannot stream the initial list (the chart
	// supports Kubernetes from 1.29): the test then needs both the list
	// and the watch permission it grants.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "KUBE_FEATURE_WatchListClient=false")
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &syncWriter{w: out}, &syncWriter{w: out}
	require.NoError(t, cmd.Start())
	p := &process{cmd: cmd, out: out, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop sends SIGTERM and waits for a clean exit (killing after 20 s).
func (p *process) stop(t *testing.T) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		var exit *exec.ExitError
		if errors.As(err, &exit) && !exit.Exited() && !p.started() {
			return // SIGTERM before the component installed its handler
		}
		if err != nil {
			t.Errorf("%s exited with %v:\n%s", filepath.Base(p.cmd.Path), err, p.output())
		}
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop on SIGTERM:\n%s", filepath.Base(p.cmd.Path), p.output())
	}
}

// started reports whether the component got as far as logging anything.
func (p *process) started() bool { return p.output() != "" }

func (p *process) output() string {
	if w, ok := p.cmd.Stdout.(*syncWriter); ok {
		return w.String()
	}
	return ""
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// eventually waits for cond, reporting the component's output on timeout.
func eventually(t *testing.T, p *process, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		if cond(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s; output:\n%s", what, p.output())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func inlineFunction(name string, minReplicas, maxReplicas int32) *v1alpha2.Function {
	return &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: appsNamespace},
		Spec: v1alpha2.FunctionSpec{
			Runtime:     v1alpha2.Runtime("nodejs22"),
			Source:      v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: "module.exports = { main: () => 'ok' }"}},
			ScaleConfig: &v1alpha2.ScaleConfig{MinReplicas: ptr.To(minReplicas), MaxReplicas: ptr.To(maxReplicas)},
		},
	}
}

func exists(ctx context.Context, c client.Client, obj client.Object, name string) bool {
	err := c.Get(ctx, client.ObjectKey{Namespace: appsNamespace, Name: name}, obj)
	return err == nil
}

func gone(ctx context.Context, c client.Client, obj client.Object, name string) bool {
	err := c.Get(ctx, client.ObjectKey{Namespace: appsNamespace, Name: name}, obj)
	return apierrors.IsNotFound(err)
}

// leaderEvent reports whether the component's "became leader" Event on its
// Lease is in the release's namespace.
func leaderEvent(ctx context.Context, c client.Client, lease string) bool {
	var list corev1.EventList
	if err := c.List(ctx, &list, client.InNamespace(releaseNamespace)); err != nil {
		return false
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Lease" && e.InvolvedObject.Name == lease {
			return true
		}
	}
	return false
}

// TestControllerRBAC runs the controller binary with the chart's rendered
// config file, as the chart's ServiceAccount, through a Function's life:
// inline with an HPA, switched to a KEDA ScaledObject by a Subscription,
// deleted and recreated under the same name (the old children are deleted),
// a Git Function reading its credentials Secret, and leader election. Then
// it checks the calls against the chart's grants both ways.
func TestControllerRBAC(t *testing.T) {
	in := install(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	useApps(t, ctx, in.admin, "kfn-function-controller")
	kubeconfig, rec := serviceAccountProxy(t, in.cluster, releaseNamespace, "kfn-controller")

	config := filepath.Join(t.TempDir(), "controller.yaml")
	cm := typed(t, in.objs).configMaps["kfn-controller"]
	require.NotNil(t, cm)
	require.NoError(t, os.WriteFile(config, []byte(cm.Data["controller.yaml"]), 0o600))
	dep := typed(t, in.objs).deployments["kfn-controller"]
	args := container(t, dep).Args
	require.Equal(t, []string{"--config=/etc/kfn/controller.yaml"}, args, "the test runs the rendered config file")
	claimAddr := testport.Addr(t)
	p := start(t, filepath.Join(in.bin, "controller"), kubeconfig,
		"--config="+config, "--metrics-bind-address=0", "--health-probe-bind-address=0", "--claim-bind-address="+claimAddr)

	a := in.admin
	eventually(t, p, "the controller leads", func(ctx context.Context) bool {
		var l coordinationv1.Lease
		return a.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: "kfn-function-controller"}, &l) == nil
	})

	// A Function with an HPA.
	require.NoError(t, a.Create(ctx, inlineFunction("orders", 1, 3)))
	eventually(t, p, "orders has its children and an HPA", func(ctx context.Context) bool {
		return exists(ctx, a, &corev1.ConfigMap{}, "orders") && exists(ctx, a, &appsv1.Deployment{}, "orders") &&
			exists(ctx, a, &corev1.Service{}, "orders") && exists(ctx, a, &autoscalingv2.HorizontalPodAutoscaler{}, "orders")
	})
	// A Subscription to it: KEDA scales it on queue depth instead.
	sub := &eventingv1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: appsNamespace},
		Spec:       eventingv1alpha2.SubscriptionSpec{Sink: "http://orders." + appsNamespace + ".svc.cluster.local", Source: "shop", Types: []string{"order.created.v1"}},
	}
	require.NoError(t, a.Create(ctx, sub))
	eventually(t, p, "orders has a ScaledObject and no HPA", func(ctx context.Context) bool {
		return exists(ctx, a, &kedav1alpha1.ScaledObject{}, "orders") && gone(ctx, a, &autoscalingv2.HorizontalPodAutoscaler{}, "orders")
	})
	// Deleted and created again: the children of the old one go (no
	// garbage collector runs here, so the controller deletes them).
	old := &v1alpha2.Function{}
	require.NoError(t, a.Get(ctx, client.ObjectKey{Namespace: appsNamespace, Name: "orders"}, old))
	require.NoError(t, a.Delete(ctx, old))
	eventually(t, p, "the Function is gone", func(ctx context.Context) bool { return gone(ctx, a, &v1alpha2.Function{}, "orders") })
	// Waiting for its ScaledObject to go makes the delete certain: a new
	// Function created at once may be reconciled in the same pass and
	// adopt the old ScaledObject by server-side apply instead.
	eventually(t, p, "its ScaledObject is deleted by the controller", func(ctx context.Context) bool {
		return gone(ctx, a, &kedav1alpha1.ScaledObject{}, "orders")
	})
	fresh := inlineFunction("orders", 1, 3)
	require.NoError(t, a.Create(ctx, fresh))
	eventually(t, p, "the new Function owns a new Deployment", func(ctx context.Context) bool {
		var d appsv1.Deployment
		if !exists(ctx, a, &d, "orders") {
			return false
		}
		ref := metav1.GetControllerOf(&d)
		return ref != nil && ref.UID == fresh.UID
	})
	// A Git Function reads its credentials Secret (the repository is unreachable).
	require.NoError(t, a.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-creds", Namespace: appsNamespace},
		StringData: map[string]string{"username": "u", "password": "p"}}))
	require.NoError(t, a.Create(ctx, &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Name: "from-git", Namespace: appsNamespace},
		Spec: v1alpha2.FunctionSpec{Runtime: v1alpha2.Runtime("python312"), Source: v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{
			URL:        "http://127.0.0.1:1/repo.git",
			Auth:       &v1alpha2.RepositoryAuth{Type: v1alpha2.RepositoryAuthBasic, SecretName: "git-creds"},
			Repository: v1alpha2.Repository{Reference: "main", BaseDir: "/"},
		}}},
	}))
	eventually(t, p, "from-git says its source cannot be fetched", func(ctx context.Context) bool {
		var fn v1alpha2.Function
		if !exists(ctx, a, &fn, "from-git") {
			return false
		}
		c := fn.Status.Condition(v1alpha2.ConditionConfigurationReady)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	// A Function that scales to zero gets the warm pool's standby pod in
	// its namespace; deleted, it takes the pod with it.
	require.NoError(t, a.Create(ctx, inlineFunction("idle", 0, 3)))
	standbyPods := func(ctx context.Context) int {
		var pods corev1.PodList
		if a.List(ctx, &pods, client.InNamespace(appsNamespace), client.HasLabels{pool.LabelShape}) != nil {
			return -1
		}
		return len(pods.Items)
	}
	eventually(t, p, "the warm pool makes a standby pod for idle", func(ctx context.Context) bool { return standbyPods(ctx) == 1 })
	// The event bridge claims it on the claim port with its token for
	// kfn's audience: reviewed, and its access asked of RBAC (the event
	// bridge's ClusterRole). No kubelet runs the pod here: the pool has no
	// started standby pod to give.
	host, port, err := net.SplitHostPort(claimAddr)
	require.NoError(t, err)
	portN, err := strconv.Atoi(port)
	require.NoError(t, err)
	bridgeToken := audienceToken(t, ctx, in, releaseNamespace, "kfn-eventbridge", auth.Audience)
	bridge := claims.NewClient(host, portN, func() (string, error) { return bridgeToken, nil })
	eventually(t, p, "the leader answers the event bridge's claim", func(ctx context.Context) bool {
		_, err := bridge.Claim(ctx, appsNamespace, "idle")
		return errors.Is(err, claim.ErrNoStandby)
	})
	tenantToken := audienceToken(t, ctx, in, appsNamespace, "tenant", auth.Audience)
	_, err = claims.NewClient(host, portN, func() (string, error) { return tenantToken, nil }).Claim(ctx, appsNamespace, "idle")
	require.ErrorContains(t, err, "answered 403", "a tenant's ServiceAccount may not claim")
	require.NoError(t, a.Delete(ctx, inlineFunction("idle", 0, 3)))
	eventually(t, p, "the standby pod goes with the last Function that needed it", func(ctx context.Context) bool { return standbyPods(ctx) == 0 })
	eventually(t, p, "condition changes are Events", func(ctx context.Context) bool {
		var list eventsv1.EventList
		return a.List(ctx, &list, client.InNamespace(appsNamespace)) == nil && len(list.Items) > 0
	})
	eventually(t, p, "the leader Event is written and the Lease renewed", func(ctx context.Context) bool {
		return leaderEvent(ctx, a, "kfn-function-controller") && rec.has("update", "leases", releaseNamespace)
	})
	p.stop(t)

	grants := grantsOf(t, in.objs, releaseNamespace, "kfn-controller")
	checkLeastPrivilege(t, rec.Calls(), grants, map[grant]string{
		{Group: "events.k8s.io", Resource: "events", Verb: "patch"}: "client-go's event broadcaster patches an Event series when the same event repeats within minutes; the scenario repeats none",
		{Group: "", Resource: "pods", Verb: "patch"}:                "the warm pool labels a standby pod as a woken Function's once its host took the Function, which needs a running host at the pod's address: no kubelet runs here (controller/pool's TestPoolGivesAStandbyPodToAFunctionWokenFromZero and the real node claim)",
	})
}

// TestEventBridgeRBAC runs the eventbridge binary with the chart's rendered
// arguments (addresses and the NATS URL changed to the test's), as the
// chart's ServiceAccount, against an embedded NATS: a Subscription to an
// existing Service gets its finalizer, consumer and status; one to a missing
// Service gets a False status; a deleted one is finalized; the dispatcher
// watches EndpointSlices; the reconciler is leader-elected. Then it checks
// the calls against the chart's grants both ways.
func TestEventBridgeRBAC(t *testing.T) {
	in := install(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	useApps(t, ctx, in.admin, "kfn-eventbridge-reconciler")
	kubeconfig, rec := serviceAccountProxy(t, in.cluster, releaseNamespace, "kfn-eventbridge")

	// The chart's NATS, with its users: the bridge connects as its own.
	n := natsOf(t, typed(t, in.objs))
	ns := n.startSingle(t)

	args := container(t, typed(t, in.objs).deployments["kfn-eventbridge"]).Args
	adminAddr, metricsAddr := testport.Addr(t), testport.Addr(t)
	exposeAddr := testport.Addr(t)
	exposeDir := t.TempDir() // as eventbridge.gateway.external.tls's Secret, mounted
	exposeCA := certtest.WriteSelfSigned(t, exposeDir, "orders.example.com")
	exposeCert, exposeKey := filepath.Join(exposeDir, "tls.crt"), filepath.Join(exposeDir, "tls.key")
	args = append(append([]string(nil), args...), "-nats-url="+ns.ClientURL(), "-nats-password-file="+n.passwordFile(t, "eventbridge"), "-listen=127.0.0.1:0", "-gateway-listen=127.0.0.1:0", "-admin-listen="+adminAddr, "-metrics-listen="+metricsAddr, "-expose-listen="+exposeAddr,
		"-expose-tls-cert-file="+exposeCert, "-expose-tls-key-file="+exposeKey, // eventbridge.gateway.external.tls's flags
		"-stream-replicas=1") // one embedded server; the default profile renders 3
	p := start(t, filepath.Join(in.bin, "eventbridge"), kubeconfig, args...)

	a := in.admin
	require.NoError(t, a.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "billing", Namespace: appsNamespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}))
	newSub := func(name, sink string) *eventingv1alpha2.Subscription {
		return &eventingv1alpha2.Subscription{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: appsNamespace},
			Spec:       eventingv1alpha2.SubscriptionSpec{Sink: "http://" + sink + "." + appsNamespace + ".svc.cluster.local", Source: "shop", Types: []string{"order.created.v1"}},
		}
	}
	require.NoError(t, a.Create(ctx, newSub("billing", "billing")))
	require.NoError(t, a.Create(ctx, newSub("nowhere", "missing")))
	eventually(t, p, "billing is ready with its finalizer", func(ctx context.Context) bool {
		var s eventingv1alpha2.Subscription
		return exists(ctx, a, &s, "billing") && s.Status.Ready && slices.Contains(s.Finalizers, subscription.Finalizer)
	})
	eventually(t, p, "nowhere has a status that names the missing Service", func(ctx context.Context) bool {
		var s eventingv1alpha2.Subscription
		return exists(ctx, a, &s, "nowhere") && !s.Status.Ready && len(s.Status.Conditions) > 0
	})
	var billing eventingv1alpha2.Subscription
	require.NoError(t, a.Get(ctx, client.ObjectKey{Namespace: appsNamespace, Name: "billing"}, &billing))
	require.NoError(t, a.Delete(ctx, &billing))
	eventually(t, p, "billing is finalized", func(ctx context.Context) bool { return gone(ctx, a, &eventingv1alpha2.Subscription{}, "billing") })
	eventually(t, p, "the leader Event is written and the Lease renewed", func(ctx context.Context) bool {
		return leaderEvent(ctx, a, "kfn-eventbridge-reconciler") && rec.has("update", "leases", releaseNamespace)
	})
	eventually(t, p, "Kyma Applications are watched", func(context.Context) bool { return rec.has("watch", "applications", "") })
	exposesAPIRules(t, ctx, p, a, exposeAddr, exposeCA)
	// The admin API (-admin-auth=kubernetes): a user's token is reviewed,
	// a client certificate checked against the cluster's client CA, and
	// each caller's access asked of RBAC, through the view role's rule.
	deadLetterReader(t, ctx, in, "dlq-token")
	tokenUser := tokenConfig(t, ctx, in, "dlq-token")
	certUser, err := in.cluster.AddUser("dlq-cert")
	require.NoError(t, err)
	require.NoError(t, a.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dlq-cert", Namespace: appsNamespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kfn-eventbridge-deadletters-view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "dlq-cert"}}}))
	for _, u := range []*rest.Config{tokenUser, certUser} {
		rt, err := auth.ClientTransport(u)
		require.NoError(t, err)
		answers := func(path string, code int) func(context.Context) bool {
			return func(ctx context.Context) bool {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+adminAddr+path, nil)
				resp, err := (&http.Client{Transport: rt}).Do(req)
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == code
			}
		}
		eventually(t, p, "the admin API lists "+appsNamespace+"'s dead letters for a user the view role lets",
			answers("/deadletters?namespace="+appsNamespace, http.StatusOK))
		// The recent events' paths (kfn trace): the view role reads them
		// too; an event the namespace never saw is 404, not 403.
		eventually(t, p, "the admin API reads "+appsNamespace+"'s event paths for a user the view role lets",
			answers("/events/never-published?namespace="+appsNamespace, http.StatusNotFound))
	}
	// The metrics (-metrics-auth=kubernetes): to a ServiceAccount bound
	// to the chart's metrics-reader role, as serviceMonitor binds
	// Prometheus's; refused to the dead-letter reader.
	require.NoError(t, a.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: appsNamespace}}))
	require.NoError(t, a.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kfn-test-scraper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kfn-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: appsNamespace, Name: "scraper"}}}))
	scrape := func(u *rest.Config) int {
		rt, err := auth.ClientTransport(u)
		require.NoError(t, err)
		resp, err := (&http.Client{Transport: rt}).Get("https://" + metricsAddr + "/metrics")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	scraper := tokenConfig(t, ctx, in, "scraper")
	eventually(t, p, "Prometheus's account reads the metrics over TLS", func(context.Context) bool { return scrape(scraper) == http.StatusOK })
	assert.Equal(t, http.StatusForbidden, scrape(tokenUser), "an account without the metrics-reader role")
	p.stop(t)

	checkLeastPrivilege(t, rec.Calls(), grantsOf(t, in.objs, releaseNamespace, "kfn-eventbridge"), map[grant]string{
		{Group: "serverless.kyma-project.io", Resource: "functions/claim", Verb: "create"}: "no call of the event bridge's: the controller's claim port asks RBAC whether its caller may (TestControllerRBAC claims with the event bridge's token)",
	})
}

// TestScalerRBAC runs the scaler binary with the chart's arguments under
// its ServiceAccount: it lists and watches Subscriptions in every
// namespace to bind each one's JetStream consumer to the Function its sink
// names (package scaler), and nothing else (no leader election: every replica
// answers KEDA from its own refresh loop). Its grants are checked against
// its calls, both ways. It serves the chart's generated certificates, and
// answers KEDA's rendered client certificate only.
func TestScalerRBAC(t *testing.T) {
	in := install(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	useApps(t, ctx, in.admin, "kfn-scaler") // the scaler holds no Lease: nothing to delete
	kubeconfig, rec := serviceAccountProxy(t, in.cluster, releaseNamespace, "kfn-scaler")

	n := natsOf(t, typed(t, in.objs))
	ns := n.startSingle(t)

	// The rendered certificates, in the files the Secret's volume would
	// hold: the scaler serves them, and KEDA's is the only way in.
	tlsDir, keda := writeScalerTLS(t, in.objs)
	var args []string
	for _, a := range container(t, typed(t, in.objs).deployments["kfn-scaler"]).Args {
		args = append(args, strings.ReplaceAll(a, "/etc/kfn/tls/", tlsDir+"/"))
	}
	grpcAddr := testport.Addr(t)
	args = append(args, "-nats-url="+ns.ClientURL(), "-nats-password-file="+n.passwordFile(t, "scaler"), "-listen="+grpcAddr, "-metrics-listen=")
	p := start(t, filepath.Join(in.bin, "scaler"), kubeconfig, args...)
	a := in.admin
	require.NoError(t, a.Create(ctx, &eventingv1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: appsNamespace},
		Spec:       eventingv1alpha2.SubscriptionSpec{Sink: "http://orders." + appsNamespace + ".svc.cluster.local", Source: "shop", Types: []string{"order.created.v1"}},
	}))
	eventually(t, p, "the scaler lists and watches Subscriptions and serves gRPC", func(context.Context) bool {
		return rec.has("list", "subscriptions", "") && rec.has("watch", "subscriptions", "") && strings.Contains(p.output(), `"server":"grpc"`)
	})
	require.NoError(t, scalerCall(t, grpcAddr, keda["ca.crt"], keda), "KEDA's rendered certificate is answered")
	require.Error(t, scalerCall(t, grpcAddr, keda["ca.crt"], nil), "a caller without it is refused")
	p.stop(t)

	checkLeastPrivilege(t, rec.Calls(), grantsOf(t, in.objs, releaseNamespace, "kfn-scaler"), nil)
	assert.Empty(t, grantsOf(t, render(t, map[string]any{"keda": map[string]any{"enabled": false}}), releaseNamespace, "kfn-scaler"),
		"no scaler, no grants, without KEDA")
}

// deadLetterReader makes a ServiceAccount of appsNamespace bound to the
// chart's view rule for dead letters there.
func deadLetterReader(t *testing.T, ctx context.Context, in *installation, name string) {
	t.Helper()
	require.NoError(t, in.admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: appsNamespace}}))
	require.NoError(t, in.admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: appsNamespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kfn-eventbridge-deadletters-view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: appsNamespace, Name: name}}}))
}

// tokenConfig is a configuration with a token of the ServiceAccount name
// of appsNamespace, as a kubeconfig of it would have.
// audienceToken is a token of ServiceAccount namespace/name (made when
// missing) for audience.
func audienceToken(t *testing.T, ctx context.Context, in *installation, namespace, name, audience string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(in.cluster.Config)
	require.NoError(t, err)
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		require.True(t, apierrors.IsAlreadyExists(err), "%v", err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

func tokenConfig(t *testing.T, ctx context.Context, in *installation, name string) *rest.Config {
	t.Helper()
	cs, err := kubernetes.NewForConfig(in.cluster.Config)
	require.NoError(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(appsNamespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return &rest.Config{Host: in.cluster.Config.Host, BearerToken: tr.Status.Token}
}

// exposesAPIRules: the event bridge watches APIRules and writes their
// status with the chart's RBAC (Ready; Error for a later APIRule that
// claims a taken host, saying which holds it), and serves their hosts on
// -expose-listen, over TLS with the certificate of its files (billing is
// a Service, not a Function, without endpoints: the gateway says so; a
// host no APIRule has is 404).
func exposesAPIRules(t *testing.T, ctx context.Context, p *process, a client.Client, exposeAddr string, ca *x509.CertPool) {
	t.Helper()
	apiRule := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("gateway.kyma-project.io/v2")
		u.SetKind("APIRule")
		u.SetNamespace(appsNamespace)
		u.SetName(name)
		require.NoError(t, unstructured.SetNestedField(u.Object, map[string]any{
			"hosts":   []any{"orders.example.com"},
			"service": map[string]any{"name": "billing", "port": int64(80)},
			"rules":   []any{map[string]any{"path": "/*", "methods": []any{"GET"}, "noAuth": true}},
		}, "spec"))
		return u
	}
	require.NoError(t, a.Create(ctx, apiRule("orders")))
	state := func(ctx context.Context, name string) (string, string) {
		u := apiRule(name)
		if err := a.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return "", err.Error()
		}
		st, _, _ := unstructured.NestedString(u.Object, "status", "state")
		desc, _, _ := unstructured.NestedString(u.Object, "status", "description")
		return st, desc
	}
	eventually(t, p, "the APIRule is Ready", func(ctx context.Context) bool { st, _ := state(ctx, "orders"); return st == "Ready" })
	require.NoError(t, a.Create(ctx, apiRule("later")))
	eventually(t, p, "the later APIRule of the same host is an Error that names the holder", func(ctx context.Context) bool {
		st, desc := state(ctx, "later")
		return st == "Error" && strings.Contains(desc, "orders.example.com is held by APIRule "+appsNamespace+"/orders")
	})
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca, ServerName: "orders.example.com"}}}
	get := func(host string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+exposeAddr+"/x", nil)
		req.Host = host
		resp, err := https.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := get("orders.example.com")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "service "+appsNamespace+"/billing port 80: no ready endpoint",
		"the APIRule's rule, to a Service that is not a Function, read with the chart's RBAC (envtest runs no EndpointSlice controller)")
	code, body = get("nobody.example.com")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, `no APIRule has host "nobody.example.com"`)
}
