package publisher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
)

// countingSubs lists Subscriptions, counting its lists; set changes them.
type countingSubs struct {
	lists atomic.Int32
	mu    sync.Mutex
	subs  []v1alpha2.Subscription
}

func (c *countingSubs) ListSubscriptions(context.Context) ([]v1alpha2.Subscription, error) {
	c.lists.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.subs), nil
}

func (c *countingSubs) set(subs ...v1alpha2.Subscription) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs = subs
}

// commerce is a standard Subscription to application commerce's types.
func commerce(types ...string) v1alpha2.Subscription {
	return v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"},
		Spec:       v1alpha2.SubscriptionSpec{TypeMatching: v1alpha2.TypeMatchingStandard, Source: "commerce", Types: types},
	}
}

// subscribed asks e's publisher which events of app are subscribed.
func (e *env) subscribed(t *testing.T, app string) []publisher.SubscribedEvent {
	resp, err := http.Get(e.srv.URL + "/" + app + "/v1/events/subscribed")
	if !assert.NoError(t, err) {
		return nil
	}
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	var got publisher.SubscribedEvents
	assert.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	return got.EventsInfo
}

// TestSubscribedListsOnceASecondHoweverManyAsk: 64 requests at once, for
// 16 apps, are answered from one list of the Subscriptions (one more for
// each SubscribedFresh they took), and a Subscription changed afterwards
// is in the answer within SubscribedFresh. Before, each request listed
// (and the cluster's lister copied) every Subscription of every
// namespace: a tenant's thousands of large Subscriptions made any pod's
// requests to this endpoint, unauthenticated as Kyma's, cost the event
// bridge their whole size each.
func TestSubscribedListsOnceASecondHoweverManyAsk(t *testing.T) {
	subs := &countingSubs{}
	subs.set(commerce("order.created.v1"))
	e := newEnv(t, publisher.Config{}, nil, publisher.WithSubscriptions(subs))
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			app := fmt.Sprint("app", i%16)
			if i%16 == 0 {
				app = "commerce"
			}
			got := e.subscribed(t, app)
			if app == "commerce" {
				assert.Equal(t, []publisher.SubscribedEvent{{Name: "order.created", Version: "v1"}}, got)
			} else {
				assert.Empty(t, got, app)
			}
		})
	}
	wg.Wait()
	most := 1 + int32(time.Since(start)/publisher.SubscribedFresh)
	assert.LessOrEqual(t, subs.lists.Load(), most, "one list answers the requests of a SubscribedFresh")

	subs.set(commerce("order.created.v1", "order.deleted.v1"))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, e.subscribed(t, "commerce"), publisher.SubscribedEvent{Name: "order.deleted", Version: "v1"})
	}, 5*publisher.SubscribedFresh, 50*time.Millisecond, "a changed Subscription is listed again")
}

// TestSubscribedListsOnceASecondWithNoSubscriptions: a cluster without a
// Subscription is listed once a second too, however many ask (an empty
// list is a list).
func TestSubscribedListsOnceASecondWithNoSubscriptions(t *testing.T) {
	subs := &countingSubs{}
	e := newEnv(t, publisher.Config{}, nil, publisher.WithSubscriptions(subs))
	start := time.Now()
	for range 16 {
		assert.Empty(t, e.subscribed(t, "commerce"))
	}
	most := 1 + int32(time.Since(start)/publisher.SubscribedFresh)
	assert.LessOrEqual(t, subs.lists.Load(), most)
}
