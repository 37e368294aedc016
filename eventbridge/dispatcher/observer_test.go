package dispatcher_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
)

// steps records what an observer is told.
type steps struct {
	mu  sync.Mutex
	got []dispatcher.Step
}

func (s *steps) Observe(st dispatcher.Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, st)
}

func (s *steps) all() []dispatcher.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]dispatcher.Step(nil), s.got...)
}

func withObserver(o dispatcher.Observer) bridgeOpt {
	return func(_ *dispatcher.Config, opts *[]dispatcher.Option) {
		*opts = append(*opts, dispatcher.WithObserver(o))
	}
}

// step is what a test expects of a Step; the rest varies.
type step struct {
	outcome dispatcher.Outcome
	attempt int
	status  int
	reply   *dispatcher.EventRef
}

func TestObserverSeesEveryStepAndCountsMatchTheMetrics(t *testing.T) {
	const traceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tests := map[string]struct {
		config []string
		answer func(n int, r *http.Request, w http.ResponseWriter)
		want   []step
		counts dispatcher.Counts
	}{
		"delivered": {
			want:   []step{{outcome: dispatcher.Delivered, attempt: 1, status: 200}},
			counts: dispatcher.Counts{Delivered: 1},
		},
		"delivered with a binary reply": {
			answer: func(_ int, r *http.Request, w http.ResponseWriter) {
				w.Header().Set("Ce-Specversion", "1.0")
				w.Header().Set("Ce-Id", "reply-"+r.Header.Get("Ce-Id"))
				w.Header().Set("Ce-Source", "enricher")
				w.Header().Set("Ce-Type", "order.enriched.v1")
			},
			want:   []step{{outcome: dispatcher.Delivered, attempt: 1, status: 200, reply: &dispatcher.EventRef{ID: "reply-x", Source: "enricher", Type: "order.enriched.v1"}}},
			counts: dispatcher.Counts{Delivered: 1},
		},
		"delivered with a structured reply": {
			answer: func(_ int, _ *http.Request, w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/cloudevents+json")
				fmt.Fprint(w, `{"specversion":"1.0","id":"r1","source":"enricher","type":"order.enriched.v1"}`)
			},
			want:   []step{{outcome: dispatcher.Delivered, attempt: 1, status: 200, reply: &dispatcher.EventRef{ID: "r1", Source: "enricher", Type: "order.enriched.v1"}}},
			counts: dispatcher.Counts{Delivered: 1},
		},
		"retried, then delivered": {
			config: []string{"backoffInitial", "10ms"},
			answer: func(n int, _ *http.Request, w http.ResponseWriter) {
				if n == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			},
			want:   []step{{outcome: dispatcher.Failed, attempt: 1, status: 503}, {outcome: dispatcher.Delivered, attempt: 2, status: 200}},
			counts: dispatcher.Counts{Delivered: 1, Failed: 1},
		},
		"retried until dead-lettered": {
			config: []string{"maxDeliver", "2", "backoffInitial", "10ms"},
			answer: func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) },
			want: []step{
				{outcome: dispatcher.Failed, attempt: 1, status: 500}, {outcome: dispatcher.Failed, attempt: 2, status: 500},
				{outcome: dispatcher.DeadLettered, attempt: 2, status: 500},
			},
			counts: dispatcher.Counts{Failed: 2, DeadLettered: 1},
		},
		"refused and dead-lettered at once": {
			answer: func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) },
			want:   []step{{outcome: dispatcher.Failed, attempt: 1, status: 400}, {outcome: dispatcher.DeadLettered, attempt: 1, status: 400}},
			counts: dispatcher.Counts{Failed: 1, DeadLettered: 1},
		},
		"refused and discarded": {
			config: []string{"deadLetter", "false"},
			answer: func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusNotFound) },
			want:   []step{{outcome: dispatcher.Failed, attempt: 1, status: 404}, {outcome: dispatcher.Discarded, attempt: 1, status: 404}},
			counts: dispatcher.Counts{Failed: 1, Discarded: 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			seen := &steps{}
			b := newBridge(t, withObserver(seen))
			b.newSink("fn", tc.answer)
			s := sub("s", "fn", config(tc.config...))
			_, served := b.d.Counts("default", "s")
			assert.False(t, served, "not served yet")
			b.subscribe(s)
			b.publish("shop", "order.created.v1", "x", "payload")
			require.Eventually(t, func() bool { return len(seen.all()) == len(tc.want) }, wait, tick)

			for i, got := range seen.all() {
				want := tc.want[i]
				assert.Equal(t, want.outcome, got.Outcome, "step %d", i)
				assert.Equal(t, want.attempt, got.Attempt, "step %d", i)
				assert.Equal(t, want.status, got.Status, "step %d", i)
				assert.Equal(t, want.reply, got.Reply, "step %d", i)
				assert.Equal(t, "default", got.Namespace)
				assert.Equal(t, "s", got.Subscription)
				assert.Equal(t, "default", got.SinkNamespace)
				assert.Equal(t, "fn", got.SinkService)
				assert.Equal(t, dispatcher.EventRef{ID: "x", Source: "shop", Type: "order.created.v1"}, got.Event)
				assert.Equal(t, uint64(1), got.Sequence)
				assert.Equal(t, traceParent, got.TraceParent)
				assert.WithinDuration(t, time.Now(), got.At, wait)
				if got.Outcome == dispatcher.Delivered {
					assert.Empty(t, got.Error)
				} else {
					assert.NotEmpty(t, got.Error, "says why")
				}
			}
			require.Eventually(t, func() bool { c, _ := b.d.Counts("default", "s"); return c == tc.counts }, wait, tick)
			counts, served := b.d.Counts("default", "s")
			assert.True(t, served)
			for metric, want := range map[string]uint64{
				"kfn_eventbridge_delivered_total":         counts.Delivered,
				"kfn_eventbridge_delivery_failures_total": counts.Failed,
				"kfn_eventbridge_dead_lettered_total":     counts.DeadLettered,
				"kfn_eventbridge_discarded_total":         counts.Discarded,
			} {
				n, err := testutil.GatherAndCount(b.reg, metric)
				require.NoError(t, err)
				if want == 0 {
					continue // a counter never incremented may be absent or 0
				}
				require.Equal(t, 1, n, metric)
				assert.Equal(t, float64(want), gathered(t, b, metric), "Counts and %s agree", metric)
			}

			b.d.Remove("default", "s")
			_, served = b.d.Counts("default", "s")
			assert.False(t, served, "a removed Subscription has no counts")
			require.NoError(t, b.d.Upsert(s))
			counts, served = b.d.Counts("default", "s")
			assert.True(t, served)
			assert.Equal(t, dispatcher.Counts{}, counts, "served again, counted afresh")
		})
	}
}

// gathered is the value of the one series of a counter in b's registry.
func gathered(t *testing.T, b *bridge, metric string) float64 {
	t.Helper()
	families, err := b.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == metric {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s", metric)
	return 0
}

func TestCountsWithoutObservers(t *testing.T) {
	b := newBridge(t)
	b.newSink("fn", nil)
	b.subscribe(sub("s", "fn"))
	for i := range 3 {
		b.publish("shop", "order.created.v1", fmt.Sprint(i), "")
	}
	require.Eventually(t, func() bool { c, _ := b.d.Counts("default", "s"); return c.Delivered == 3 }, wait, tick)
}
