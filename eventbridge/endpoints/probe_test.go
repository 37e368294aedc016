package endpoints_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
	"github.com/kfn-dev/kfn/internal/egress"
)

// host is a function host on a local port: its ready path answers 503
// until loaded, then 200; asked counts the questions.
type host struct {
	addr   string
	port   int32
	loaded atomic.Bool
	asked  atomic.Int64
	// function is the namespace/name its answers name (FunctionHeader):
	// fnSlice sets it to the Function whose slice holds the host.
	function atomic.Value
	// padding, when not 0, is the bytes of a header added to each answer.
	padding atomic.Int64
	// broken makes its ready path answer 500: its handler could not be
	// loaded.
	broken atomic.Bool
}

// loopback lets the tests' probes reach their hosts, on loopback, which
// the Watcher refuses by default.
var loopback = egress.Policy{AllowLoopback: true}

func startHost(t *testing.T) *host {
	h := &host{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" || r.URL.RawQuery != "ready" {
			http.NotFound(w, r)
			return
		}
		h.asked.Add(1)
		if fn, ok := h.function.Load().(string); ok {
			w.Header().Set(endpoints.FunctionHeader, fn)
		}
		if n := h.padding.Load(); n > 0 {
			w.Header().Set("X-Padding", strings.Repeat("x", int(n)))
		}
		switch {
		case h.broken.Load():
			w.WriteHeader(http.StatusInternalServerError)
		case !h.loaded.Load():
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	h.addr = srv.Listener.Addr().String()
	_, port, err := net.SplitHostPort(h.addr)
	require.NoError(t, err)
	p, err := net.LookupPort("tcp", port)
	require.NoError(t, err)
	h.port = int32(p)
	return h
}

// fnSlice is the slice of Function fn's Service with one endpoint, h, in
// the given conditions.
func fnSlice(name, fn string, h *host, cond discoveryv1.EndpointConditions) *discoveryv1.EndpointSlice {
	s := slice(name, fn, cond.Ready)
	s.Labels[serverlessv1alpha2.LabelManagedBy] = serverlessv1alpha2.LabelManagedByValue
	s.Labels[serverlessv1alpha2.LabelFunctionName] = fn
	s = withAddresses(s, h.port, "127.0.0.1")
	s.Endpoints[0].Conditions = cond
	if _, set := h.function.Load().(string); !set {
		h.function.Store(s.Namespace + "/" + fn)
	}
	return s
}

func starting() discoveryv1.EndpointConditions {
	return discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(false)}
}

// probedAgain waits until witness, a starting endpoint not loaded, has been asked
// twice more: any other probe of the same Watcher had its turns meanwhile.
func probedAgain(t *testing.T, witness *host) {
	t.Helper()
	n := witness.asked.Load()
	require.Eventually(t, func() bool { return witness.asked.Load() >= n+2 }, 10*time.Second, time.Millisecond, "the witness is probed")
}

// loadingHost adds to w a Function whose one pod answers 503, probed
// again and again: a witness for probedAgain.
func loadingHost(t *testing.T, w *endpoints.Watcher) *host {
	h := startHost(t)
	name := fmt.Sprintf("loading-%d", h.port)
	w.OnAdd(fnSlice(name+"-a", name, h, starting()), false)
	return h
}

// TestStartingFunctionPodIsReadyOnceItsHostAnswers: a Function's endpoint
// that its slice says is not ready yet is probed at the host's ready path
// and taken as ready from its first 200, so that the dispatcher and the
// gateway reach a woken pod before the kubelet's next readiness probe.
// Fails when the probe's answer is not taken as readiness (the Service
// stays not ready until its slice says so).
func TestStartingFunctionPodIsReadyOnceItsHostAnswers(t *testing.T) {
	w, err := endpoints.New(endpoints.WithProbeInterval(time.Millisecond), endpoints.WithEgress(loopback))
	require.NoError(t, err)
	w.MarkSynced()
	h := startHost(t)

	w.OnAdd(fnSlice("fn-a", "fn", h, starting()), false)
	require.Eventually(t, func() bool { return h.asked.Load() > 0 }, 10*time.Second, time.Millisecond, "the starting pod is probed")
	ready, changed := w.Ready("default", "fn")
	assert.False(t, ready, "not ready while its host answers 503")
	_, ok := w.Pick("default", "fn")
	assert.False(t, ok)

	h.loaded.Store(true)
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the Service did not become ready once its host answered 200")
	}
	ready, _ = w.Ready("default", "fn")
	assert.True(t, ready, "ready from the host's answer, before its slice says so")
	addr, ok := w.Pick("default", "fn")
	assert.True(t, ok)
	assert.Equal(t, h.addr, addr, "the starting pod is reached directly")

	// The slice catches up: still ready, the same one address.
	w.OnUpdate(nil, fnSlice("fn-a", "fn", h, discoveryv1.EndpointConditions{Ready: ptr.To(true)}))
	addr, ok = w.Pick("default", "fn")
	assert.True(t, ok)
	assert.Equal(t, h.addr, addr)
	addr, _ = w.Pick("default", "fn")
	assert.Equal(t, h.addr, addr, "one address, not two")

	// Its readiness fails later: the kubelet's word, no probe.
	witness := startHost(t)
	w.OnAdd(fnSlice("witness", "other", witness, starting()), false)
	asked := h.asked.Load()
	w.OnUpdate(nil, fnSlice("fn-a", "fn", h, starting()))
	probedAgain(t, witness)
	ready, _ = w.Ready("default", "fn")
	assert.False(t, ready, "a pod once ready is not probed back to ready")
	assert.Equal(t, asked, h.asked.Load(), "not probed")

	// Gone and back (another pod with the same address): probed again.
	w.OnDelete(fnSlice("fn-a", "fn", h, starting()))
	w.OnAdd(fnSlice("fn-a", "fn", h, starting()), false)
	require.Eventually(t, func() bool { r, _ := w.Ready("default", "fn"); return r }, 10*time.Second, time.Millisecond,
		"a new pod at the address is probed")

	// An address another Function's pod took over (a stale slice): its
	// 200 names that Function, and is not taken.
	w.OnDelete(fnSlice("fn-a", "fn", h, starting()))
	other := startHost(t)
	other.loaded.Store(true)
	other.function.Store("team-b/thief")
	w.OnAdd(fnSlice("fn-b", "fn", other, starting()), false)
	n := other.asked.Load()
	require.Eventually(t, func() bool { return other.asked.Load() >= n+3 }, 10*time.Second, time.Millisecond,
		"probed again and again: a 200 that names another Function is no answer")
	ready, _ = w.Ready("default", "fn")
	assert.False(t, ready, "a 200 that names another Function is not readiness")
	w.OnDelete(fnSlice("fn-b", "fn", other, starting()))
	w.OnAdd(fnSlice("fn-a", "fn", h, starting()), false)
	require.Eventually(t, func() bool { r, _ := w.Ready("default", "fn"); return r }, 10*time.Second, time.Millisecond)

	// The slice says it is terminating: not ready, whatever the host says.
	w.OnUpdate(nil, fnSlice("fn-a", "fn", h, discoveryv1.EndpointConditions{Ready: ptr.To(false), Terminating: ptr.To(true)}))
	ready, _ = w.Ready("default", "fn")
	assert.False(t, ready, "terminating")
}

// TestOnlyFunctionsStartingPodsAreProbed: the endpoints of other Services,
// terminating ones, and all of them with the probes off, are ready only
// when their slice says so. Fails when every Service's endpoints are
// probed, or terminating ones.
func TestOnlyFunctionsStartingPodsAreProbed(t *testing.T) {
	w, err := endpoints.New(endpoints.WithProbeInterval(time.Millisecond), endpoints.WithEgress(loopback))
	require.NoError(t, err)
	w.MarkSynced()
	witness, plain, term := startHost(t), startHost(t), startHost(t)
	for _, h := range []*host{witness, plain, term} {
		h.loaded.Store(true)
	}
	notFn := fnSlice("plain-a", "plain", plain, starting())
	delete(notFn.Labels, serverlessv1alpha2.LabelManagedBy)
	w.OnAdd(notFn, false)
	w.OnAdd(fnSlice("term-a", "term", term, discoveryv1.EndpointConditions{Ready: ptr.To(false), Terminating: ptr.To(true)}), false)
	w.OnAdd(fnSlice("witness-a", "witness", witness, starting()), false)
	require.Eventually(t, func() bool { r, _ := w.Ready("default", "witness"); return r }, 10*time.Second, time.Millisecond)
	for _, name := range []string{"plain", "term"} {
		ready, _ := w.Ready("default", name)
		assert.False(t, ready, name)
	}
	assert.Zero(t, plain.asked.Load(), "not a Function's Service")
	assert.Zero(t, term.asked.Load(), "terminating")

	off, err := endpoints.New(endpoints.WithProbeInterval(0))
	require.NoError(t, err)
	off.MarkSynced()
	offHost := startHost(t)
	offHost.loaded.Store(true)
	off.OnAdd(fnSlice("fn-a", "fn", offHost, starting()), false)
	probedAgain(t, loadingHost(t, w))
	ready, _ := off.Ready("default", "fn")
	assert.False(t, ready, "probes off")
	assert.Zero(t, offHost.asked.Load(), "probes off")

	_, err = endpoints.New(endpoints.WithProbeInterval(-time.Second))
	require.ErrorIs(t, err, endpoints.ErrInvalidOption)
}

// TestScaleOutProbesItsFirstPods: a Function with a ready pod that scales
// out (the warm pool gives it standby pods that serve in milliseconds)
// has its first four starting pods probed and taken as ready from their
// host's answer, not the kubelet's next readiness probe; the others wait
// until a probed one is ready in its slice, so that a hundred starting
// pods are not asked a hundred times a second each. Fails when a
// scale-out's pods are left to their slices (the Service is served by its
// ready pod only), or when every starting pod is probed.
func TestScaleOutProbesItsFirstPods(t *testing.T) {
	w, err := endpoints.New(endpoints.WithProbeInterval(time.Millisecond), endpoints.WithEgress(loopback))
	require.NoError(t, err)
	w.MarkSynced()
	up := startHost(t)
	w.OnAdd(fnSlice("out-up", "out", up, discoveryv1.EndpointConditions{Ready: ptr.To(true)}), false)
	hosts := make([]*host, 6)
	for i := range hosts {
		hosts[i] = startHost(t)
		hosts[i].loaded.Store(true)
		w.OnAdd(fnSlice(fmt.Sprintf("out-%d", i), "out", hosts[i], starting()), false)
	}
	picked := func() map[string]bool {
		seen := map[string]bool{}
		for range 40 {
			a, _ := w.Pick("default", "out")
			seen[a] = true
		}
		return seen
	}
	require.Eventually(t, func() bool { return len(picked()) == 5 }, 10*time.Second, time.Millisecond,
		"the ready pod and four starting ones that answered are picked")
	probedAgain(t, loadingHost(t, w))
	var asked []*host
	for _, h := range hosts {
		if h.asked.Load() > 0 {
			asked = append(asked, h)
		}
	}
	require.Len(t, asked, 4, "four starting pods of a scale-out are probed, not six")
	seen := picked()
	for _, h := range asked {
		assert.True(t, seen[h.addr], "a probed pod that answered is picked: %s", h.addr)
	}

	// One of them is ready in its slice: a fifth is probed in its place.
	for i, h := range hosts {
		if h == asked[0] {
			w.OnUpdate(nil, fnSlice(fmt.Sprintf("out-%d", i), "out", h, discoveryv1.EndpointConditions{Ready: ptr.To(true)}))
		}
	}
	require.Eventually(t, func() bool { return len(picked()) == 6 }, 10*time.Second, time.Millisecond,
		"a fifth starting pod is probed once one of the four is ready in its slice")
}

// TestProbesPerNamespaceAreBounded: one namespace's starting pods are
// probed 64 at a time at most, whatever their number, and another
// namespace's starting pod is probed meanwhile. Fails when a namespace's
// probes are not bounded.
func TestProbesPerNamespaceAreBounded(t *testing.T) {
	w, err := endpoints.New(endpoints.WithProbeInterval(time.Millisecond), endpoints.WithEgress(loopback))
	require.NoError(t, err)
	w.MarkSynced()
	inNamespace := func(ns, fn string, h *host, i int) *discoveryv1.EndpointSlice {
		h.function.Store(ns + "/" + fn)
		s := fnSlice(fmt.Sprintf("%s-%d", fn, i), fn, h, starting())
		s.Namespace = ns
		return s
	}
	many := make([]*host, 70)
	for i := range many {
		many[i] = startHost(t)
		w.OnAdd(inNamespace("team-a", "big", many[i], i), false)
	}
	other := startHost(t)
	other.loaded.Store(true)
	w.OnAdd(inNamespace("team-b", "small", other, 0), false)
	require.Eventually(t, func() bool { r, _ := w.Ready("team-b", "small"); return r }, 10*time.Second, time.Millisecond,
		"another namespace's starting pod is probed")
	witness := loadingHost(t, w)
	probedAgain(t, witness)
	probedAgain(t, witness)
	asked := 0
	for _, h := range many {
		if h.asked.Load() > 0 {
			asked++
		}
	}
	assert.Equal(t, 64, asked, "64 of the namespace's 70 starting pods are probed")
}

// TestProbesEndWhenRunReturns: once Run returned, the probes under way
// stop asking and a starting pod added then is not probed, so that a
// Watcher stopped leaves no goroutine asking pods. Fails when the probes
// outlive Run (until plan.MaxStartup).
func TestProbesEndWhenRunReturns(t *testing.T) {
	w, err := endpoints.New(endpoints.WithProbeInterval(time.Millisecond), endpoints.WithEgress(loopback))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	w.MarkSynced()
	loading := loadingHost(t, w)
	probedAgain(t, loading)

	cancel()
	require.NoError(t, <-done)
	late := startHost(t)
	w.OnAdd(fnSlice("late-a", "late", late, starting()), false)
	n := loading.asked.Load()
	// A Watcher still running: its probes have had their turns meanwhile.
	running, err := endpoints.New(endpoints.WithProbeInterval(time.Millisecond), endpoints.WithEgress(loopback))
	require.NoError(t, err)
	running.MarkSynced()
	witness := loadingHost(t, running)
	for range 3 {
		probedAgain(t, witness)
	}
	assert.LessOrEqual(t, loading.asked.Load(), n+1, "no probe asks once Run returned (one under way may end)")
	assert.Zero(t, late.asked.Load(), "no probe starts once Run returned")
}

// TestProbeAnswersAreBounded: a starting pod whose ready path answers 200,
// naming its Function, with a megabyte of headers is not taken as ready:
// the probes read little of an answer (Go's own bound is 10 MiB per probe
// in flight, and a tenant's pod answers them).
func TestProbeAnswersAreBounded(t *testing.T) {
	w, err := endpoints.New(endpoints.WithProbeInterval(time.Millisecond), endpoints.WithEgress(loopback))
	require.NoError(t, err)
	w.MarkSynced()
	h := startHost(t)
	h.loaded.Store(true)
	h.padding.Store(1 << 20)
	w.OnAdd(fnSlice("fn-a", "fn", h, starting()), false)
	require.Eventually(t, func() bool { return h.asked.Load() >= 3 }, 10*time.Second, time.Millisecond, "probed again and again")
	ready, _ := w.Ready("default", "fn")
	assert.False(t, ready, "an answer with a megabyte of headers is no answer")

	h.padding.Store(1 << 10)
	require.Eventually(t, func() bool { r, _ := w.Ready("default", "fn"); return r }, 10*time.Second, time.Millisecond,
		"a kilobyte of headers is an answer")
}

// TestProbesKeepToTheEgressPolicy: the wake probe asks a starting pod at
// the address its slice names, which a tenant may write, only where the
// Watcher's egress policy lets it (WithEgress): by default no loopback
// address (the event bridge's own ports), and none the policy denies (the
// API server's); nothing reaches them, and they are not taken as ready.
func TestProbesKeepToTheEgressPolicy(t *testing.T) {
	byDefault, err := endpoints.New(endpoints.WithProbeInterval(time.Millisecond))
	require.NoError(t, err)
	byDefault.MarkSynced()
	h := startHost(t)
	h.loaded.Store(true)
	byDefault.OnAdd(fnSlice("fn-a", "fn", h, starting()), false)
	require.Never(t, func() bool { return h.asked.Load() > 0 }, 200*time.Millisecond, time.Millisecond, "a loopback address is not asked")
	ready, _ := byDefault.Ready("default", "fn")
	assert.False(t, ready)

	denied := startHost(t)
	denied.loaded.Store(true)
	apiServer := func(a netip.AddrPort) (string, bool) {
		return "the Kubernetes API server's address", a.Port() == uint16(denied.port)
	}
	w, err := endpoints.New(endpoints.WithProbeInterval(time.Millisecond), endpoints.WithEgress(egress.Policy{AllowLoopback: true, Deny: apiServer}))
	require.NoError(t, err)
	w.MarkSynced()
	witness := loadingHost(t, w)
	w.OnAdd(fnSlice("api-a", "api", denied, starting()), false)
	probedAgain(t, witness)
	probedAgain(t, witness)
	assert.Zero(t, denied.asked.Load(), "a denied address is not asked")
	ready, _ = w.Ready("default", "api")
	assert.False(t, ready)

	w.OnAdd(fnSlice("fn-a", "fn", h, starting()), false)
	require.Eventually(t, func() bool { r, _ := w.Ready("default", "fn"); return r }, 10*time.Second, time.Millisecond,
		"an address the policy allows is asked")
}

// TestAHostWhoseHandlerCannotLoadIsAskedOnce: a starting pod whose host
// answers 500 naming its Function (its handler could not be loaded: no
// later answer changes that) is not probed again, while a 500 that names
// another Function is no answer. Before, a tenant's Function of 100
// replicas whose handler failed to load had 64 of its pods asked every
// 10 ms, a new connection each, for 150 s: 6,000 connections a second
// that the event bridge every namespace shares made (0.9 of 2 cores).
func TestAHostWhoseHandlerCannotLoadIsAskedOnce(t *testing.T) {
	w, err := endpoints.New(endpoints.WithProbeInterval(time.Millisecond), endpoints.WithEgress(loopback))
	require.NoError(t, err)
	w.MarkSynced()
	broken := startHost(t)
	broken.broken.Store(true)
	w.OnAdd(fnSlice("broken-a", "broken", broken, starting()), false)
	elsewhere := startHost(t)
	elsewhere.broken.Store(true)
	elsewhere.function.Store("team-b/other")
	w.OnAdd(fnSlice("stale-a", "stale", elsewhere, starting()), false)
	witness := loadingHost(t, w)
	for range 5 {
		probedAgain(t, witness)
	}
	assert.Equal(t, int64(1), broken.asked.Load(), "asked once: its host said it will not load")
	assert.Greater(t, elsewhere.asked.Load(), int64(1), "a 500 of another Function's host is no answer")
	ready, _ := w.Ready("default", "broken")
	assert.False(t, ready)
}

// TestAPodThatNeverGetsReadyIsAskedLessAndLess: a starting pod whose host
// answers 503 is asked every interval for its first 100 intervals, then
// less and less often, at most once every 100 intervals: a host made to
// answer 503 forever costs the event bridge a probe a second by default,
// not a hundred, for the probe's 150 s. Before, 64 such pods of one
// namespace were asked 6,400 times a second.
func TestAPodThatNeverGetsReadyIsAskedLessAndLess(t *testing.T) {
	const interval = time.Millisecond
	w, err := endpoints.New(endpoints.WithProbeInterval(interval), endpoints.WithEgress(loopback))
	require.NoError(t, err)
	w.MarkSynced()
	h := loadingHost(t, w)
	require.Eventually(t, func() bool { return h.asked.Load() >= 10 }, 10*time.Second, time.Millisecond, "asked every interval at first")
	// Past its first 100 intervals, the waits double to 100 intervals:
	// 2+4+...+64 intervals and then one every 100, so that in the next
	// 1,000 intervals it is asked about 13 times, where every interval
	// made it up to 1,000. (The sleeps are spans to count in: the
	// assertion is a bound on what happens in them, which a slow machine
	// only lowers.)
	time.Sleep(100 * interval)
	n := h.asked.Load()
	time.Sleep(1000 * interval)
	assert.LessOrEqual(t, h.asked.Load()-n, int64(20), "asked less and less often")
	assert.Greater(t, h.asked.Load(), n, "still asked")
}
