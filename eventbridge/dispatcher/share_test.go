package dispatcher_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
)

// TestAFanOutWaitsBehindItsOwnNamespace: a namespace's 100 Subscriptions
// on one type take one event each, and the dispatcher's work for each is
// slow (here its sinks' resolution, which blocks); once all 100 are in the
// dispatcher's hands, another namespace's event is delivered, and before
// it the dispatcher started its work for no more than the slots' worth of
// the attacker's events (the slots, and those that freed when their turns
// had held them their SlotTime, one to each namespace), not for all 100:
// the fan-out waits behind its own namespace's turns, not in front of the
// victim's.
func TestAFanOutWaitsBehindItsOwnNamespace(t *testing.T) {
	const slots, fanOut = 4, 100
	release := make(chan struct{})
	var mu sync.Mutex
	var started []time.Time // the attacker's resolutions
	var b *bridge
	resolve := dispatcher.ResolverFunc(func(s v1alpha2.Sink) (string, error) {
		if s.Namespace == "mallory" {
			mu.Lock()
			started = append(started, time.Now())
			mu.Unlock()
			<-release
		}
		return b.resolve(s)
	})
	b = newBridge(t, withConfig(func(c *dispatcher.Config) { c.DeliverySlots, c.SlotTime = slots, time.Second }),
		withOption(dispatcher.WithResolver(resolve)))
	t.Cleanup(func() { close(release) }) // before the dispatcher stops: cleanups run last first
	b.newSink("spam", nil)
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
	mu.Lock()
	for _, at := range started {
		if at.Before(delivered) {
			before++
		}
	}
	mu.Unlock()
	assert.LessOrEqual(t, before, 2*slots, "the attacker's events the dispatcher worked on before the victim's was delivered")
}

// TestANamespacesRetriesTakeTheirTurns: namespace mallory's sink fails
// every delivery of 100 events in flight at the shortest backoff (10 ms:
// thousands of attempts a second unbounded); with a retry rate of 10 a
// second per namespace (bursts of 10) its attempts stay within its first
// ones, the burst and the rate. Meanwhile the victim's events, each failing
// once, are retried at their own backoff: mallory's retries, waiting
// seconds for their turns, are not in front of them.
func TestANamespacesRetriesTakeTheirTurns(t *testing.T) {
	const rate, burst, inFlight = 10, 10, 100
	b := newBridge(t, withConfig(func(c *dispatcher.Config) { c.RetryRatePerNamespace, c.RetryBurstPerNamespace = rate, burst }))
	failing := b.newSink("spam", func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	var mu sync.Mutex
	failed := map[string]bool{}
	victim := b.newSink("ledger", func(_ int, r *http.Request, w http.ResponseWriter) {
		mu.Lock()
		defer mu.Unlock()
		if id := r.Header.Get("Ce-Id"); !failed[id] {
			failed[id] = true
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	b.subscribe(sub("spam", "spam", func(s *v1alpha2.Subscription) {
		s.Namespace = "mallory"
		s.Spec.Sink = "http://spam.mallory.svc.cluster.local/"
		s.Spec.Types = []string{"spam.fail.v1"}
	}, config(v1alpha2.ConfigMaxInFlightMessages, fmt.Sprint(inFlight), v1alpha2.ConfigMaxDeliver, "100",
		v1alpha2.ConfigBackoffInitial, "10ms", v1alpha2.ConfigBackoffMax, "10ms")))
	b.subscribe(sub("ledger", "ledger", config(v1alpha2.ConfigBackoffInitial, "10ms", v1alpha2.ConfigBackoffMax, "10ms")))

	for i := range inFlight {
		b.publish("shop", "spam.fail.v1", fmt.Sprint("spam-", i), "x")
	}
	require.Eventually(t, func() bool { return failing.count() >= inFlight+burst }, 10*time.Second, 5*time.Millisecond,
		"every event attempted and the burst of retries spent")
	first := failing.deliveries()[0].at

	const victims = 5
	for i := range victims {
		b.publish("shop", "order.created.v1", fmt.Sprint("pay-", i), "x")
	}
	require.Eventually(t, func() bool { return victim.count() == 2*victims }, 10*time.Second, 5*time.Millisecond,
		"the victim's events, each retried once")
	for _, d := range victim.deliveries() {
		assert.Less(t, d.at.Sub(first), 3*time.Second, "a victim's attempt waited behind the attacker's retries (%s)", d.header.Get("Ce-Id"))
	}

	// A second of the attacker's turns: unbounded, it is there within
	// milliseconds, and far past what the rate allows by then.
	require.Eventually(t, func() bool { return failing.count() >= inFlight+burst+rate }, 10*time.Second, 5*time.Millisecond)
	attempts, elapsed := failing.count(), time.Since(first)
	allowed := inFlight + burst + int(rate*elapsed.Seconds()) + 1
	assert.LessOrEqual(t, attempts, allowed, "the attacker's attempts in %s", elapsed)
}

// TestANamespacesConsumersTakeTurns: namespace mallory's 12 Subscriptions
// on one type each take an event every 20 ms; with 2 of a namespace's
// consumers streaming at once and turns of 100 ms, the Subscriptions
// handed events in a 100 ms window are few, not all 12 (NATS's work grows
// with the consumers handed events, on the server every namespace
// shares), and every event of every Subscription, and of the victim's
// beside them, is delivered.
func TestANamespacesConsumersTakeTurns(t *testing.T) {
	mean := fanOutWindows(t, victimSends)
	assert.Less(t, mean, float64(turnsFanOut)*2/3, "mallory's consumers take turns")
}

// TestANamespacesConsumersTakeTurnsBesideAQuietOne: the same beside
// another namespace's Subscription sent no event: mallory is held to its
// bound all the same, so that a namespace whose events are few meets no
// unbounded neighbour when one comes.
func TestANamespacesConsumersTakeTurnsBesideAQuietOne(t *testing.T) {
	mean := fanOutWindows(t, victimQuiet)
	assert.Less(t, mean, float64(turnsFanOut)*2/3, "mallory's consumers take turns")
}

// TestANamespaceAloneIsNotHeldToTurns: the same 12 Subscriptions of
// mallory with no other namespace's Subscription: each is handed its
// events as they come (the bound protects other namespaces, and there are
// none), nearly all 12 in each 100 ms window.
func TestANamespaceAloneIsNotHeldToTurns(t *testing.T) {
	mean := fanOutWindows(t, noVictim)
	assert.Greater(t, mean, float64(turnsFanOut)*5/6, "mallory's consumers are all pulled, mallory alone")
}

// victim is what another namespace does beside fanOutWindows's: nothing
// (no Subscription), subscribe and be sent nothing, or be sent an event
// with each of mallory's.
type victim int

const (
	noVictim victim = iota
	victimQuiet
	victimSends
)

// String says what v does, for the tests' logs.
func (v victim) String() string {
	return []string{"no other namespace", "another's Subscription, sent nothing", "another's Subscription, sent events"}[v]
}

// turnsFanOut is fanOutWindows's Subscriptions.
const turnsFanOut = 12

// fanOutWindows subscribes turnsFanOut Subscriptions of namespace mallory
// to one type each and publishes an event of it every 20 ms, 30 times,
// beside what v says another namespace does, on a bridge whose
// namespaces stream 2 consumers at once in turns of 100 ms; once every
// event is delivered it returns how many of mallory's Subscriptions were
// handed events per 100 ms window, on average.
func fanOutWindows(t *testing.T, v victim) float64 {
	t.Helper()
	const rounds, window = 30, 100 * time.Millisecond
	b := newBridge(t, withConfig(func(c *dispatcher.Config) { c.StreamingConsumersPerNamespace, c.ConsumerTurn = 2, window }))
	spam := b.newSink("spam", nil)
	ledger := b.newSink("ledger", nil)
	for i := range turnsFanOut {
		b.subscribe(sub(fmt.Sprint("fan-", i), "spam", func(s *v1alpha2.Subscription) {
			s.Namespace = "mallory"
			s.Spec.Sink = fmt.Sprintf("http://spam.mallory.svc.cluster.local/%d", i)
			s.Spec.Types = []string{"spam.fan.v1"}
		}))
	}
	victims := 0
	if v != noVictim {
		b.subscribe(sub("ledger", "ledger"))
	}
	if v == victimSends {
		victims = rounds
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := range rounds {
		<-tick.C
		b.publish("shop", "spam.fan.v1", fmt.Sprint("spam-", i), "x")
		if v == victimSends {
			b.publish("shop", "order.created.v1", fmt.Sprint("pay-", i), "x")
		}
	}
	require.Eventually(t, func() bool { return spam.count() >= turnsFanOut*rounds && ledger.count() >= victims }, 30*time.Second, 10*time.Millisecond,
		"every event delivered to every Subscription")

	windows := map[int64]map[string]bool{}
	start := spam.deliveries()[0].at
	for _, d := range spam.deliveries() {
		w := int64(d.at.Sub(start) / window)
		if windows[w] == nil {
			windows[w] = map[string]bool{}
		}
		windows[w][d.path] = true
	}
	var sum int
	for _, w := range windows {
		sum += len(w)
	}
	mean := float64(sum) / float64(len(windows))
	t.Logf("mallory's Subscriptions handed events per %v: %.1f on average over %d windows (beside them: %v)", window, mean, len(windows), v)
	return mean
}

// TestANamespacesDeliveriesInFlightAreBounded: namespace mallory's sink
// never answers, its Subscription allowing 50 in flight; with 5 in flight
// per namespace the sink has at most 5 requests at once, and the victim's
// events, beside them, are delivered.
func TestANamespacesDeliveriesInFlightAreBounded(t *testing.T) {
	const perNamespace = 5
	release := make(chan struct{})
	b := newBridge(t, withConfig(func(c *dispatcher.Config) { c.MaxInFlightPerNamespace = perNamespace }))
	spam := b.newSink("spam", func(int, *http.Request, http.ResponseWriter) { <-release })
	victim := b.newSink("ledger", nil)
	// Before the sink's server closes (it waits for its requests) and the
	// dispatcher stops: cleanups run last first.
	t.Cleanup(func() { close(release) })
	b.subscribe(sub("spam", "spam", func(s *v1alpha2.Subscription) {
		s.Namespace = "mallory"
		s.Spec.Sink = "http://spam.mallory.svc.cluster.local/"
		s.Spec.Types = []string{"spam.slow.v1"}
	}, config(v1alpha2.ConfigMaxInFlightMessages, "50")))
	b.subscribe(sub("ledger", "ledger"))
	for i := range 50 {
		b.publish("shop", "spam.slow.v1", fmt.Sprint("spam-", i), "x")
	}
	require.Eventually(t, func() bool { return spam.count() == perNamespace }, wait, tick, "the namespace's bound of requests reaches the sink")
	for i := range 5 {
		b.publish("shop", "order.created.v1", fmt.Sprint("pay-", i), "x")
	}
	require.Eventually(t, func() bool { return victim.count() == 5 }, wait, tick, "the victim's events beside them")
	assert.Equal(t, perNamespace, spam.maxInFlight(), "mallory's requests in flight at once")
	assert.Equal(t, perNamespace, spam.count(), "no more sent while those hang")
}
