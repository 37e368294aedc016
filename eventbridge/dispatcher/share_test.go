package dispatcher_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
)

// TestAFanOutWaitsBehindItsOwnNamespace: a namespace's 100 Subscriptions
// on one type take one event each, to a sink that never answers; once all
// 100 are in the dispatcher's hands, another namespace's event is
// delivered, and before it the attacker's sink got no more than the
// slots' worth of its events (the slots, and those that freed when their
// turns had held them their SlotTime, one to each namespace), not all 100:
// the fan-out waits behind its own namespace's turns, not in front of the
// victim's.
func TestAFanOutWaitsBehindItsOwnNamespace(t *testing.T) {
	const slots, fanOut = 4, 100
	b := newBridge(t, withConfig(func(c *dispatcher.Config) { c.DeliverySlots, c.SlotTime = slots, time.Second }))
	release := make(chan struct{})
	attacker := b.newSink("spam", func(int, *http.Request, http.ResponseWriter) { <-release })
	t.Cleanup(func() { close(release) }) // before the sink closes: cleanups run last first
	victim := b.newSink("ledger", nil)
	var fan []*v1alpha2.Subscription
	for i := range fanOut {
		s := sub(fmt.Sprint("fan-", i), "spam", func(s *v1alpha2.Subscription) {
			s.Namespace = "mallory"
			s.Spec.Sink = "http://spam.mallory.svc.cluster.local/"
			s.Spec.Types = []string{"spam.fan.v1"}
		})
		b.subscribe(s)
		fan = append(fan, s)
	}
	b.subscribe(sub("ledger", "ledger"))
	b.publish("shop", "spam.fan.v1", "spam-1", "x")
	require.Eventually(t, func() bool {
		for _, s := range fan {
			if b.consumerInfo(s).NumAckPending != 1 {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "every event of the fan-out in the dispatcher's hands")

	b.publish("shop", "order.created.v1", "pay-1", "x")
	require.Eventually(t, func() bool { return victim.count() == 1 }, 10*time.Second, 5*time.Millisecond)
	delivered := victim.deliveries()[0].at
	before := 0
	for _, d := range attacker.deliveries() {
		if d.at.Before(delivered) {
			before++
		}
	}
	assert.LessOrEqual(t, before, 2*slots, "the attacker's events that reached its sink before the victim's")
}
