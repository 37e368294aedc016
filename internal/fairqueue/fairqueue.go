package fairqueue

import (
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Queue is a workqueue.Queue of reconcile requests that hands them out a
// namespace at a time: Pop takes the oldest request of the next namespace
// in turn (namespaces in the order their first waiting request came).
// Within a namespace requests keep their order. Like client-go's own
// queues it is not safe for concurrent use: the workqueue that holds it
// guards it.
type Queue struct {
	waiting map[string][]reconcile.Request // per namespace, oldest first
	turns   []string                       // namespaces with requests, in turn order
	n       int
}

var _ workqueue.Queue[reconcile.Request] = (*Queue)(nil)

// New returns an empty Queue.
func New() *Queue { return &Queue{waiting: map[string][]reconcile.Request{}} }

// Touch does nothing: a request added again while it waits keeps its
// place (the workqueue does not push it twice).
func (q *Queue) Touch(reconcile.Request) {}

// Push adds r behind the requests of its namespace.
func (q *Queue) Push(r reconcile.Request) {
	ns := r.Namespace
	if len(q.waiting[ns]) == 0 {
		q.turns = append(q.turns, ns)
	}
	q.waiting[ns] = append(q.waiting[ns], r)
	q.n++
}

// Len is how many requests wait.
func (q *Queue) Len() int { return q.n }

// Pop takes the oldest request of the namespace whose turn it is, and
// gives the turn to the next; the workqueue calls it only when Len > 0.
func (q *Queue) Pop() reconcile.Request {
	ns := q.turns[0]
	q.turns[0] = ""
	q.turns = q.turns[1:]
	rs := q.waiting[ns]
	r := rs[0]
	rs[0] = reconcile.Request{}
	if rs = rs[1:]; len(rs) == 0 {
		delete(q.waiting, ns)
	} else {
		q.waiting[ns] = rs
		q.turns = append(q.turns, ns)
	}
	q.n--
	return r
}

// Workqueue is a controller.Options.NewQueue: controller-runtime's default
// queue (rate limited, delaying, with the workqueue's metrics under the
// controller's name) over a Queue.
func Workqueue(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return newQueueOver(New(), name, rl)
}

// newQueueOver is Workqueue over the queue under.
func newQueueOver(under workqueue.Queue[reconcile.Request], name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	base := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[reconcile.Request]{Name: name, Queue: under})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[reconcile.Request]{Name: name, Queue: base})
	return workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name, DelayingQueue: delaying})
}
