package dispatcher_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/internal/jsstream"
)

func fastBudget(c *dispatcher.Config) { c.BudgetInterval = 20 * time.Millisecond }

// backlog is what JetStream counts as waiting for the Subscription.
func backlog(b *bridge, name string) int {
	info := b.consumerInfo(sub(name, name))
	return int(info.NumPending) + info.NumAckPending
}

func TestBacklogBudgetWhileTheSinkHasNoEndpoint(t *testing.T) {
	eps := newEndpoints(false)
	b := newBridge(t, withEndpoints(eps), withConfig(fastBudget))
	k := b.newSink("fn", nil)
	s := sub("fn", "fn", config("maxInFlightMessages", "2", "maxBacklog", "10"))
	b.subscribe(s)
	for i := range 50 {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	var letters, waiting int
	assert.Eventually(t, func() bool {
		letters, waiting = len(b.deadLetters()), backlog(b, "fn")
		return letters == 40 && waiting == 10
	}, wait, tick)
	require.Equal(t, [2]int{40, 10}, [2]int{letters, waiting}, "the 40 events over the budget are dead-lettered, 10 wait")
	var ids []int
	for _, dl := range b.deadLetters() {
		id, err := strconv.Atoi(dl.Headers().Get("ce-id"))
		require.NoError(t, err)
		ids = append(ids, id)
		assert.Contains(t, dl.Headers().Get(deadletter.HeaderError), "backlog over maxBacklog (10)")
	}
	slices.Sort(ids)
	assert.Equal(t, 0, ids[0])
	assert.Equal(t, 39, ids[len(ids)-1], "the oldest go first")
	assert.Zero(t, k.count())

	eps.set(true)
	require.Eventually(t, func() bool { return k.count() == 10 }, wait, tick, "the 10 within the budget are delivered")
	assert.Len(t, b.deadLetters(), 40)
}

func TestBacklogBudgetWhenTheSinkFails(t *testing.T) {
	b := newBridge(t, withConfig(fastBudget))
	failing := b.newSink("dead", func(n int, r *http.Request, w http.ResponseWriter) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	healthy := b.newSink("healthy", nil)
	b.subscribe(sub("dead", "dead", config("maxInFlightMessages", "5", "maxBacklog", "20", "backoffInitial", "1s", "backoffMax", "1s")))
	b.subscribe(sub("healthy", "healthy"))

	var mu sync.Mutex
	highest := 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			n := backlog(b, "dead")
			mu.Lock()
			highest = max(highest, n)
			mu.Unlock()
		}
	}()
	// The sampler ends with the test, however the test ends: a require
	// below that fails must not leave it reading a NATS the cleanup shut.
	stopSampling := sync.OnceFunc(func() { close(stop); <-done })
	defer stopSampling()
	for i := range 200 {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return healthy.count() == 200 }, wait, tick, "the healthy Subscription gets everything")
	require.Eventually(t, func() bool { return backlog(b, "dead") <= 20 }, wait, tick, "the dead one is held to its budget")
	stopSampling()
	assert.NotEmpty(t, b.deadLetters())
	for _, dl := range b.deadLetters() {
		assert.Contains(t, dl.Headers().Get(deadletter.HeaderError), "backlog over maxBacklog (20)")
	}
	assert.Positive(t, failing.count())
	mu.Lock()
	defer mu.Unlock()
	t.Logf("highest backlog seen for the dead Subscription: %d (budget 20, publishing 200 at once)", highest)
}

// TestNoisyNeighbour: one Subscription's sink is down for the whole test
// while another's is healthy, and events flow at 100/s into an event stream
// small enough to fill up. With the dead one on a budget, publishing never
// fails, the healthy one gets every event, and its latency (publish to
// delivery) stays that of a run without the dead neighbour; the same flow
// without a budget fills the stream, and publishing fails for everyone
// (Kyma's 507).
func TestNoisyNeighbour(t *testing.T) {
	// flow publishes 400 events at 100/s; budget "" leaves the dead
	// Subscription out (the baseline), "none" makes its consumer but
	// leaves it out of the dispatcher, whose budgets then never act on
	// it (a maxBacklog of a million would still be held to its
	// namespace's and the stream's share).
	flow := func(t *testing.T, budget string) (failed int, latencies []time.Duration, b *bridge) {
		b = newBridge(t, withConfig(fastBudget), withConfig(func(c *dispatcher.Config) {
			c.Streams.MaxBytes = 256 << 10 // about 200 events of 1 KiB
		}))
		switch budget {
		case "":
		case "none":
			cfg, err := jsstream.ConsumerConfig(sub("dead", "dead"), stream.ConsumerSettings{})
			require.NoError(t, err)
			_, err = jsstream.EnsureConsumer(context.Background(), b.js, b.streams.EventStream, cfg)
			require.NoError(t, err)
		default:
			b.newSink("dead", func(n int, r *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
			b.subscribe(sub("dead", "dead", config("maxBacklog", budget, "backoffInitial", "1s", "backoffMax", "1s")))
		}
		healthy := b.newSink("healthy", nil)
		b.subscribe(sub("healthy", "healthy"))
		data := strings.Repeat("x", 1024)
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		const events = 400 // 4 s at 100/s: twice what the stream holds
		published := make(map[string]time.Time, events)
		for i := range events {
			<-tk.C
			e := event.New()
			e.SetID(strconv.Itoa(i))
			e.SetSource("shop")
			e.SetType("order.created.v1")
			require.NoError(t, e.SetData("text/plain", data))
			published[e.ID()] = time.Now()
			if _, err := put(context.Background(), b.store, &e, "", ""); err != nil {
				failed++
				delete(published, e.ID())
			}
		}
		require.Eventually(t, func() bool { return healthy.count() == events-failed }, wait, tick)
		for _, d := range healthy.deliveries() {
			if at, ok := published[d.header.Get("Ce-Id")]; ok {
				latencies = append(latencies, d.at.Sub(at))
			}
		}
		slices.Sort(latencies)
		return failed, latencies, b
	}
	p99 := func(l []time.Duration) time.Duration { return l[len(l)*99/100] }

	var alone time.Duration
	t.Run("alone (baseline)", func(t *testing.T) {
		failed, l, _ := flow(t, "")
		require.Zero(t, failed)
		require.Len(t, l, 400)
		alone = p99(l)
		t.Logf("healthy Subscription alone: latency p50 %s, p99 %s", l[len(l)/2], alone)
	})
	t.Run("with a budget", func(t *testing.T) {
		failed, l, b := flow(t, "50")
		assert.Zero(t, failed, "publishing never fails because of the dead sink")
		require.Len(t, l, 400, "the healthy Subscription gets every event")
		// Generous for 2 shared cores: the point is that the healthy
		// Subscription never waits for the dead one (which retries every
		// second), not a tight figure.
		assert.Less(t, p99(l), max(3*alone, alone+200*time.Millisecond), "the healthy Subscription keeps its latency")
		require.Eventually(t, func() bool { return backlog(b, "dead") <= 50 }, wait, tick)
		t.Logf("healthy Subscription beside the dead one: latency p50 %s, p99 %s (alone: p99 %s)", l[len(l)/2], p99(l), alone)
		t.Logf("dead Subscription: backlog %d, %d dead-lettered over its budget", backlog(b, "dead"), len(b.deadLetters()))
	})
	t.Run("without a budget (control)", func(t *testing.T) {
		failed, l, _ := flow(t, "none")
		assert.Positive(t, failed, "the dead Subscription's events fill the stream: publishing fails for everyone")
		t.Logf("without a budget: %d of 400 publishes failed, the healthy Subscription got %d", failed, len(l))
	})
}

// TestBudgetCostsHealthySubscriptionsNothing: the budget reads the backlog
// of a Subscription only when its sink failed or is not ready, so with
// thousands of healthy Subscriptions the broker is not asked for thousands of
// consumer infos every interval. The window is the one in which the failing
// Subscription's backlog was read several times.
func TestBudgetCostsHealthySubscriptionsNothing(t *testing.T) {
	b := newBridge(t, withConfig(fastBudget))
	healthy := b.newSink("healthy", nil)
	b.newSink("dead", func(n int, r *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
	b.subscribe(sub("healthy", "healthy"))
	b.subscribe(sub("dead", "dead", config("backoffInitial", "1s", "backoffMax", "1s")))
	b.publish("shop", "order.created.v1", "first", "")
	require.Eventually(t, func() bool { return healthy.count() == 1 }, wait, tick)

	infos := func(name string) *atomic.Int64 {
		var n atomic.Int64
		nc := b.nats.Connect()
		_, err := nc.Subscribe("$JS.API.CONSUMER.INFO."+b.streams.EventStream+"."+stream.ConsumerName("default", name), func(*nats.Msg) { n.Add(1) })
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		return &n
	}
	healthyInfos, deadInfos := infos("healthy"), infos("dead")
	for i := range 20 {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return healthy.count() == 21 && deadInfos.Load() >= 5 }, wait, tick,
		"the failing Subscription's backlog is read every budget interval")
	assert.Zero(t, healthyInfos.Load(), "the healthy Subscription's backlog is never read")
}
