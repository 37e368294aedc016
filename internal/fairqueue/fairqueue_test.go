package fairqueue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kfn-dev/kfn/internal/fairqueue"
)

func req(ns, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

// TestANamespaceWaitsBehindOneOfEachOther: 1,000 requests of namespace
// big, then one of small and one of tiny: small's is handed out second
// and tiny's third, not behind big's thousand; big's keep their order,
// and every request is handed out once.
func TestANamespaceWaitsBehindOneOfEachOther(t *testing.T) {
	q := fairqueue.New()
	for i := range 1000 {
		q.Push(req("big", fmt.Sprint(i)))
	}
	q.Push(req("small", "new"))
	q.Push(req("tiny", "new"))
	require.Equal(t, 1002, q.Len())
	got := []reconcile.Request{q.Pop(), q.Pop(), q.Pop(), q.Pop()}
	assert.Equal(t, []reconcile.Request{req("big", "0"), req("small", "new"), req("tiny", "new"), req("big", "1")}, got)
	for i := 2; i < 1000; i++ {
		assert.Equal(t, req("big", fmt.Sprint(i)), q.Pop())
	}
	assert.Zero(t, q.Len())
	q.Push(req("small", "again"))
	assert.Equal(t, req("small", "again"), q.Pop(), "an emptied queue takes requests again")
}

// TestTheControllersQueueIsFairAndStillAWorkqueue: Workqueue's queue (what
// the controllers get) hands out another namespace's request before the
// backlog of the first, and keeps the workqueue's promises: a request
// added while it waits is not handed out twice, one added while it is
// processed comes again after Done, delayed requests come after their
// delay.
func TestTheControllersQueueIsFairAndStillAWorkqueue(t *testing.T) {
	q := fairqueue.Workqueue("test", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	for i := range 100 {
		q.Add(req("big", fmt.Sprint(i)))
	}
	q.Add(req("big", "0")) // waiting already: not twice
	q.Add(req("small", "new"))
	first, _ := q.Get()
	second, _ := q.Get()
	assert.Equal(t, req("big", "0"), first)
	assert.Equal(t, req("small", "new"), second, "another namespace's request before the first's backlog")
	q.Add(first) // while it is processed: again after Done
	q.Done(first)
	q.Done(second)
	seen := map[reconcile.Request]int{}
	for q.Len() > 0 {
		r, _ := q.Get()
		seen[r]++
		q.Done(r)
	}
	assert.Len(t, seen, 100, "the rest of big, and big/0 again")
	assert.Equal(t, 1, seen[req("big", "0")])

	q.AddAfter(req("late", "x"), 50*time.Millisecond)
	start := time.Now()
	r, _ := q.Get()
	assert.Equal(t, req("late", "x"), r)
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "after its delay")
	q.Done(r)
}
