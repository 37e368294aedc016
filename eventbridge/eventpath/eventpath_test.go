package eventpath_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
)

// outline draws chains, in the order of their first events, as indented
// lines: each event as "<origin> <id>", each delivery as "-> <subscription>
// at <function>: <outcome> after <n> [<statuses of its attempts>]".
func outline(chains []eventpath.Chain) string {
	chains = slices.Clone(chains)
	slices.SortFunc(chains, func(a, b eventpath.Chain) int { return cmp.Compare(a.Events[0].Sequence, b.Events[0].Sequence) })
	var b strings.Builder
	var event func(e *eventpath.Event, depth int)
	event = func(e *eventpath.Event, depth int) {
		pad := strings.Repeat("  ", depth)
		fmt.Fprintf(&b, "%s%s %s\n", pad, e.Origin, e.ID)
		for _, d := range e.Deliveries {
			var statuses []string
			for _, s := range d.Steps {
				statuses = append(statuses, fmt.Sprint(s.Status))
			}
			fmt.Fprintf(&b, "%s  -> %s at %s: %s after %d [%s]\n", pad, d.Subscription, d.Function, d.Outcome, d.Attempts, strings.Join(statuses, " "))
			for _, x := range d.Emitted {
				event(x, depth+2)
			}
		}
		for _, x := range e.Replays {
			event(x, depth+1)
		}
	}
	for _, c := range chains {
		fmt.Fprintf(&b, "chain (%d)\n", len(c.Events))
		for _, e := range c.Events {
			event(e, 1)
		}
	}
	return b.String()
}

// settled reports whether every delivery in chains has an outcome other
// than failed (no attempt under way or to come).
func settled(chains []eventpath.Chain) bool {
	var ok func(e *eventpath.Event) bool
	ok = func(e *eventpath.Event) bool {
		for _, d := range e.Deliveries {
			if d.Outcome == "" || d.Outcome == dispatcher.Failed {
				return false
			}
			for _, x := range d.Emitted {
				if !ok(x) {
					return false
				}
			}
		}
		for _, x := range e.Replays {
			if !ok(x) {
				return false
			}
		}
		return true
	}
	for _, c := range chains {
		for _, e := range c.Events {
			if !ok(e) {
				return false
			}
		}
	}
	return true
}

// eventually waits until the outline of all chains is want.
func eventually(t *testing.T, rec *eventpath.Recorder, want string) []eventpath.Chain {
	t.Helper()
	var got []eventpath.Chain
	ok := assert.Eventually(t, func() bool {
		got = rec.Chains(0)
		return settled(got) && outline(got) == want
	}, wait, tick)
	if !ok {
		t.Fatalf("chains:\n%s\nwant:\n%s", outline(got), want)
	}
	return got
}

func TestAChainOfFunctionsIsOneTree(t *testing.T) {
	p := newPipeline(t, 0)
	fulfil := p.function("fulfil", p.emits("order.fulfilled.v1"))
	p.function("notify", replies("order.notified.v1"))
	p.function("audit", nil)
	p.subscribe("fulfil", "fulfil", "order.created.v1")
	p.subscribe("audit", "audit", "order.created.v1")
	p.subscribe("notify", "notify", "order.fulfilled.v1")
	p.subscribe("archive", "audit", "order.notified.v1")

	p.publish("order.created.v1", "o1", "") // no trace context: TraceRoots starts one
	chains := eventually(t, p.rec, `chain (1)
  published o1
    -> audit at default/audit: delivered after 1 [200]
    -> fulfil at default/fulfil: delivered after 1 [200]
      emitted order.fulfilled.v1-of-o1
        -> notify at default/notify: delivered after 1 [200]
          reply order.notified.v1-of-order.fulfilled.v1-of-o1
            -> archive at default/audit: delivered after 1 [200]
`)
	require.Len(t, chains, 1)
	assert.Len(t, chains[0].TraceID, 32, "the chain is one W3C trace")
	root := chains[0].Events[0]
	assert.Equal(t, "order.created.v1", root.Type)
	assert.Equal(t, "shop", root.Source)
	assert.Equal(t, "kyma.shop.order.created.v1", root.Subject)
	assert.False(t, root.Stored.IsZero())
	assert.NotZero(t, root.Sequence)

	// The function got the event's trace, under a span id of the attempt's own.
	got := fulfil.requests()[0].Get("Traceparent")
	require.Len(t, got, 55)
	assert.Equal(t, chains[0].TraceID, got[3:35])
}

func TestRetriesDeadLetterAndReplay(t *testing.T) {
	p := newPipeline(t, 0)
	var healthy atomic.Bool
	flaky := p.function("flaky", func(_ int, w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	p.subscribe("flaky", "flaky", "order.created.v1", "maxDeliver", "3")
	p.publish("order.created.v1", "o1", "")
	eventually(t, p.rec, `chain (1)
  published o1
    -> flaky at default/flaky: dead-lettered after 3 [503 503 503]
`)
	chains := p.rec.Chains(0)
	d := chains[0].Events[0].Deliveries[0]
	assert.Contains(t, d.Reason, "503", "says why it was given up")
	for i, s := range d.Steps {
		assert.Equal(t, i+1, s.Number)
		assert.Equal(t, dispatcher.Failed, s.Outcome)
		assert.Positive(t, s.Duration)
	}

	spans := map[string]bool{}
	for _, h := range flaky.requests() {
		tp := h.Get("Traceparent")
		require.Len(t, tp, 55)
		assert.Equal(t, chains[0].TraceID, tp[3:35], "each attempt is in the event's trace")
		spans[tp[36:52]] = true
	}
	assert.Len(t, spans, 3, "each attempt has a span id of its own")

	letters, err := p.dl.List(context.Background(), deadletter.Filter{})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	healthy.Store(true)
	_, err = p.dl.Replay(context.Background(), letters[0].Sequence)
	require.NoError(t, err)
	eventually(t, p.rec, `chain (1)
  published o1
    -> flaky at default/flaky: dead-lettered after 3 [503 503 503]
    replay o1
      -> flaky at default/flaky: delivered after 1 [200]
`)
}

func TestEventsOfOneOutsideTraceShareAChain(t *testing.T) {
	p := newPipeline(t, 0)
	p.function("fn", nil)
	p.subscribe("fn", "fn", "order.created.v1")
	const outside = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	p.publish("order.created.v1", "a", outside)
	p.publish("order.created.v1", "b", outside)
	p.publish("order.created.v1", "c", "")
	chains := eventually(t, p.rec, `chain (2)
  published a
    -> fn at default/fn: delivered after 1 [200]
  published b
    -> fn at default/fn: delivered after 1 [200]
chain (1)
  published c
    -> fn at default/fn: delivered after 1 [200]
`)
	traces := []string{chains[0].TraceID, chains[1].TraceID}
	assert.Contains(t, traces, "4bf92f3577b34da6a3ce929d0e0e4736", "the producer's trace is kept")
}

func TestTheEmittingFunctionIsTheOneLinked(t *testing.T) {
	p := newPipeline(t, 0)
	p.function("quiet", nil)
	p.function("loud", p.emits("order.shouted.v1"))
	p.subscribe("quiet", "quiet", "order.created.v1")
	p.subscribe("loud", "loud", "order.created.v1")
	p.publish("order.created.v1", "o1", "")
	p.publish("order.created.v1", "o2", "")
	eventually(t, p.rec, `chain (1)
  published o1
    -> loud at default/loud: delivered after 1 [200]
      emitted order.shouted.v1-of-o1
    -> quiet at default/quiet: delivered after 1 [200]
chain (1)
  published o2
    -> loud at default/loud: delivered after 1 [200]
      emitted order.shouted.v1-of-o2
    -> quiet at default/quiet: delivered after 1 [200]
`)
}

func TestEventsWithoutSubscriberAndTheBound(t *testing.T) {
	p := newPipeline(t, 3)
	for i := range 5 {
		p.publish("nobody.wants.v1", fmt.Sprint(i), "")
	}
	eventually(t, p.rec, `chain (1)
  published 2
chain (1)
  published 3
chain (1)
  published 4
`)
	assert.Len(t, p.rec.Chains(2), 2, "limited")
	select {
	case <-p.rec.Changes():
	default:
		t.Fatal("Changes has a value after events were stored")
	}
}

func TestNewRefusesANegativeBound(t *testing.T) {
	_, err := eventpath.New(-1)
	require.Error(t, err)
}

func TestTraceRootsGivesEventsWithoutTraceContextANewTrace(t *testing.T) {
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := map[string]struct {
		traceParent string
		kept        bool
	}{
		"none":            {traceParent: ""},
		"malformed":       {traceParent: "00-not-a-trace-01"},
		"all-zero trace":  {traceParent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
		"unknown version": {traceParent: "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"valid":           {traceParent: valid, kept: true},
	}
	p := newPipeline(t, 0)
	// The event stream keeps events only while a consumer wants them: read
	// what is stored as it goes by.
	stored, err := p.js.Conn().SubscribeSync("kyma.>")
	require.NoError(t, err)
	defer stored.Unsubscribe()
	seen := map[string]bool{}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p.publish("order.created.v1", name, tc.traceParent)
			m, err := stored.NextMsg(wait)
			require.NoError(t, err)
			require.Equal(t, name, m.Header.Get("ce-id"))
			got := m.Header.Get("traceparent")
			if tc.kept {
				assert.Equal(t, tc.traceParent, got)
				return
			}
			assert.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-00$`, got, "a new root, not sampled")
			assert.False(t, seen[got[3:35]], "a trace of its own")
			seen[got[3:35]] = true
		})
	}
}

func TestTransportPassesRequestsWithoutTraceContext(t *testing.T) {
	rec, err := eventpath.New(0)
	require.NoError(t, err)
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer srv.Close()
	client := &http.Client{Transport: rec.Transport(nil, nil)}
	for name, tp := range map[string]string{"none": "", "malformed": "00-nope-01"} {
		req, err := http.NewRequest(http.MethodPost, srv.URL, nil)
		require.NoError(t, err)
		if tp != "" {
			req.Header.Set("Traceparent", tp)
		}
		resp, err := client.Do(req)
		require.NoError(t, err, name)
		resp.Body.Close()
		assert.Equal(t, tp, got.Get("Traceparent"), name)
		assert.Equal(t, tp, req.Header.Get("Traceparent"), "%s: the request is not modified", name)
	}
	assert.Empty(t, rec.Chains(0))
}

func TestEventsEmittedForAnHTTPRequestNameIt(t *testing.T) {
	p := newPipeline(t, 0)
	p.function("fn", nil)
	p.subscribe("fn", "fn", "order.created.v1")
	var got http.Header
	// Stands for the gateway and the function behind it, which emits as
	// the runtime hosts do.
	function := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		if r.URL.Path == "/default/orders" {
			require.NoError(t, publishTo(p.pub.URL, "order.created.v1", "from-http", r.Header.Get("Traceparent")))
		}
		w.WriteHeader(http.StatusAccepted)
	})
	route := func(r *http.Request) (string, bool) {
		parts := strings.Split(r.URL.Path, "/")
		if len(parts) < 3 || parts[2] == "" {
			return "", false
		}
		return parts[1] + "/" + parts[2], true
	}
	gw := httptest.NewServer(p.rec.Calls(function, route))
	defer gw.Close()

	resp, err := http.Post(gw.URL+"/", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Empty(t, got.Get("Traceparent"), "a request for no function passes unchanged")

	resp, err = http.Post(gw.URL+"/default/orders", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-00$`, got.Get("Traceparent"), "a new trace for a request without one")
	chains := eventually(t, p.rec, `chain (1)
  emitted from-http
    -> fn at default/fn: delivered after 1 [200]
`)
	assert.Equal(t, &eventpath.Call{Function: "default/orders", Request: "POST /default/orders"}, chains[0].Events[0].Call)
	assert.Equal(t, got.Get("Traceparent")[3:35], chains[0].TraceID)

	const outside = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, err := http.NewRequest(http.MethodPost, gw.URL+"/default/orders/", nil)
	require.NoError(t, err)
	req.Header.Set("Traceparent", outside)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	tp := got.Get("Traceparent")
	assert.Equal(t, outside[:36], tp[:36], "the caller's trace goes on")
	assert.NotEqual(t, outside, tp, "under a span id of the request's own")
}

// TestFindReturnsTheChainsOfAnEvent: an event's chain is found by its id
// (and source), at any depth of the chain, and only its chain; an id kfn
// dev does not hold finds nothing.
func TestFindReturnsTheChainsOfAnEvent(t *testing.T) {
	p := newPipeline(t, 0)
	p.function("fulfil", p.emits("order.fulfilled.v1"))
	p.function("notify", nil)
	p.subscribe("fulfil", "fulfil", "order.created.v1")
	p.subscribe("notify", "notify", "order.fulfilled.v1")
	p.publish("order.created.v1", "o1", "")
	p.publish("order.created.v1", "o2", "")
	for _, id := range []string{"o1", "o2"} {
		want := strings.ReplaceAll(`chain (1)
  published ID
    -> fulfil at default/fulfil: delivered after 1 [200]
      emitted order.fulfilled.v1-of-ID
        -> notify at default/notify: delivered after 1 [200]
`, "ID", id)
		var got []eventpath.Chain
		require.Eventually(t, func() bool {
			got = p.rec.Find("order.fulfilled.v1-of-"+id, "")
			return settled(got) && outline(got) == want
		}, wait, tick, "the chain of %s:\n%s", id, outline(got))
	}
	for _, q := range []struct{ id, source string }{{"o1", ""}, {"o1", "shop"}, {"order.fulfilled.v1-of-o1", ""}} {
		found := p.rec.Find(q.id, q.source)
		require.Len(t, found, 1, "%+v", q)
		assert.Equal(t, "o1", found[0].Events[0].ID, "the whole chain, from its first event")
	}
	assert.Empty(t, p.rec.Find("o1", "elsewhere"), "another source's o1")
	assert.Empty(t, p.rec.Find("o3", ""), "never seen")
	assert.True(t, p.rec.Find("o2", "")[0].Events[0].Is("o2", "shop"))
}
