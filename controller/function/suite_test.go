package function_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/test/testcluster"
)

// cluster is the API server every reconciler test uses; the controller
// runs against it for the whole package, as it would in a cluster.
var cluster *testcluster.Cluster

// wait bounds every Eventually of these tests.
const wait = 30 * time.Second

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, startController, testcluster.WithScheme(function.AddToScheme)))
}

// startController keeps the cluster and runs the Function controller on it
// until the tests are done.
func startController(c *testcluster.Cluster) (func(), error) {
	cluster = c
	if os.Getenv("KFN_TEST_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{
		Scheme:                 c.Scheme,
		Cache:                  function.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	cfg := function.DefaultConfig()
	cfg.Resources.ScalerAddress = "scaler.test:9090"
	cfg.GitPollInterval = time.Second
	cfg.GitEgress.AllowLoopback = true // the tests' repositories
	cfg.KEDACheckInterval = 200 * time.Millisecond
	cfg.Resources.GitKnownHosts = sshKnownHosts
	cfg.Plan.DependencyCacheAddress = "http://kfn-publisher.kfn-system.svc.cluster.local/_kfn/dependencies"
	ctx, cancel := context.WithCancel(context.Background())
	r, err := function.NewReconciler(mgr, cfg)
	if err == nil {
		err = r.SetupWithManager(ctx, mgr)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}, nil
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// namespace creates a namespace for one test (envtest never finishes
// deleting namespaces, so each test has its own).
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fn-test-"}}
	require.NoError(t, cluster.Client.Create(testCtx(t), ns))
	return ns.Name
}

// create creates fn without the fixture's fake UID and status.
func create(t *testing.T, fn *v1alpha2.Function) *v1alpha2.Function {
	t.Helper()
	fn.UID = ""
	fn.Status = v1alpha2.FunctionStatus{}
	require.NoError(t, cluster.Client.Create(testCtx(t), fn))
	return fn
}

// update re-reads the Function, changes it with mutate and writes it,
// retrying on conflicts. mutate runs in Eventually's goroutine: it must not
// stop the test.
func update(t *testing.T, key types.NamespacedName, mutate func(*v1alpha2.Function)) {
	t.Helper()
	var failed error // read once Eventually returned true, which came after it was written
	require.Eventually(t, func() bool {
		fn := &v1alpha2.Function{}
		if err := read(key, fn); err != nil {
			return false
		}
		mutate(fn)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		err := cluster.Client.Update(ctx, fn)
		if err != nil && !apierrors.IsConflict(err) {
			failed = err
			return true
		}
		return err == nil
	}, wait, 20*time.Millisecond)
	require.NoError(t, failed, "update function")
}

// read gets obj by key for a condition: conditions run in
// EventuallyWithT's goroutine, where nothing may stop the test (and which
// may outlive it), so read returns the error, not found included, for
// eventually to report if it lasts.
func read(key types.NamespacedName, obj client.Object) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return cluster.Client.Get(ctx, key, obj)
}

// get reads obj by key, failing the test on errors other than not found.
func get(t *testing.T, key types.NamespacedName, obj client.Object) bool {
	t.Helper()
	err := cluster.Client.Get(testCtx(t), key, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("get %T %s: %v", obj, key, err)
	}
	return err == nil
}

// eventually fails the test if check does not return nil within wait,
// reporting check's last error. check runs in another goroutine: it
// returns its errors (read, deployment), never stops the test.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NoError(c, check()) }, wait, 25*time.Millisecond)
}

// configured waits until the Function is configured for its generation
// (ConfigurationReady True) with a message that holds every want.
func configured(t *testing.T, key types.NamespacedName, want ...string) {
	t.Helper()
	eventually(t, func() error {
		fn := &v1alpha2.Function{}
		if err := read(key, fn); err != nil {
			return err
		}
		c := fn.Status.Condition(v1alpha2.ConditionConfigurationReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != fn.Generation {
			return fmt.Errorf("ConfigurationReady: %+v", c)
		}
		for _, w := range want {
			if !strings.Contains(c.Message, w) {
				return fmt.Errorf("message %q lacks %q", c.Message, w)
			}
		}
		return nil
	})
}

// condition waits until the Function's condition has the status and reason.
func condition(t *testing.T, key types.NamespacedName, ct v1alpha2.ConditionType, status metav1.ConditionStatus, reason v1alpha2.ConditionReason) *v1alpha2.Function {
	t.Helper()
	fn := &v1alpha2.Function{}
	eventually(t, func() error {
		if err := read(key, fn); err != nil {
			return err
		}
		c := fn.Status.Condition(ct)
		if c == nil {
			return fmt.Errorf("no %s condition yet: %+v", ct, fn.Status.Conditions)
		}
		if c.Status != status || c.Reason != string(reason) || c.ObservedGeneration != fn.Generation {
			return fmt.Errorf("%s is %s/%s (generation %d of %d): %s", ct, c.Status, c.Reason, c.ObservedGeneration, fn.Generation, c.Message)
		}
		return nil
	})
	return fn
}
