package endpoints_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/contract/claim"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
)

// claims is a Claimer that answers each claim when the test says. The
// pool's own claims (a standby host that serves the Function when the
// claim returns) are tested in controller/pool, the controller's listener
// in controller, and the whole path on the real node; here the Watcher's
// part alone: what it does with an answer, and when.
type claims struct {
	mu     sync.Mutex
	asked  []string
	answer chan answer
}

type answer struct {
	addr string
	err  error
}

func (c *claims) Claim(ctx context.Context, namespace, name string) (string, error) {
	c.mu.Lock()
	c.asked = append(c.asked, namespace+"/"+name)
	c.mu.Unlock()
	select {
	case a := <-c.answer:
		return a.addr, a.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (c *claims) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.asked)
}

// counted is kfn_eventbridge_claims_total{result} in reg.
func counted(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "kfn_eventbridge_claims_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// atZero is the slice of Function fn's Service at zero replicas: labelled
// as a Function's, no endpoint.
func atZero(fn string) *discoveryv1.EndpointSlice {
	s := slice(fn+"-a", fn)
	s.Labels[serverlessv1alpha2.LabelManagedBy] = serverlessv1alpha2.LabelManagedByValue
	s.Labels[serverlessv1alpha2.LabelFunctionName] = fn
	return s
}

// TestWakeClaimsAPodForAFunctionAtZero: the first event or request for a
// Function at zero (Wake) claims one pod, however many ask at once; its
// address is a ready endpoint from the claim's answer, before any slice
// lists it, and Ready's waiters are woken then; once the slice lists it
// ready, the slice carries it; a claim that fails changes nothing and the
// next Wake claims again; a Service that is not a Function's, or is
// ready, claims nothing; the claimed address is dropped after the hold
// if no slice ever lists it. Fails when Wake claims twice at once, when
// the claimed address is not taken as ready, or kept past its hold.
func TestWakeClaimsAPodForAFunctionAtZero(t *testing.T) {
	c := &claims{answer: make(chan answer)}
	const hold = 300 * time.Millisecond
	reg := prometheus.NewRegistry()
	w, err := endpoints.New(endpoints.WithClaimer(c, hold), endpoints.WithMetrics(reg))
	require.NoError(t, err)
	w.MarkSynced()
	w.OnAdd(atZero("orders"), false)
	w.OnAdd(slice("plain-a", "plain"), false) // not a Function's Service

	w.Wake("default", "plain")
	ready, ch := w.Ready("default", "orders")
	require.False(t, ready)
	for range 3 {
		w.Wake("default", "orders")
	}
	require.Eventually(t, func() bool { return c.count() == 1 }, 5*time.Second, time.Millisecond)
	// The claim under way is told (Waking, Ready's channel closed), so
	// that events are pulled ahead of it; not ready before its answer.
	assert.True(t, closed(ch), "the claim's start is told")
	assert.True(t, w.Waking("default", "orders"))
	assert.False(t, w.Waking("default", "plain"))
	ready, ch = w.Ready("default", "orders")
	assert.False(t, ready, "not ready before the claim's answer")

	// A claim that fails changes nothing but the waking; a Wake claims
	// again, after the backoff (the requests held meanwhile do not each
	// ask).
	c.answer <- answer{err: claim.ErrNoStandby}
	failed := time.Now()
	require.Eventually(t, func() bool { return closed(ch) }, 5*time.Second, time.Millisecond, "the claim's end is told")
	ready, _ = w.Ready("default", "orders")
	assert.False(t, ready)
	assert.False(t, w.Waking("default", "orders"))
	require.Eventually(t, func() bool { w.Wake("default", "orders"); return c.count() == 2 }, 5*time.Second, time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(failed), 1900*time.Millisecond, "not claimed again within the backoff (2 s)")
	assert.True(t, w.Waking("default", "orders"))
	_, ch = w.Ready("default", "orders")
	c.answer <- answer{addr: "10.244.0.9:8080"}
	require.Eventually(t, func() bool { return closed(ch) }, 5*time.Second, time.Millisecond, "woken by the claim")
	ready, ch = w.Ready("default", "orders")
	assert.True(t, ready)
	assert.False(t, w.Waking("default", "orders"), "ready, no longer waking")
	addr, ok := w.Pick("default", "orders")
	assert.True(t, ok)
	assert.Equal(t, "10.244.0.9:8080", addr, "the claimed pod, before any slice lists it")
	w.Wake("default", "orders")
	assert.Equal(t, 2, c.count(), "a ready Service claims nothing")
	assert.Equal(t, []string{"default/orders", "default/orders"}, c.asked, "the Service that is not a Function's claimed nothing")

	// The slice lists the pod ready: it carries it, past the hold.
	s := atZero("orders")
	s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	s.Ports = []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080)}}
	w.OnUpdate(nil, s)
	require.Never(t, func() bool { r, _ := w.Ready("default", "orders"); return !r }, 2*hold, 10*time.Millisecond, "ready in its slice")
	addr, _ = w.Pick("default", "orders")
	assert.Equal(t, "10.244.0.9:8080", addr)
	assert.False(t, closed(ch))

	// Back at zero; a claim no slice ever lists is dropped after the hold.
	w.OnUpdate(nil, atZero("orders"))
	require.True(t, closed(ch))
	ready, ch = w.Ready("default", "orders")
	require.False(t, ready)
	w.Wake("default", "orders")
	require.Eventually(t, func() bool { return c.count() == 3 }, 5*time.Second, time.Millisecond)
	_, ch = w.Ready("default", "orders")
	c.answer <- answer{addr: "10.244.0.10:8080"}
	require.Eventually(t, func() bool { return closed(ch) }, 5*time.Second, time.Millisecond)
	_, ch = w.Ready("default", "orders")
	require.Eventually(t, func() bool { return closed(ch) }, 10*hold, time.Millisecond, "dropped after the hold")
	ready, _ = w.Ready("default", "orders")
	assert.False(t, ready)
	_, ok = w.Pick("default", "orders")
	assert.False(t, ok)

	// An answer that is no address is no endpoint.
	w.Wake("default", "orders")
	require.Eventually(t, func() bool { return c.count() == 4 }, 5*time.Second, time.Millisecond)
	_, ch = w.Ready("default", "orders")
	c.answer <- answer{addr: "pod.example:8080"}
	require.Eventually(t, func() bool { return closed(ch) }, 5*time.Second, time.Millisecond, "the claim's end is told")
	_, ch = w.Ready("default", "orders")
	require.Never(t, func() bool { r, _ := w.Ready("default", "orders"); return r || closed(ch) }, 200*time.Millisecond, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		n, err := testutil.GatherAndCount(reg, "kfn_eventbridge_claims_total")
		return err == nil && n == 5 && counted(t, reg, "error") == 1
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, 2.0, counted(t, reg, "claimed"))
	assert.Equal(t, 1.0, counted(t, reg, "no_standby"))
	assert.Equal(t, 0.0, counted(t, reg, "not_pooled"))
	_, err = endpoints.New(endpoints.WithClaimer(nil, 0))
	assert.True(t, errors.Is(err, endpoints.ErrInvalidOption))
}

// TestWakeThenTellsWhenTheClaimEnded: WakeThen's callback runs once the
// claim it started or joined has ended, whether a pod was given or not,
// and at once when nothing is claimed (a Service that is not a Function's,
// a ready one, no Claimer), so that the scalers release KEDA's scale-up
// then. Fails when the callback runs before the claim's answer, or never.
func TestWakeThenTellsWhenTheClaimEnded(t *testing.T) {
	c := &claims{answer: make(chan answer)}
	w, err := endpoints.New(endpoints.WithClaimer(c, time.Minute))
	require.NoError(t, err)
	w.MarkSynced()
	w.OnAdd(atZero("orders"), false)
	w.OnAdd(slice("plain-a", "plain"), false)
	ended := make(chan string, 8)
	// then's callback tells what it was, and whether a pod was given.
	then := func(what string) func(bool) {
		return func(claimed bool) {
			if claimed {
				what += ", claimed"
			}
			ended <- what
		}
	}
	awaitEnded := func(want string) {
		t.Helper()
		select {
		case got := <-ended:
			assert.Equal(t, want, got)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: not told within 5s", want)
		}
	}
	noneEnded := func(when string) {
		t.Helper()
		select {
		case got := <-ended:
			t.Fatalf("%s: %q was told", when, got)
		case <-time.After(100 * time.Millisecond):
		}
	}

	w.WakeThen("default", "plain", then("plain"))
	awaitEnded("plain")

	for _, who := range []string{"scaler-a", "scaler-b"} {
		w.WakeThen("default", "orders", then(who))
	}
	require.Eventually(t, func() bool { return c.count() == 1 }, 5*time.Second, time.Millisecond)
	noneEnded("claim under way")
	c.answer <- answer{err: claim.ErrNoStandby}
	got := []string{<-ended, <-ended}
	assert.ElementsMatch(t, []string{"scaler-a", "scaler-b"}, got, "each waiter is told when the claim fails")

	// Within the failed claim's backoff nothing is claimed: told at once.
	w.WakeThen("default", "orders", then("backoff"))
	awaitEnded("backoff")

	require.Eventually(t, func() bool {
		w.WakeThen("default", "orders", then("second"))
		if w.Waking("default", "orders") {
			return true
		}
		awaitEnded("second") // within the backoff still
		return false
	}, 5*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return c.count() == 2 }, 5*time.Second, time.Millisecond)
	noneEnded("second claim under way")
	c.answer <- answer{addr: "10.244.0.9:8080"}
	awaitEnded("second, claimed")
	ready, _ := w.Ready("default", "orders")
	assert.True(t, ready, "the claimed pod is ready when its waiters are told")
	w.WakeThen("default", "orders", then("ready"))
	awaitEnded("ready")

	// At most 16 waiters per claim: the answers are all alike, and the
	// scalers that publish activations are few.
	w.OnAdd(atZero("invoices"), false)
	w.Wake("default", "invoices")
	require.True(t, w.Waking("default", "invoices"))
	for range 20 {
		w.WakeThen("default", "invoices", then("many"))
	}
	c.answer <- answer{addr: "10.244.0.10:8080"}
	for range 16 {
		awaitEnded("many, claimed")
	}
	noneEnded("past the 16th waiter")

	bare, err := endpoints.New()
	require.NoError(t, err)
	bare.MarkSynced()
	bare.OnAdd(atZero("orders"), false)
	bare.WakeThen("default", "orders", then("no claimer"))
	awaitEnded("no claimer")
}

// TestAGoneFunctionKeepsNoClaimBackoff: a failed claim's backoff is kept
// while its Function is, not after: a tenant creating, waking and deleting
// Functions of ever new names (each claim refused) left one entry each,
// for good.
func TestAGoneFunctionKeepsNoClaimBackoff(t *testing.T) {
	c := &claims{answer: make(chan answer)}
	w, err := endpoints.New(endpoints.WithClaimer(c, time.Second))
	require.NoError(t, err)
	w.MarkSynced()
	s := atZero("orders")
	w.OnAdd(s, false)
	w.Wake("default", "orders")
	require.Eventually(t, func() bool { return c.count() == 1 }, 5*time.Second, time.Millisecond)
	c.answer <- answer{err: claim.ErrNoStandby}
	require.Eventually(t, func() bool { return w.ClaimBackoffs() == 1 }, 5*time.Second, time.Millisecond, "the failed claim's backoff")
	w.OnDelete(s)
	assert.Zero(t, w.ClaimBackoffs(), "gone with its Function")
}

// TestANamespaceClaimsWithinItsBounds: a namespace of 40 Functions at
// zero, each woken at once, claims NamespaceClaimBurst pods, not 40 (a
// claim is a request to the controller's leader every namespace's wakes
// go through); another namespace's Function woken then is claimed for.
// Before, every Function of the namespace had a claim under way, and one
// more every 2 s each.
func TestANamespaceClaimsWithinItsBounds(t *testing.T) {
	c := &claims{answer: make(chan answer)}
	w, err := endpoints.New(endpoints.WithClaimer(c, time.Second))
	require.NoError(t, err)
	w.MarkSynced()
	for i := range 40 {
		s := atZero(fmt.Sprint("fn", i))
		s.Namespace = "team-a"
		w.OnAdd(s, false)
		w.Wake("team-a", fmt.Sprint("fn", i))
	}
	other := atZero("orders")
	other.Namespace = "team-b"
	w.OnAdd(other, false)
	w.Wake("team-b", "orders")
	waking := 0
	for i := range 40 {
		if w.Waking("team-a", fmt.Sprint("fn", i)) {
			waking++
		}
	}
	assert.Equal(t, endpoints.NamespaceClaimBurst, waking, "the namespace's claims under way")
	assert.True(t, w.Waking("team-b", "orders"), "another namespace's Function is claimed for")
	require.Eventually(t, func() bool { return c.count() == waking+1 }, 5*time.Second, time.Millisecond)
	for range waking + 1 {
		c.answer <- answer{err: claim.ErrNoStandby}
	}
}
