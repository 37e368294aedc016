package dispatcher_test

import (
	"context"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// An event routed by a Kyma Application's type (the publisher's
// application-type lookup) reaches the Subscriptions of that type, standard
// (source: the type) and exact (<type>.<event type>), as in Kyma, not
// those of the application's name; the sink sees the event's own source
// and none of kfn's routing header.
func TestApplicationTypeRouting(t *testing.T) {
	b := newBridge(t)
	byType := b.newSink("bytype", nil)
	byName := b.newSink("byname", nil)
	exact := b.newSink("exact", nil)
	b.subscribe(sub("bytype", "bytype", func(s *v1alpha2.Subscription) { s.Spec.Source = "commerce" }))
	b.subscribe(sub("byname", "byname", func(s *v1alpha2.Subscription) { s.Spec.Source = "commerce-prod" }))
	b.subscribe(sub("exact", "exact", func(s *v1alpha2.Subscription) {
		s.Spec.TypeMatching = v1alpha2.TypeMatchingExact
		s.Spec.Source = ""
		s.Spec.Types = []string{"commerce.order.created.v1"}
	}))

	e := event.New()
	e.SetID("r1")
	e.SetSource("commerce-prod")
	e.SetType("order.created.v1")
	require.NoError(t, e.SetData("application/json", map[string]int{"id": 1}))
	_, err := put(context.Background(), b.store, &e, "commerce", "")
	require.NoError(t, err)
	b.publish("commerce-prod", "order.created.v1", "r2", "not routed: the name's own")

	require.Eventually(t, func() bool { return byType.count() == 1 && exact.count() == 1 && byName.count() == 1 }, wait, tick)
	got := byType.deliveries()[0]
	assert.Equal(t, "r1", got.header.Get("Ce-Id"))
	assert.Equal(t, "commerce-prod", got.header.Get("Ce-Source"))
	assert.Empty(t, got.header.Get("Kfn-Route-Source"), "kfn's routing header stays inside")
	assert.Equal(t, "r1", exact.deliveries()[0].header.Get("Ce-Id"))
	assert.Equal(t, "r2", byName.deliveries()[0].header.Get("Ce-Id"))
	require.Eventually(t, func() bool { return b.consumerInfo(sub("byname", "byname")).NumAckPending == 0 }, wait, tick)
	assert.Equal(t, 1, byName.count())
}
