package gateway_test

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/internal/egress"
)

// backends is a Backends whose readiness the test switches; the backends
// behind it are real HTTP servers.
type backends struct {
	mu      sync.Mutex
	ready   map[string]string // ns/name -> host:port of a ready backend
	known   map[string]bool
	changed chan struct{}
}

func newBackends() *backends {
	return &backends{ready: map[string]string{}, known: map[string]bool{}, changed: make(chan struct{})}
}

func (b *backends) Known(ns, name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.known[ns+"/"+name]
}

func (b *backends) Ready(ns, name string) (bool, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.ready[ns+"/"+name]
	return ok, b.changed
}

func (b *backends) Pick(ns, name string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	addr, ok := b.ready[ns+"/"+name]
	if !ok {
		return "", io.ErrUnexpectedEOF
	}
	return addr, nil
}

func (b *backends) set(key, addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.known[key] = true
	if addr == "" {
		delete(b.ready, key)
	} else {
		b.ready[key] = addr
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

// reporter records in-flight reports.
type reporter struct {
	mu      sync.Mutex
	reports []map[types.NamespacedName]int
	ttls    map[time.Duration]bool
}

func (r *reporter) ReportInFlight(_ string, counts map[types.NamespacedName]int, ttl time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, counts)
	if r.ttls == nil {
		r.ttls = map[time.Duration]bool{}
	}
	r.ttls[ttl] = true
}

// validities returns every ttl reports were sent with.
func (r *reporter) validities() map[time.Duration]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.ttls)
}

func (r *reporter) sawFunction(fn types.NamespacedName) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.reports {
		if c[fn] > 0 {
			return true
		}
	}
	return false
}

type backend struct {
	*httptest.Server
	hits atomic.Int32
	last atomic.Value // the last request's URI
}

func newBackend(t *testing.T) *backend {
	b := &backend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		b.last.Store(r.URL.RequestURI())
		_, _ = io.WriteString(w, "hello from "+r.URL.Path)
	}))
	t.Cleanup(b.Close)
	return b
}

func addr(b *backend) string { return strings.TrimPrefix(b.URL, "http://") }

func newGateway(t *testing.T, bs gateway.Backends, rep gateway.InFlightReporter, cfg gateway.Config) *httptest.Server {
	t.Helper()
	_, srv := newGatewayWith(t, bs, rep, cfg)
	return srv
}

// loopback lets the tests' gateways reach their backends, httptest servers
// on loopback, which the gateway refuses by default.
var loopback = egress.Policy{AllowLoopback: true}

// newGatewayWith makes a gateway of cfg and opts, whose backends may be
// on loopback, and serves it.
func newGatewayWith(t *testing.T, bs gateway.Backends, rep gateway.InFlightReporter, cfg gateway.Config, opts ...gateway.Option) (*gateway.Gateway, *httptest.Server) {
	t.Helper()
	cfg.Egress = loopback
	if rep != nil {
		opts = append(opts, gateway.WithInFlightReporter(rep))
	}
	g, err := gateway.New(bs, cfg, opts...)
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	go func() { _ = g.Run(ctx) }()
	t.Cleanup(stop)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv
}

func TestRoute(t *testing.T) {
	g, err := gateway.New(newBackends(), gateway.Config{})
	require.NoError(t, err)
	tests := map[string]struct {
		host, path, fn, rest string
		ok                   bool
	}{
		"path":              {host: "localhost:8080", path: "/shop/orders/items/1", fn: "shop/orders", rest: "/items/1", ok: true},
		"path, no rest":     {host: "localhost", path: "/shop/orders", fn: "shop/orders", rest: "/", ok: true},
		"path, trailing":    {host: "localhost", path: "/shop/orders/", fn: "shop/orders", rest: "/", ok: true},
		"service host":      {host: "orders.shop.svc.cluster.local", path: "/items", fn: "shop/orders", rest: "/items", ok: true},
		"service host port": {host: "orders.shop.svc.cluster.local:80", path: "/", fn: "shop/orders", rest: "/", ok: true},
		"short svc host":    {host: "orders.shop.svc", path: "/x", fn: "shop/orders", rest: "/x", ok: true},
		"only a namespace":  {host: "localhost", path: "/shop", ok: false},
		"root":              {host: "localhost", path: "/", ok: false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "http://"+tt.host+tt.path, nil)
			fn, rest, ok := g.Route(r)
			require.Equal(t, tt.ok, ok)
			if ok {
				assert.Equal(t, tt.fn, fn.String())
				assert.Equal(t, tt.rest, rest)
			}
		})
	}
}

func TestProxiesToAReadyBackend(t *testing.T) {
	bs := newBackends()
	be := newBackend(t)
	bs.set("shop/orders", addr(be))
	srv := newGateway(t, bs, nil, gateway.Config{})

	resp, err := http.Post(srv.URL+"/shop/orders/items?id=1", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "hello from /items", string(body))
	assert.Equal(t, "/items?id=1", be.last.Load())
	assert.Equal(t, "false", resp.Header.Get(gateway.ColdStartHeader))

	resp, err = http.Get(srv.URL + "/shop/nope/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "an unknown function is refused at once")
}

// TestHoldsUntilABackendIsReady sends a request to a function at zero: the
// scaler hears of it at once (not at the next periodic report, an hour
// away here), the request waits without reaching anything, and is
// forwarded as soon as a backend is ready.
func TestHoldsUntilABackendIsReady(t *testing.T) {
	bs := newBackends()
	bs.set("shop/fulfil", "")
	rep := &reporter{}
	srv := newGateway(t, bs, rep, gateway.Config{ReportInterval: time.Hour})
	be := newBackend(t)

	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/shop/fulfil/run")
		done <- result{resp, err}
	}()
	fn := types.NamespacedName{Namespace: "shop", Name: "fulfil"}
	require.Eventually(t, func() bool { return rep.sawFunction(fn) }, 5*time.Second, time.Millisecond, "the scaler is told at once")
	select {
	case <-done:
		t.Fatal("answered before a backend was ready")
	case <-time.After(50 * time.Millisecond):
	}
	assert.Zero(t, be.hits.Load(), "nothing is forwarded while no backend is ready")

	bs.set("shop/fulfil", addr(be))
	r := <-done
	require.NoError(t, r.err)
	defer r.resp.Body.Close()
	assert.Equal(t, http.StatusOK, r.resp.StatusCode)
	assert.Equal(t, "true", r.resp.Header.Get(gateway.ColdStartHeader))
	assert.Equal(t, int32(1), be.hits.Load())
}

// waking is a Backends that wakes a Function itself (as the cluster's
// claims a standby pod): its Wake makes the backend at addr ready.
type waking struct {
	*backends
	addr  string
	woken atomic.Int32
}

func (w *waking) Wake(ns, name string) {
	w.woken.Add(1)
	w.set(ns+"/"+name, w.addr)
}

// TestAColdRequestWakesItsFunction: a request that finds no ready backend
// has the Backends wake the Function (Waker) before it is held, and is
// served by the backend that wake made ready, without waiting for anyone
// else. Fails when the gateway only holds (the request times out).
func TestAColdRequestWakesItsFunction(t *testing.T) {
	be := newBackend(t)
	bs := &waking{backends: newBackends(), addr: addr(be)}
	bs.set("shop/fulfil", "")
	srv := newGateway(t, bs, &reporter{}, gateway.Config{ReportInterval: time.Hour, HoldTimeout: 10 * time.Second})
	resp, err := http.Get(srv.URL + "/shop/fulfil/run")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get(gateway.ColdStartHeader))
	assert.Equal(t, int32(1), bs.woken.Load())
	resp, err = http.Get(srv.URL + "/shop/fulfil/run")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "false", resp.Header.Get(gateway.ColdStartHeader))
	assert.Equal(t, int32(1), bs.woken.Load(), "a ready Function is not woken again")
}

func TestHoldTimesOutWithRetryAfter(t *testing.T) {
	bs := newBackends()
	bs.set("shop/fulfil", "")
	srv := newGateway(t, bs, &reporter{}, gateway.Config{HoldTimeout: 100 * time.Millisecond, RetryAfter: 7 * time.Second})
	start := time.Now()
	resp, err := http.Get(srv.URL + "/shop/fulfil/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "7", resp.Header.Get("Retry-After"))
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
}

func TestHeldRequestsAreBounded(t *testing.T) {
	bs := newBackends()
	bs.set("shop/fulfil", "")
	g, srv := newGatewayWith(t, bs, &reporter{}, gateway.Config{MaxHeld: 2, HoldTimeout: 10 * time.Second})
	var wg sync.WaitGroup
	release := make(chan struct{})
	be := newBackend(t)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(srv.URL + "/shop/fulfil/")
			if err == nil {
				resp.Body.Close()
			}
			<-release
		}()
	}
	require.Eventually(t, func() bool { return g.Held() == 2 }, 5*time.Second, time.Millisecond)
	start := time.Now()
	resp, err := http.Get(srv.URL + "/shop/fulfil/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a third request is refused")
	assert.Less(t, time.Since(start), 5*time.Second, "at once, not after the hold timeout")
	bs.set("shop/fulfil", addr(be))
	close(release)
	wg.Wait()
	assert.Equal(t, int32(2), be.hits.Load(), "the held requests went through")
}

func TestRejectsBadConfig(t *testing.T) {
	_, err := gateway.New(nil, gateway.Config{})
	require.ErrorIs(t, err, gateway.ErrInvalidConfig)
	_, err = gateway.New(newBackends(), gateway.Config{HoldTimeout: -1})
	require.ErrorIs(t, err, gateway.ErrInvalidConfig)
	for name, opt := range map[string]gateway.Option{
		"nil option":   nil,
		"nil reporter": gateway.WithInFlightReporter(nil),
		"nil logger":   gateway.WithLogger(nil),
		"nil registry": gateway.WithMetrics(nil),
	} {
		_, err = gateway.New(newBackends(), gateway.Config{}, opt)
		require.ErrorIs(t, err, gateway.ErrInvalidOption, name)
	}
	reg := prometheus.NewRegistry()
	_, err = gateway.New(newBackends(), gateway.Config{}, gateway.WithMetrics(reg))
	require.NoError(t, err)
	_, err = gateway.New(newBackends(), gateway.Config{}, gateway.WithMetrics(reg))
	require.ErrorIs(t, err, gateway.ErrInvalidOption, "the metrics are registered already")
}

// afterLastBusy returns the reports after the last that counted a
// request, and whether any did.
func (r *reporter) afterLastBusy() (after []map[types.NamespacedName]int, busy bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.reports) - 1; i >= 0; i-- {
		if len(r.reports[i]) > 0 {
			return append([]map[types.NamespacedName]int(nil), r.reports[i+1:]...), true
		}
	}
	return nil, false
}

// Once its requests are over, whichever way they ended (answered by the
// function, 503 after the hold timeout, the client gone while held), the
// gateway counts nothing in flight, its gauge is back to zero, and one
// report of zero goes out, so that the scaler lets the functions go back
// to zero without waiting for the last report to lapse.
func TestInFlightEmptiesOnceRequestsAreOver(t *testing.T) {
	bs := newBackends()
	be := newBackend(t)
	bs.set("shop/orders", addr(be))
	bs.set("shop/fulfil", "") // at zero, and stays there
	rep := &reporter{}
	reg := prometheus.NewRegistry()
	const interval = 20 * time.Millisecond
	g, err := gateway.New(bs, gateway.Config{HoldTimeout: 300 * time.Millisecond, ReportInterval: interval, Egress: loopback},
		gateway.WithInFlightReporter(rep), gateway.WithMetrics(reg))
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	go func() { _ = g.Run(ctx) }()
	t.Cleanup(stop)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	fulfil := types.NamespacedName{Namespace: "shop", Name: "fulfil"}

	var wg sync.WaitGroup
	codes := make(chan int, 4)
	get := func(ctx context.Context, path string) {
		defer wg.Done()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if !assert.NoError(t, err) {
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			codes <- 0 // the client went away
			return
		}
		resp.Body.Close()
		codes <- resp.StatusCode
	}
	leave, gone := context.WithCancel(context.Background())
	defer gone()
	wg.Add(4)
	go get(context.Background(), "/shop/fulfil/held") // 503 after the hold timeout
	go get(context.Background(), "/shop/fulfil/held")
	go get(leave, "/shop/fulfil/left")
	require.Eventually(t, func() bool { return g.InFlight()[fulfil] == 3 }, 5*time.Second, time.Millisecond, "three requests held")
	go get(context.Background(), "/shop/orders/") // answered by the function
	gone()
	wg.Wait()
	close(codes)
	var got []int
	for c := range codes {
		got = append(got, c)
	}
	assert.ElementsMatch(t, []int{0, http.StatusOK, http.StatusServiceUnavailable, http.StatusServiceUnavailable}, got)

	require.Eventually(t, func() bool { return len(g.InFlight()) == 0 }, 5*time.Second, time.Millisecond, "nothing in flight: %v", g.InFlight())
	require.Zero(t, g.Held())
	// The gauge drops just after the request leaves the in-flight map.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kfn_gateway_in_flight Requests in the gateway now, held ones included.
# TYPE kfn_gateway_in_flight gauge
kfn_gateway_in_flight{function="fulfil",namespace="shop"} 0
kfn_gateway_in_flight{function="orders",namespace="shop"} 0
`), "kfn_gateway_in_flight"))
	}, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		after, busy := rep.afterLastBusy()
		return busy && len(after) > 0
	}, 5*time.Second, time.Millisecond, "a report of zero follows the last that counted requests")
	require.Never(t, func() bool { after, _ := rep.afterLastBusy(); return len(after) > 1 }, 10*interval, interval,
		"one report of zero, not one every interval")
	assert.Equal(t, map[time.Duration]bool{5 * interval: true}, rep.validities(), "every report is valid for 5 intervals")
}

// TestBackendHeadersAreBounded: a Function that answers with megabytes of
// headers (Go's own bound is 10 MiB per request in flight) is answered 502
// with the reason past gateway.MaxResponseHeaderBytes, and another
// tenant's Function is served meanwhile.
func TestBackendHeadersAreBounded(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	loud := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Big-0", big)
		w.Header().Set("X-Big-1", big)
	}))
	t.Cleanup(loud.Close)
	bs := newBackends()
	bs.set("tenant-a/loud", strings.TrimPrefix(loud.URL, "http://"))
	be := newBackend(t)
	bs.set("tenant-b/orders", addr(be))
	srv := newGateway(t, bs, nil, gateway.Config{})

	resp, err := http.Get(srv.URL + "/tenant-a/loud/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	assert.Contains(t, string(body), "response headers exceeded "+strconv.Itoa(gateway.MaxResponseHeaderBytes))
	assert.Zero(t, len(resp.Header.Get("X-Big-0")), "the headers are not passed on")

	resp, err = http.Get(srv.URL + "/tenant-b/orders/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestGatewayKeepsToTheEgressPolicy: the gateway dials a Function's
// backend, an address a tenant's EndpointSlice may name, only where
// Config.Egress lets it: a loopback address (the event bridge's own
// ports), a link-local one (the cloud metadata service) or one its Deny
// names (the API server's) is answered 502 with the reason, and nothing
// reaches it.
func TestGatewayKeepsToTheEgressPolicy(t *testing.T) {
	be := newBackend(t)
	apiServer := func(a netip.AddrPort) (string, bool) {
		return "the Kubernetes API server's address", a.String() == addr(be)
	}
	tests := map[string]struct {
		policy egress.Policy
		addr   string
		want   string
	}{
		"loopback":   {addr: addr(be), want: "is a loopback address"},
		"link-local": {policy: egress.Policy{AllowLoopback: true}, addr: "169.254.169.254:80", want: "is a link-local address"},
		"denied":     {policy: egress.Policy{AllowLoopback: true, Deny: apiServer}, addr: addr(be), want: "is the Kubernetes API server's address"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			bs := newBackends()
			bs.set("shop/orders", tt.addr)
			g, err := gateway.New(bs, gateway.Config{Egress: tt.policy})
			require.NoError(t, err)
			srv := httptest.NewServer(g)
			t.Cleanup(srv.Close)
			resp, err := http.Get(srv.URL + "/shop/orders/")
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
			assert.Contains(t, string(body), egress.ErrRefused.Error())
			assert.Contains(t, string(body), tt.want)
			assert.Zero(t, be.hits.Load(), "nothing reached the backend")
		})
	}

	bs := newBackends()
	bs.set("shop/orders", addr(be))
	srv := newGateway(t, bs, nil, gateway.Config{Egress: loopback})
	resp, err := http.Get(srv.URL + "/shop/orders/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "allowed, it is reached")
}

// TestHeldRequestsAreSharedAmongNamespaces: a namespace holds at most
// MaxHeldPerNamespace requests, and when namespaces at their cap hold every
// slot, the request of a namespace holding fewer takes the newest of the
// namespace holding the most (answered 503): one tenant's never-ready
// Functions cannot make every other tenant's wake-by-HTTP answer 503.
func TestHeldRequestsAreSharedAmongNamespaces(t *testing.T) {
	bs := newBackends()
	for _, fn := range []string{"tenant-a/never", "tenant-b/never", "tenant-c/orders"} {
		bs.set(fn, "")
	}
	g, srv := newGatewayWith(t, bs, &reporter{}, gateway.Config{MaxHeld: 4, MaxHeldPerNamespace: 2, HoldTimeout: 10 * time.Second})
	codes := make(chan int, 10)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // the requests still held leave before the server closes
	get := func(path string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if !assert.NoError(t, err) {
			codes <- 0
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			codes <- 0
			return
		}
		resp.Body.Close()
		codes <- resp.StatusCode
	}
	for range 2 {
		go get("/tenant-a/never/")
	}
	require.Eventually(t, func() bool { return g.Held() == 2 }, 5*time.Second, time.Millisecond)

	start := time.Now()
	resp, err := http.Get(srv.URL + "/tenant-a/never/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a namespace past its share is refused")
	assert.Less(t, time.Since(start), 5*time.Second, "at once, not after the hold timeout")
	assert.Contains(t, string(body), "namespace tenant-a")
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))

	for range 2 {
		go get("/tenant-b/never/")
	}
	require.Eventually(t, func() bool { return g.Held() == 4 }, 5*time.Second, time.Millisecond, "two namespaces at their cap hold every slot")

	be := newBackend(t)
	done := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/tenant-c/orders/")
		if !assert.NoError(t, err) {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case code := <-codes:
		assert.Equal(t, http.StatusServiceUnavailable, code, "one held request of a full namespace gives its slot up")
	case <-time.After(5 * time.Second):
		t.Fatal("no held request gave its slot to another namespace's")
	}
	require.Eventually(t, func() bool { return g.Held() == 4 }, 5*time.Second, time.Millisecond, "the other namespace's request is held")
	bs.set("tenant-c/orders", addr(be))
	select {
	case code := <-done:
		assert.Equal(t, http.StatusOK, code, "and served once its Function is ready")
	case <-time.After(5 * time.Second):
		t.Fatal("the other namespace's request was not served")
	}
	assert.Equal(t, int32(1), be.hits.Load())
	assert.Empty(t, codes, "the other held requests wait on")
}

// TestOneNamespacesRequestsInFlightHoldBackNoOther: a namespace whose
// Function holds every request it gets (a slow or hostile backend) has at
// most MaxInFlightPerNamespace passed on at once; the next is answered
// 429 with Retry-After at once, and another namespace's request is passed
// on meanwhile; once the held ones end, the namespace is served again.
func TestOneNamespacesRequestsInFlightHoldBackNoOther(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 8)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) }) // before the server's Close, which waits for them
	fast := newBackend(t)
	bs := newBackends()
	bs.set("tenant-a/slow", addr(&backend{Server: slow}))
	bs.set("tenant-b/orders", addr(fast))
	_, srv := newGatewayWith(t, bs, nil, gateway.Config{MaxInFlightPerNamespace: 2})
	hc := &http.Client{Timeout: 10 * time.Second}
	held := make(chan int, 2)
	for range 2 {
		go func() {
			resp, err := hc.Get(srv.URL + "/tenant-a/slow/")
			if err != nil {
				held <- 0
				return
			}
			resp.Body.Close()
			held <- resp.StatusCode
		}()
		<-arrived
	}
	resp, err := hc.Get(srv.URL + "/tenant-a/slow/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "past its namespace's bound: %s", body)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Contains(t, string(body), "namespace tenant-a has 2 requests in flight")

	resp, err = hc.Get(srv.URL + "/tenant-b/orders/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "another namespace's request, meanwhile")

	release <- struct{}{}
	release <- struct{}{}
	for range 2 {
		assert.Equal(t, http.StatusOK, <-held)
	}
	go func() { release <- struct{}{} }()
	resp, err = hc.Get(srv.URL + "/tenant-a/slow/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "served again")
}
