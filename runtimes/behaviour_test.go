package runtimes_test

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/runtimes"
)

// forEachRuntime runs f in parallel for each runtime the contract covers.
func forEachRuntime(t *testing.T, f func(t *testing.T, rt runtimes.Runtime)) {
	t.Helper()
	for _, rt := range testRuntimes(t) {
		t.Run(rt.Name, func(t *testing.T) {
			t.Parallel()
			f(t, rt)
		})
	}
}

// TestSampleFunctionEveryRuntime serves the seed's sample function with
// every runtime of the catalog.
func TestSampleFunctionEveryRuntime(t *testing.T) {
	t.Parallel()
	for _, rt := range runtimes.All() {
		t.Run(rt.Name, func(t *testing.T) {
			t.Parallel()
			h := startHost(t, rt, fixture(t, rt, "sample"), hostOptions{
				cfg: runtimes.Config{FunctionName: "my-test-function"},
				env: map[string]string{"PERSON_NAME": "Kyma"},
			})
			r := h.mustDo("GET", "/", nil, "")
			assert.Equal(t, 200, r.status)
			assert.Equal(t, "Hello Kyma", r.body)
		})
	}
}

// TestHostSurvivesFailures checks that throwing, rejecting and timing-out
// handlers leave the host serving, and that they are counted as failures.
func TestHostSurvivesFailures(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		h := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{
			cfg: runtimes.Config{Timeout: time.Second},
			env: map[string]string{"PERSON_NAME": "again"},
		})
		assert.Equal(t, 500, h.mustDo("GET", "/throw", nil, "").status)
		assert.Equal(t, 500, h.mustDo("GET", "/reject", nil, "").status)
		assert.Equal(t, 408, h.mustDo("GET", "/hang", nil, "").status)
		r := h.mustDo("GET", "/hello", nil, "")
		assert.Equal(t, 200, r.status)
		assert.Equal(t, "Hello again", r.body)

		m := h.mustDo("GET", "/metrics", nil, "").body
		assert.Equal(t, "4", metric(t, m, "function_calls_total"), m)
		assert.Equal(t, "3", metric(t, m, "function_failures_total"), m)
		assert.Equal(t, "4", metric(t, m, "function_duration_seconds_count"), m)
		h.logged(t, "boom", "the error is logged")

		assert.Equal(t, "ok", h.mustDo("GET", "/stray-errors", nil, "").body)
		require.Eventually(t, func() bool {
			return strings.Contains(h.out.String(), "late boom")
		}, 10*time.Second, 5*time.Millisecond, "the stray error is logged")
		assert.Equal(t, "Hello again", h.mustDo("GET", "/hello", nil, "").body, "the host still serves")
	})
}

// TestKymaMetricNames checks the metrics as dashboards written for Kyma
// read them: Kyma's Node.js runtime exports function_duration_miliseconds
// (sic: its name) in milliseconds, its Python runtime labels calls,
// failures and durations with the request's method.
func TestKymaMetricNames(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		h := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{env: map[string]string{"PERSON_NAME": "World"}})
		assert.Equal(t, 200, h.mustDo("GET", "/sleep?ms=30", nil, "").status)
		assert.Equal(t, 200, h.mustDo("GET", "/hello", nil, "").status)
		assert.Equal(t, 500, h.mustDo("POST", "/throw", nil, "").status)
		m := h.mustDo("GET", "/metrics", nil, "").body
		switch rt.Language {
		case runtimes.NodeJS:
			assert.Equal(t, "3", metric(t, m, "function_duration_miliseconds_count"), m)
			assert.Contains(t, m, `function_duration_miliseconds_bucket{le="10000"} 3`, "OpenTelemetry's default boundaries, in ms")
			assert.Contains(t, m, `function_duration_miliseconds_bucket{le="0"} 0`)
			sum, err := strconv.ParseFloat(metric(t, m, "function_duration_miliseconds_sum"), 64)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, sum, 30.0, "milliseconds, not seconds")
			assert.Equal(t, "3", metric(t, m, "function_calls_total"))
			assert.Equal(t, "1", metric(t, m, "function_failures_total"))
		case runtimes.Python:
			for series, want := range map[string]string{
				`function_calls_total{method="GET"}`:                        "2",
				`function_calls_total{method="POST"}`:                       "1",
				`function_failures_total{method="GET"}`:                     "0",
				`function_failures_total{method="POST"}`:                    "1",
				`function_duration_seconds_count{method="GET"}`:             "2",
				`function_duration_seconds_bucket{method="POST",le="+Inf"}`: "1",
			} {
				assert.Contains(t, m, series+" "+want+"\n", m)
			}
		}
	})
}

// metric returns the value of a metric in the Prometheus text format,
// summed over its series (Python's are labelled by method, as Kyma's).
func metric(t *testing.T, text, name string) string {
	t.Helper()
	v, err := metricSum(text, name)
	require.NoError(t, err)
	return v
}

// metricSum is metric for conditions, which run in Eventually's goroutine
// and must not stop the test: it returns the error.
func metricSum(text, name string) (string, error) {
	ms := regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`(?:\{[^}]*\})? (\S+)$`).FindAllStringSubmatch(text, -1)
	if len(ms) == 0 {
		return "", fmt.Errorf("metric %s missing", name)
	}
	sum := 0.0
	for _, m := range ms {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return "", fmt.Errorf("metric %s: %w", name, err)
		}
		sum += v
	}
	return strconv.FormatFloat(sum, 'f', -1, 64), nil
}

// TestBodyLimit checks the body limit (REQ_MB_LIMIT, FUNC_MEMFILE_MAX): at
// the limit is served, above it is a 413, with a declared length and with a
// chunked body; the host keeps serving.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		h := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{
			cfg: runtimes.Config{BodyLimit: 1 << 20},
			env: map[string]string{"PERSON_NAME": "World"},
		})
		const mib = 1 << 20
		text := map[string]string{"Content-Type": "text/plain"}

		r, err := h.do("POST", "/none", text, bytes.NewReader(bytes.Repeat([]byte("a"), mib)))
		require.NoError(t, err)
		assert.Equal(t, 200, r.status, "a body of exactly the limit is served")

		// Bodies much larger than socket buffers: the client is still sending
		// when the 413 goes out, and must receive it rather than a reset.
		big := bytes.Repeat([]byte("b"), 16*mib)
		for range 3 {
			r, err = h.do("POST", "/none", text, bytes.NewReader(big))
			require.NoError(t, err, "declared length over the limit")
			assert.Equal(t, 413, r.status, "declared length over the limit")

			// io.MultiReader hides the length, so the body is sent chunked.
			r, err = h.do("POST", "/none", text, io.MultiReader(bytes.NewReader(big)))
			require.NoError(t, err, "chunked body over the limit")
			assert.Equal(t, 413, r.status, "chunked body over the limit")
		}

		assert.Equal(t, "Hello World", h.mustDo("GET", "/hello", nil, "").body)
	})
}

// TestBodyLimitAsKyma posts bodies the way a Kyma user's producer does, with
// the platform's defaults and with the limit a Kyma user sets in spec.env:
// Node.js takes 1 MiB (REQ_MB_LIMIT, context "body-size-limit" 1, in MiB),
// Python 100 MiB (FUNC_MEMFILE_MAX, context "body-size-limit" in bytes), as
// Kyma's runtimes do.
func TestBodyLimitAsKyma(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	jsonBody := func(size int) string {
		return `{"blob":"` + strings.Repeat("x", size-len(`{"blob":""}`)) + `"}`
	}
	post := func(t *testing.T, h *host, size int) response {
		r, err := h.do("POST", "/echo", map[string]string{"Content-Type": "application/json"}, strings.NewReader(jsonBody(size)))
		require.NoError(t, err)
		return r
	}
	limitOf := func(t *testing.T, h *host) any {
		var got struct {
			Context map[string]any `json:"context"`
		}
		r := h.mustDo("GET", "/echo", nil, "")
		require.NoError(t, json.Unmarshal([]byte(r.body), &got), r.body)
		return got.Context["body-size-limit"]
	}
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		h := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{env: map[string]string{"PERSON_NAME": "World"}})
		if rt.Language == runtimes.NodeJS {
			assert.EqualValues(t, 1, limitOf(t, h), "MiB")
			assert.Equal(t, 200, post(t, h, mib).status)
			assert.Equal(t, 413, post(t, h, mib+1).status)
			return
		}
		assert.EqualValues(t, 100*mib, limitOf(t, h), "bytes")
		r := post(t, h, 24*mib)
		require.Equal(t, 200, r.status, "a 24 MiB JSON body is parsed, as bottle did up to MEMFILE_MAX")
		var got struct {
			Kind string         `json:"kind"`
			Data map[string]any `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.body), &got))
		assert.Equal(t, "json", got.Kind)
		assert.Len(t, got.Data["blob"], 24*mib-len(`{"blob":""}`))

		// The limit a Kyma user sets for Python, in bytes.
		small := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{env: map[string]string{"FUNC_MEMFILE_MAX": "2097152"}})
		assert.EqualValues(t, 2*mib, limitOf(t, small))
		assert.Equal(t, 200, post(t, small, 2*mib).status)
		assert.Equal(t, 413, post(t, small, 2*mib+1).status)
	})
}

// publisher is a test event publisher that records what functions emit.
type publisher struct {
	*httptest.Server
	mu     sync.Mutex
	events []emitted
}

type emitted struct {
	header http.Header
	body   string
}

func newPublisher(t *testing.T) *publisher {
	p := &publisher{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.events = append(p.events, emitted{header: r.Header.Clone(), body: string(b)})
		p.mu.Unlock()
		if r.Header.Get("Ce-Type") == "fail.me.v1" {
			http.Error(w, "storage full", http.StatusInsufficientStorage)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *publisher) received() []emitted {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]emitted(nil), p.events...)
}

// TestEmitCloudEvent checks function-to-function chaining: the event
// arrives at PUBLISHER_PROXY_ADDRESS as a binary CloudEvent carrying the
// incoming trace context, and a publisher failure reaches the handler.
func TestEmitCloudEvent(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		pub := newPublisher(t)
		h := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{
			cfg: runtimes.Config{PublisherAddress: pub.URL + "/publish"},
		})
		const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		r := h.mustDo("POST", "/emit", map[string]string{
			"Traceparent": traceparent, "Tracestate": "kfn=1", "Content-Type": "application/json",
		}, `{}`)
		require.Equal(t, 200, r.status, r.body)
		assert.JSONEq(t, `{"status":204}`, r.body)

		got := pub.received()
		require.Len(t, got, 1)
		e := got[0]
		assert.Equal(t, "1.0", e.header.Get("Ce-Specversion"))
		assert.Equal(t, "order.created.v1", e.header.Get("Ce-Type"))
		assert.Equal(t, "kfn-test", e.header.Get("Ce-Source"))
		assert.Equal(t, "v1", e.header.Get("Ce-Eventtypeversion"))
		assert.NotEmpty(t, e.header.Get("Ce-Id"))
		_, err := time.Parse(time.RFC3339, e.header.Get("Ce-Time"))
		assert.NoError(t, err, "ce-time %q", e.header.Get("Ce-Time"))
		assert.Equal(t, "application/json", e.header.Get("Content-Type"))
		assert.Equal(t, traceparent, e.header.Get("Traceparent"))
		assert.Equal(t, "kfn=1", e.header.Get("Tracestate"))
		assert.JSONEq(t, `{"x":1}`, e.body)

		assert.Empty(t, e.header.Get("Authorization"), "no token unless PUBLISHER_TOKEN is set")

		r = h.mustDo("POST", "/emit?type=fail.me.v1", nil, "")
		assert.Equal(t, 502, r.status)
		var failure struct{ Error string }
		require.NoError(t, json.Unmarshal([]byte(r.body), &failure), r.body)
		assert.Contains(t, failure.Error, "507")
		assert.Contains(t, failure.Error, "storage full")
	})
}

// TestEmittedEventsCarryTheHopCount checks that an event a function emits
// while it handles another is one hop further down the chain (kfnhops:
// the handled event's plus one, 1 for a call that is no event or whose
// count is no number), whatever the handler sets itself, so that the
// publisher's hop limit ends a function that emits what it receives.
func TestEmittedEventsCarryTheHopCount(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		pub := newPublisher(t)
		h := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{
			cfg: runtimes.Config{PublisherAddress: pub.URL + "/publish"},
		})
		tests := []struct{ path, incoming, want string }{
			{"/emit", "3", "4"},
			{"/emit", "", "1"},
			{"/emit", "x", "1"},
			{"/emit", "99999999999999999999", "1000000000"},
			{"/emit?kfnhops=0", "5", "6"},
		}
		for i, tt := range tests {
			header := map[string]string{"Content-Type": "application/json"}
			if tt.incoming != "" {
				header["Ce-Kfnhops"] = tt.incoming
			}
			r := h.mustDo("POST", tt.path, header, `{}`)
			require.Equal(t, 200, r.status, r.body)
			got := pub.received()
			require.Len(t, got, i+1)
			assert.Equal(t, tt.want, got[i].header.Get("Ce-Kfnhops"), "%s with kfnhops %q", tt.path, tt.incoming)
		}
	})
}

// TestEmitCloudEventWithToken checks that a function sends PUBLISHER_TOKEN
// as a bearer token, for a publisher that requires one.
func TestEmitCloudEventWithToken(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		pub := newPublisher(t)
		h := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{
			cfg: runtimes.Config{PublisherAddress: pub.URL + "/publish"},
			env: map[string]string{"PUBLISHER_TOKEN": "s3cret"},
		})
		r := h.mustDo("POST", "/emit", map[string]string{"Content-Type": "application/json"}, `{}`)
		require.Equal(t, 200, r.status, r.body)
		got := pub.received()
		require.Len(t, got, 1)
		assert.Equal(t, "Bearer s3cret", got[0].header.Get("Authorization"))
	})
}

// TestEmitCloudEventWithIdentity checks that a function sends its pod's
// identity token (KFN_IDENTITY_TOKEN_FILE) as its bearer token, read anew
// at every emit (the kubelet renews it), that PUBLISHER_TOKEN goes beside
// it (auth.TokenHeader) so that the publisher checks both, and that a
// missing file sends nothing.
func TestEmitCloudEventWithIdentity(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		file := filepath.Join(t.TempDir(), "token")
		require.NoError(t, os.WriteFile(file, []byte("identity-1\n"), 0o600))
		emit := func(h *host, pub *publisher) string {
			t.Helper()
			r := h.mustDo("POST", "/emit", map[string]string{"Content-Type": "application/json"}, `{}`)
			require.Equal(t, 200, r.status, r.body)
			got := pub.received()
			require.NotEmpty(t, got)
			return got[len(got)-1].header.Get("Authorization")
		}
		pub := newPublisher(t)
		h := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{
			cfg: runtimes.Config{PublisherAddress: pub.URL + "/publish", IdentityTokenFile: file},
		})
		assert.Equal(t, "Bearer identity-1", emit(h, pub))
		require.NoError(t, os.WriteFile(file, []byte("identity-2"), 0o600))
		assert.Equal(t, "Bearer identity-2", emit(h, pub), "the renewed token")
		require.NoError(t, os.Remove(file))
		assert.Empty(t, emit(h, pub), "no file, no token")

		shared := newPublisher(t)
		require.NoError(t, os.WriteFile(file, []byte("identity-3"), 0o600))
		h = startHost(t, rt, fixture(t, rt, "contract"), hostOptions{
			cfg: runtimes.Config{PublisherAddress: shared.URL + "/publish", IdentityTokenFile: file},
			env: map[string]string{"PUBLISHER_TOKEN": "s3cret"},
		})
		assert.Equal(t, "Bearer identity-3", emit(h, shared), "the identity beside the shared token")
		assert.Equal(t, "s3cret", shared.received()[0].header.Get(auth.TokenHeader), "the shared token beside the identity")
		require.NoError(t, os.Remove(file))
		assert.Equal(t, "Bearer s3cret", emit(h, shared), "the shared token alone without an identity")
		assert.Empty(t, shared.received()[1].header.Values(auth.TokenHeader))
	})
}

// TestConcurrentRequestsOverlap checks that calls run at the same time:
// two calls that each wait for the other to arrive both succeed, which a
// host serving one call after the other cannot do.
func TestConcurrentRequestsOverlap(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		h := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{
			env: map[string]string{"MARKER_DIR": t.TempDir()},
		})
		var wg sync.WaitGroup
		for _, pair := range [][2]string{{"a", "b"}, {"b", "a"}} {
			wg.Go(func() {
				r, err := h.do("GET", fmt.Sprintf("/meet?me=%s&other=%s", pair[0], pair[1]), nil, nil)
				assert.NoError(t, err)
				assert.Equal(t, "met", r.body, "call %s did not overlap with the other", pair[0])
			})
		}
		wg.Wait()
	})
}

// TestHealthNamesTheFunction checks that the health answers name the
// Function (namespace/name), which the event bridge's early ready probe
// compares with the Service it probes for.
func TestHealthNamesTheFunction(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		h := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{
			cfg: runtimes.Config{FunctionName: "orders", Namespace: "team-a"},
		})
		for _, path := range []string{"/healthz", "/healthz?ready"} {
			r := h.mustDo("GET", path, nil, "")
			require.Equal(t, 200, r.status, r.body)
			assert.Equal(t, "team-a/orders", r.header.Get("X-Kfn-Function"), path)
		}
	})
}

// TestSIGTERMDrains checks graceful shutdown: a call in flight when SIGTERM
// arrives is completed, new connections are refused, and the host exits 0.
func TestSIGTERMDrains(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		markers := t.TempDir()
		h := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{
			env: map[string]string{"MARKER_DIR": markers},
		})
		// An idle keep-alive connection must not hold the host open.
		require.Equal(t, 200, h.mustDo("GET", "/healthz", nil, "").status)

		type result struct {
			r   response
			err error
		}
		done := make(chan result, 1)
		go func() {
			r, err := h.do("GET", "/block?ms=700", nil, nil)
			done <- result{r, err}
		}()
		require.Eventually(t, func() bool {
			_, err := os.Stat(filepath.Join(markers, "started"))
			return err == nil
		}, 10*time.Second, 5*time.Millisecond, "the call did not start")

		h.signal(syscall.SIGTERM)
		res := <-done
		require.NoError(t, res.err)
		assert.Equal(t, 200, res.r.status)
		assert.Equal(t, "finished", res.r.body)
		assert.Equal(t, 0, h.waitExit(10*time.Second), h.out.String())
		_, err := http.Get(h.URL + "/healthz")
		assert.Error(t, err, "the host must not accept connections after draining")
	})
}

// TestASignalWhileStartingEndsTheHost: a host signalled while it still
// loads its handler exits at once. It runs as PID 1 of its own PID
// namespace, as in a container, where a signal the process has no handler
// for is ignored: the hosts installed theirs only once they served, so a
// pod deleted while its host started (a Function scaled to zero a second
// after its new pod started, which a real-node bench run hit whenever
// loading took seconds) lived on until the kubelet's SIGKILL.
func TestASignalWhileStartingEndsTheHost(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace of its own (unshare) needs root")
	}
	for _, name := range []string{"nodejs22", "python312"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rt := lookup(t, name)
			h := startHost(t, rt, fixture(t, rt, "slow-load"), hostOptions{noWait: true, pid1: true})
			require.Eventually(t, func() bool { return strings.Contains(h.out.String(), "kfn-test: loading") }, 15*time.Second, 5*time.Millisecond,
				"the handler started loading\n%s", h.out)
			h.signalInit(syscall.SIGTERM)
			assert.Equal(t, 0, h.waitExit(5*time.Second), h.out.String())
			h.logged(t, "kfn: SIGTERM before serving: exiting")
		})
	}
}

// TestHandlerLoadFailure runs handlers that cannot be loaded, as Kyma users
// write them (a syntax error, an undeclared dependency, a module that throws
// while loading, no such handler function). As Kyma's Node.js host does, the
// host keeps serving: /healthz answers 200 and every call 500 "User function
// not loaded"; the readiness path answers 500 with the reason, so a pod
// never takes traffic (nor replaces a working version) without its handler.
// The reason is on the host's output, CORS preflights and /metrics still
// work, and SIGTERM still drains and exits 0.
func TestHandlerLoadFailure(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		fixture string
		cfg     runtimes.Config
		reason  map[runtimes.Language]string
	}{
		"syntax error":       {fixture: "broken", reason: map[runtimes.Language]string{runtimes.NodeJS: "SyntaxError", runtimes.Python: "SyntaxError"}},
		"missing dependency": {fixture: "missing-dep", reason: map[runtimes.Language]string{runtimes.NodeJS: "kfn-test-no-such-package", runtimes.Python: "ModuleNotFoundError: No module named 'kfn_test_no_such_package'"}},
		"throws on load":     {fixture: "throws", reason: map[runtimes.Language]string{runtimes.NodeJS: "handler.js:2: Error: API_KEY is not set", runtimes.Python: "handler.py:5: RuntimeError: API_KEY is not set"}},
		"no such function":   {fixture: "sample", cfg: runtimes.Config{Handler: "nope"}, reason: map[runtimes.Language]string{runtimes.NodeJS: `"nope"`, runtimes.Python: `"nope"`}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
				h := startHost(t, rt, fixture(t, rt, tt.fixture), hostOptions{cfg: tt.cfg, noWait: true})
				h.waitServing(15 * time.Second)
				reason := tt.reason[rt.Language]

				r := h.mustDo("GET", runtimes.HealthPath, nil, "")
				assert.Equal(t, 200, r.status, "liveness: the host serves")
				r = h.mustDo("GET", runtimes.ReadyPath, nil, "")
				assert.Equal(t, 500, r.status, "readiness: the handler is not loaded")
				assert.Contains(t, r.body, "User function not loaded: ")
				assert.Contains(t, r.body, reason)

				for _, call := range []struct{ method, path, body string }{
					{"GET", "/", ""}, {"POST", "/orders", `{"id":1}`}, {"DELETE", "/x?y=1", ""},
				} {
					r = h.mustDo(call.method, call.path, map[string]string{"Content-Type": "application/json"}, call.body)
					assert.Equal(t, 500, r.status, "%s %s", call.method, call.path)
					assert.Equal(t, "User function not loaded", r.body, "Kyma's answer")
					if rt.Language == runtimes.NodeJS {
						assert.Equal(t, "text/html; charset=utf-8", r.header.Get("Content-Type"), "Kyma's Express send")
					}
				}
				r = h.mustDo("OPTIONS", "/", map[string]string{"Origin": "https://app", "Access-Control-Request-Method": "POST"}, "")
				assert.Equal(t, 200, r.status, "CORS preflight")
				m := h.mustDo("GET", "/metrics", nil, "").body
				assert.Equal(t, "3", metric(t, m, "function_calls_total"))
				assert.Equal(t, "3", metric(t, m, "function_failures_total"))
				h.logged(t, "User function not loaded")
				// The log has the whole trace; its last part is the message.
				parts := strings.Split(reason, ": ")
				h.logged(t, parts[len(parts)-1], "the reason is logged")

				h.signal(syscall.SIGTERM)
				assert.Equal(t, 0, h.waitExit(10*time.Second), h.out.String())
			})
		})
	}
}

// TestBadHostConfigExits checks that a setting the host cannot run with at
// all stops it with exit code 1 and the reason, before it listens.
func TestBadHostConfigExits(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		h := startHost(t, rt, fixture(t, rt, "sample"), hostOptions{env: map[string]string{"FUNC_TIMEOUT": "soon"}, noWait: true})
		assert.Equal(t, 1, h.waitExit(15*time.Second))
		h.logged(t, "FUNC_TIMEOUT")
	})
}

// configMapVolume lays out the files of dir as a ConfigMap volume does:
// read-only files in a timestamped directory, ..data linking to it, and a
// link per file, in a read-only directory.
func configMapVolume(t *testing.T, dir string) string {
	t.Helper()
	vol := t.TempDir()
	stamp := filepath.Join(vol, "..2026_01_02_03_04_05.000000001")
	require.NoError(t, os.Mkdir(stamp, 0o755))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(stamp, e.Name()), b, 0o444))
		require.NoError(t, os.Symlink(filepath.Join("..data", e.Name()), filepath.Join(vol, e.Name())))
	}
	require.NoError(t, os.Symlink(filepath.Base(stamp), filepath.Join(vol, "..data")))
	require.NoError(t, os.Chmod(stamp, 0o555))
	require.NoError(t, os.Chmod(vol, 0o555))
	t.Cleanup(func() { _ = os.Chmod(vol, 0o755); _ = os.Chmod(stamp, 0o755) })
	return vol
}

// TestWritableFunctionDir runs a Kyma handler that writes files next to
// itself, with the source in a read-only ConfigMap volume (KFN_SOURCE_DIR)
// copied into an empty function directory (KFN_FUNCTION_DIR), as in a pod:
// HANDLER_PATH (Node.js) or FUNCTION_PATH (Python) point there, it is the
// working directory, and the source stays untouched. A second host on the
// same directory (a restarted container) copies the source again and keeps
// what the first one wrote.
func TestWritableFunctionDir(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		source := configMapVolume(t, fixture(t, rt, "writable"))
		fnDir := t.TempDir()
		start := func() *host {
			return startHost(t, rt, fnDir, hostOptions{cfg: runtimes.Config{SourceDir: source}})
		}
		h := start()
		r := h.mustDo("POST", "/", map[string]string{"Content-Type": "application/json"}, `{"order":7}`)
		require.Equal(t, 200, r.status, r.body+h.out.String())
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.body), &got))
		if rt.Language == runtimes.NodeJS {
			assert.Equal(t, filepath.Join(fnDir, "handler.js"), got["handlerPath"])
		} else {
			assert.Equal(t, fnDir, got["functionPath"])
		}
		assert.Equal(t, fnDir, got["dir"], "the handler runs from the function's directory")
		assert.Equal(t, fnDir, got["cwd"])
		assert.Equal(t, map[string]any{"order": float64(7)}, got["cached"])
		assert.Equal(t, "written", got["relative"])
		assert.FileExists(t, filepath.Join(fnDir, "cache.json"))
		assert.NoFileExists(t, filepath.Join(source, "cache.json"), "the source is not written")
		assert.NoFileExists(t, filepath.Join(fnDir, "..data"), "the volume's bookkeeping is not copied")
		fi, err := os.Lstat(filepath.Join(fnDir, rt.SourceFile()))
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "a copy, not a link")
		assert.NotZero(t, fi.Mode().Perm()&0o200, "owner-writable, unlike the ConfigMap's file")

		h.signal(syscall.SIGTERM)
		require.Equal(t, 0, h.waitExit(10*time.Second), h.out.String())
		again := start()
		assert.FileExists(t, filepath.Join(fnDir, "cache.json"), "what the function wrote survives a restart")
		assert.Equal(t, 200, again.mustDo("POST", "/", map[string]string{"Content-Type": "application/json"}, `{"order":8}`).status)
	})
}

// TestCustomModuleAndHandlerNames checks MOD_NAME and FUNC_HANDLER.
func TestCustomModuleAndHandlerNames(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		h := startHost(t, rt, fixture(t, rt, "custom-names"), hostOptions{
			cfg: runtimes.Config{Module: "app", Handler: "run"},
		})
		assert.Equal(t, "custom names", h.mustDo("GET", "/", nil, "").body)
	})
}

// TestListenOnFuncPort checks that the host binds FUNC_PORT when no
// listening socket is inherited.
func TestListenOnFuncPort(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		h := startHost(t, rt, fixture(t, rt, "sample"), hostOptions{
			usePort: true,
			env:     map[string]string{"PERSON_NAME": "port"},
		})
		assert.Equal(t, "Hello port", h.mustDo("GET", "/", nil, "").body)
	})
}

// TestESModuleHandlers checks the ES module forms of a Node.js handler.
func TestESModuleHandlers(t *testing.T) {
	t.Parallel()
	rt := lookup(t, "nodejs22")
	tests := map[string]struct {
		fixture string
		want    string
	}{
		"export function main in handler.mjs":      {"esm-named", `{"style":"esm-named","name":"esm"}`},
		"export default { main } with type module": {"esm-default", `{"style":"esm-default","data":{"a":1}}`},
		"ES module syntax detected in handler.js":  {"esm-detected", `{"style":"esm-detected","name":"esm"}`},
		"top-level await":                          {"esm-tla", `{"style":"esm-tla","name":"esm"}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := startHost(t, rt, fixture(t, rt, tc.fixture), hostOptions{cfg: runtimes.Config{FunctionName: "esm"}})
			r := h.mustDo("POST", "/", map[string]string{"Content-Type": "application/json"}, `{"a":1}`)
			require.Equal(t, 200, r.status, r.body)
			assert.JSONEq(t, tc.want, r.body)
		})
	}
}

// TestStartsQuickly is a coarse guard on cold start (the benchmark in
// bench/runtimes measures it properly): process start to the first
// /healthz 200 well under a second even on a loaded machine.
func TestStartsQuickly(t *testing.T) {
	t.Parallel()
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		start := time.Now()
		h := startHost(t, rt, fixture(t, rt, "sample"), hostOptions{noWait: true})
		h.waitReady(15 * time.Second)
		elapsed := time.Since(start)
		t.Logf("%s: process start to first /healthz 200: %s", rt.Name, elapsed)
		assert.Less(t, elapsed, 2*time.Second)
	})
}

// TestPythonOutputIsLineAtomic runs handlers that print at the same time:
// every line comes out whole, and a line left without a newline ends with
// the call.
func TestPythonOutputIsLineAtomic(t *testing.T) {
	rt := lookup(t, "python312")
	h := startHost(t, rt, fixture(t, rt, "printer"), hostOptions{})
	const calls = 8
	var wg sync.WaitGroup
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := h.do(http.MethodGet, "/", nil, nil) // not mustDo: FailNow belongs to the test's goroutine
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	whole := regexp.MustCompile(`^line \d+ \d+ x{200}$`)
	count := func() (lines, partials int) {
		for _, line := range strings.Split(h.out.String(), "\n") {
			switch {
			case strings.HasPrefix(line, "line "):
				require.Regexp(t, whole, line, "a line was cut or merged")
				lines++
			case line == "partial without newline":
				partials++
			case strings.Contains(line, "partial without newline"):
				t.Fatalf("a partial line was merged: %q", line)
			}
		}
		return lines, partials
	}
	// The output pipe may trail the responses: wait for every line.
	require.Eventually(t, func() bool {
		lines, partials := count()
		return lines == calls*20 && partials == calls
	}, 10*time.Second, 10*time.Millisecond)
}

// TestSIGTERMWithAnUnusedConnection drains with a client connection open
// that never sent a request (a client dialled, then cancelled its
// request): the host must not wait for it to time out.
func TestSIGTERMWithAnUnusedConnection(t *testing.T) {
	t.Parallel()
	for _, rt := range testRuntimes(t) {
		t.Run(rt.Name, func(t *testing.T) {
			t.Parallel()
			h := startHost(t, rt, fixture(t, rt, "sample"), hostOptions{})
			h.mustDo(http.MethodGet, "/", nil, "") // the host serves
			conn, err := net.Dial("tcp", strings.TrimPrefix(h.URL, "http://"))
			require.NoError(t, err)
			defer conn.Close()
			// Make sure the host has accepted it before the signal.
			require.Eventually(t, func() bool {
				r, err := h.do(http.MethodGet, "/healthz", nil, nil)
				return err == nil && r.status == http.StatusOK
			}, 5*time.Second, 10*time.Millisecond)
			h.signal(syscall.SIGTERM)
			assert.Equal(t, 0, h.waitExit(5*time.Second))
		})
	}
}

// TestSIGTERMTakenByAnotherThread drains when the kernel hands the
// process's SIGTERM to a thread other than the main one, which it may do
// for any thread that does not block the signal. The signal is sent to
// such a thread directly (tgkill), the one way to make that choice
// deterministic. A Python host's main thread sleeping in accept() is not
// woken by a signal another thread took; its handler must still run.
func TestSIGTERMTakenByAnotherThread(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		h := startHost(t, rt, fixture(t, rt, "sample"), hostOptions{})
		h.mustDo(http.MethodGet, "/healthz", nil, "") // a connection's thread, where there is one
		pid := h.cmd.Process.Pid
		tid, ok := threadTakingSIGTERM(t, pid)
		if !ok {
			t.Skipf("%s: every thread but the main one blocks SIGTERM, so the kernel gives it to the main thread", rt.Name)
		}
		require.NoError(t, syscall.Tgkill(pid, tid, syscall.SIGTERM))
		assert.Equal(t, 0, h.waitExit(5*time.Second))
	})
}

// threadTakingSIGTERM returns a thread of process pid, not its main
// thread, that does not block SIGTERM.
func threadTakingSIGTERM(t *testing.T, pid int) (int, bool) {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	require.NoError(t, err)
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == pid {
			continue
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(status), "\n") {
			blocked, found := strings.CutPrefix(line, "SigBlk:")
			if !found {
				continue
			}
			mask, err := strconv.ParseUint(strings.TrimSpace(blocked), 16, 64)
			require.NoError(t, err, line)
			if mask&(1<<(uint(syscall.SIGTERM)-1)) == 0 {
				return tid, true
			}
		}
	}
	return 0, false
}

// TestRequestLog checks the request log Kyma's runtimes write when the
// user asks for it: KYMA_INTERNAL_LOGGER_ENABLED for the older runtimes,
// SERVER_INTERNAL_LOGGER for the newer ones (any value), one line per
// request in Apache's combined format (Node.js as morgan's 'combined',
// Python as wsgi-request-logger's, with the response time); each runtime
// reads its own name only, and without it writes no line.
func TestRequestLog(t *testing.T) {
	t.Parallel()
	date := `\[\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}\]`
	tests := map[string]struct {
		variable string
		line     string // a regular expression; "" for no line
	}{
		"nodejs22": {"KYMA_INTERNAL_LOGGER_ENABLED",
			`(?m)^127\.0\.0\.1 - alice ` + date + ` "GET /hello\?x=1 HTTP/1\.1" 200 11 "http://referrer/" "kfn-test"$`},
		"nodejs26": {"SERVER_INTERNAL_LOGGER",
			`(?m)^127\.0\.0\.1 - alice ` + date + ` "GET /hello\?x=1 HTTP/1\.1" 200 11 "http://referrer/" "kfn-test"$`},
		"python312": {"KYMA_INTERNAL_LOGGER_ENABLED",
			`(?m)^127\.0\.0\.1 - - ` + date + ` "GET /hello\?x=1 HTTP/1\.1" 200 11 "http://referrer/" "kfn-test" 0/\d+$`},
		"python314": {"SERVER_INTERNAL_LOGGER",
			`(?m)^127\.0\.0\.1 - - ` + date + ` "GET /hello\?x=1 HTTP/1\.1" 200 11 "http://referrer/" "kfn-test" 0/\d+$`},
		"nodejs26 reads only its own name":  {variable: "KYMA_INTERNAL_LOGGER_ENABLED"},
		"python312 reads only its own name": {variable: "SERVER_INTERNAL_LOGGER"},
		"python314 without the variable":    {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rt := lookup(t, strings.Fields(name)[0])
			env := map[string]string{"PERSON_NAME": "World"}
			if tc.variable != "" {
				env[tc.variable] = "false" // any value turns it on, as in Kyma
			}
			h := startHost(t, rt, fixture(t, rt, "sample"), hostOptions{env: env})
			r := h.mustDo("GET", "/hello?x=1", map[string]string{
				"Referer": "http://referrer/", "User-Agent": "kfn-test", "Authorization": "Basic YWxpY2U6cHc=",
			}, "")
			require.Equal(t, 200, r.status, r.body)
			if tc.line == "" {
				// All output is written once the host has exited.
				h.signal(syscall.SIGTERM)
				require.Equal(t, 0, h.waitExit(15*time.Second))
				assert.NotRegexp(t, `"GET /hello\?x=1 HTTP/1\.1" 200`, h.out.String())
				return
			}
			require.Eventually(t, func() bool { return regexp.MustCompile(tc.line).MatchString(h.out.String()) },
				5*time.Second, 5*time.Millisecond, "no request log line in:\n%s", h.out)
		})
	}
}

// TestNodeBodiesAsKymasBodyParsers: the Node.js hosts read a body as
// body-parser does in Kyma's runtimes (components/runtimes/nodejs24 and
// nodejs26's server.mjs): a gzip, deflate or br body is inflated before it
// is parsed, its limit counting the inflated bytes (a small bomb is 413),
// another Content-Encoding is 415 and an invalid stream 400; the event
// API's event.data parses application/json only, other *+json types being
// a Buffer (Kyma gives its JSON parser application/json and
// application/cloudevents+json only). The host keeps serving.
func TestNodeBodiesAsKymasBodyParsers(t *testing.T) {
	t.Parallel()
	const doc = `{"a":1}`
	compress := map[string]func([]byte) []byte{
		"gzip": func(b []byte) []byte {
			var buf bytes.Buffer
			w := gzip.NewWriter(&buf)
			_, _ = w.Write(b)
			_ = w.Close()
			return buf.Bytes()
		},
		"deflate": func(b []byte) []byte {
			var buf bytes.Buffer
			w, _ := zlib.NewWriterLevel(&buf, zlib.BestCompression)
			_, _ = w.Write(b)
			_ = w.Close()
			return buf.Bytes()
		},
		"br": func(b []byte) []byte { // Go's standard library has no brotli writer; node has
			cmd := exec.Command("node", "-e", "process.stdout.write(require('node:zlib').brotliCompressSync(require('node:fs').readFileSync(0)))")
			cmd.Stdin = bytes.NewReader(b)
			out, err := cmd.Output()
			require.NoError(t, err)
			return out
		},
	}
	for _, name := range []string{"nodejs24", "nodejs26"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rt := lookup(t, name)
			fix, path, jsonKind := "contract", "/echo", `"kind":"json","data":{"a":1}`
			if rt.API == runtimes.RequestAPI {
				fix, path, jsonKind = "kyma", "/body", `"kind":"object","body":{"a":1}`
			}
			h := startHost(t, rt, fixture(t, rt, fix), hostOptions{cfg: runtimes.Config{BodyLimit: 1 << 20}, env: map[string]string{"PERSON_NAME": "World"}})
			post := func(header map[string]string, body []byte) response {
				r, err := h.do("POST", path, header, bytes.NewReader(body))
				require.NoError(t, err)
				return r
			}
			for encoding, c := range compress {
				r := post(map[string]string{"Content-Type": "application/json", "Content-Encoding": encoding}, c([]byte(doc)))
				require.Equal(t, 200, r.status, "%s: %s", encoding, r.body)
				assert.Contains(t, r.body, jsonKind, encoding)
			}
			bomb := compress["gzip"](bytes.Repeat([]byte(" "), 8<<20)) // 8 MiB of JSON whitespace in ~8 KiB
			assert.Less(t, len(bomb), 64<<10)
			assert.Equal(t, 413, post(map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, bomb).status, "inflated past the limit")
			r := post(map[string]string{"Content-Type": "application/json", "Content-Encoding": "compress"}, []byte(doc))
			assert.Equal(t, 415, r.status, r.body)
			assert.Contains(t, r.body, `unsupported content encoding "compress"`)
			assert.Equal(t, 400, post(map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, []byte(doc)).status, "not gzip")
			if rt.API == runtimes.EventAPI {
				r = post(map[string]string{"Content-Type": "application/vnd.api+json"}, []byte(doc))
				require.Equal(t, 200, r.status, r.body)
				assert.Contains(t, r.body, `"kind":"bytes","data":"{\"a\":1}"`, "a Buffer, as Kyma's raw parser gives it")
			}
			// Each body in the charset its Content-Type names, as
			// body-parser decodes it: text in any charset Node reads,
			// JSON in a UTF, a form in UTF-8 or ISO-8859-1; a byte-order
			// mark dropped; another charset 415.
			textKind := `"kind":"text","data":`
			if rt.API == runtimes.RequestAPI {
				textKind = `"kind":"string","body":`
			}
			charsets := []struct {
				contentType string
				body        []byte
				want        string
			}{
				{"text/plain; charset=ISO-8859-1", []byte("caf\xe9 \x80"), textKind + "\"café \u0080\""},
				{`text/plain; charset="utf-16le"`, []byte("h\x00\xe9\x00"), textKind + `"hé"`},
				{"text/plain; charset=shift_jis", []byte("\x82\xa0"), textKind + `"あ"`},
				{"text/plain", []byte("\xef\xbb\xbfhi"), textKind + `"hi"`},
				{"application/json", []byte("\xef\xbb\xbf" + doc), jsonKind},
				{"application/json; charset=utf-16le", []byte("{\x00}\x00"), strings.Replace(jsonKind, `{"a":1}`, `{}`, 1)},
			}
			for _, c := range charsets {
				r := post(map[string]string{"Content-Type": c.contentType}, c.body)
				require.Equal(t, 200, r.status, "%s: %s", c.contentType, r.body)
				assert.Contains(t, r.body, c.want, c.contentType)
			}
			form := post(map[string]string{"Content-Type": "application/x-www-form-urlencoded; charset=iso-8859-1"}, []byte("name=J%FCrgen+M\xfcller"))
			require.Equal(t, 200, form.status, form.body)
			assert.Contains(t, form.body, `"name":"Jürgen Müller"`)
			for ct, want := range map[string]string{
				"text/plain; charset=bogus":                            `unsupported charset "BOGUS"`,
				"application/json; charset=latin1":                     `unsupported charset "LATIN1"`,
				"application/x-www-form-urlencoded; charset=shift_jis": `unsupported charset "SHIFT_JIS"`,
			} {
				r := post(map[string]string{"Content-Type": ct}, []byte(doc))
				assert.Equal(t, 415, r.status, "%s: %s", ct, r.body)
				assert.Contains(t, r.body, want, ct)
			}
			r = post(map[string]string{"Content-Type": "application/json"}, []byte(doc))
			require.Equal(t, 200, r.status, "the host keeps serving: %s", r.body)
			assert.Contains(t, r.body, jsonKind)
		})
	}
}
