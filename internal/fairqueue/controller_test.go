package fairqueue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kfn-dev/kfn/internal/fairqueue"
	"github.com/kfn-dev/kfn/test/testcluster"
)

// TestAControllerTakesNamespacesInTurn: a controller built as kfn's are
// (controller-runtime's builder, Options.NewQueue = Workqueue, one worker)
// on a real API server: namespace big's 60 ConfigMaps and then small's
// one are queued while the worker is held; once it goes, small's is
// reconciled second, not 61st. With controller-runtime's own queue (FIFO
// within a priority) it came after all of big's: a tenant applying
// thousands of Functions held every other namespace's new Function back
// until its own were done.
func TestAControllerTakesNamespacesInTurn(t *testing.T) {
	c := testcluster.New(t)
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ns := range []string{"big", "small"} {
		require.NoError(t, c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{Scheme: c.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	held := make(chan struct{})
	pushed := &counting{Queue: fairqueue.New(), pushed: map[string]int{}}
	newQueue := func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return fairqueue.NewQueueOver(pushed, name, rl)
	}
	var mu sync.Mutex
	var order []string
	err = ctrl.NewControllerManagedBy(mgr).Named("fairness").For(&corev1.ConfigMap{}).
		WithOptions(controller.Options{NewQueue: newQueue, SkipNameValidation: ptrTo(true)}).
		Complete(reconcile.Func(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
			if (r.Namespace != "big" || r.Name[:3] != "cm-") && r.NamespacedName.String() != "small/new" {
				return reconcile.Result{}, nil
			}
			<-held
			mu.Lock()
			order = append(order, r.Namespace+"/"+r.Name)
			mu.Unlock()
			return reconcile.Result{}, nil
		}))
	require.NoError(t, err)
	go func() { _ = mgr.Start(ctx) }()
	require.True(t, mgr.GetCache().WaitForCacheSync(ctx))

	for i := range 60 {
		require.NoError(t, c.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "big", Name: fmt.Sprint("cm-", i)}}))
	}
	require.NoError(t, c.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "small", Name: "new"}}))
	// Every one queued (the worker is held on the first of big's).
	require.Eventually(t, func() bool { return pushed.of("big") >= 60 && pushed.of("small") >= 1 }, 30*time.Second, 10*time.Millisecond)
	close(held)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 61 }, 30*time.Second, 10*time.Millisecond)
	assert.Less(t, indexOf(order, "small/new"), 3, "small's ConfigMap waits behind one of big's, not all: %v", order)
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func ptrTo[T any](v T) *T { return &v }

// counting is a fairqueue.Queue that counts the requests pushed into it,
// by namespace; the workqueue that holds it guards it, but the test reads
// the counts from its own goroutine.
type counting struct {
	*fairqueue.Queue
	mu     sync.Mutex
	pushed map[string]int
}

func (c *counting) Push(r reconcile.Request) {
	c.mu.Lock()
	c.pushed[r.Namespace]++
	c.mu.Unlock()
	c.Queue.Push(r)
}

func (c *counting) of(namespace string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pushed[namespace]
}
