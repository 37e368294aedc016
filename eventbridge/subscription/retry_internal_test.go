package subscription

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestRetriesWaitAtMostMaxRetryDelay: a Subscription whose reconciles
// failed many times in a row (all through a NATS outage) is tried again
// within MaxRetryDelay, not after controller-runtime's 1,000 s; the first
// retries stay quick. Fails with the default rate limiter (the 30th wait
// is 1,000 s).
func TestRetriesWaitAtMostMaxRetryDelay(t *testing.T) {
	l := retryLimiter()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "orders"}}
	first := l.When(req)
	assert.Less(t, first, MaxRetryDelay/100, "the first retry is quick")
	for range 30 {
		assert.LessOrEqual(t, l.When(req), MaxRetryDelay)
	}
	l.Forget(req)
	assert.Equal(t, first, l.When(req), "a reconcile that succeeded starts again from the quick retry")
}
