package runtimes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/deps"
	"github.com/kfn-dev/kfn/test/testenv"
)

// collector is a test OTLP/HTTP trace receiver that keeps the request bodies.
type collector struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.bodies = append(c.bodies, string(b))
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) all() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.bodies, "\n")
}

// TestNodeTracingExportsSpans installs the OpenTelemetry SDK the runtime
// images ship (nodejs/otel/package.json) from the npm registry and checks that, with
// TRACE_COLLECTOR_ENDPOINT set, a call is exported as a span in the
// caller's trace, event.tracer spans join it, and emitCloudEvent passes a
// child traceparent of the same trace on.
func TestNodeTracingExportsSpans(t *testing.T) {
	t.Parallel()
	testNodeTracing(t, "nodejs22", "contract", "/tracer")
}

// TestNodeJS26TracingExportsSpans is TestNodeTracingExportsSpans for
// nodejs26: the tracer of sdk.getTracer() joins the call's trace, and the
// sdk's emitCloudEvent passes a child traceparent on.
func TestNodeJS26TracingExportsSpans(t *testing.T) {
	t.Parallel()
	testNodeTracing(t, "nodejs26", "kyma", "/span")
}

// testNodeTracing installs the OpenTelemetry SDK and checks the spans of
// runtime's fixture: GET spanPath makes a span "work" with the function's
// tracer, GET /emit emits an event.
func testNodeTracing(t *testing.T, runtime, fixtureName, spanPath string) {
	depsDir := nodeTracingSDK(t)
	rt := lookup(t, runtime)

	col := newCollector(t)
	pub := newPublisher(t)
	h := startHost(t, rt, fixture(t, rt, fixtureName), hostOptions{cfg: runtimes.Config{
		FunctionName:           "traced",
		DepsDir:                depsDir,
		PublisherAddress:       pub.URL,
		TraceCollectorEndpoint: col.URL + "/v1/traces",
	}})
	require.Eventually(t, func() bool {
		return strings.Contains(h.out.String(), "kfn: tracing: exporting spans")
	}, 20*time.Second, 10*time.Millisecond, "tracing did not start:\n%s", h.out)

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const parent = "00f067aa0ba902b7"
	hdr := map[string]string{"Traceparent": "00-" + traceID + "-" + parent + "-01"}
	require.Equal(t, 200, h.mustDo("GET", spanPath, hdr, "").status)
	r := h.mustDo("GET", "/emit", hdr, "")
	require.Equal(t, 200, r.status, r.body)

	got := pub.received()
	require.Len(t, got, 1)
	tp := strings.Split(got[0].header.Get("Traceparent"), "-")
	require.Len(t, tp, 4, got[0].header.Get("Traceparent"))
	assert.Equal(t, traceID, tp[1], "the emitted event stays in the caller's trace")
	assert.NotEqual(t, parent, tp[2], "with the SDK the emitted event's parent is the function's span")

	require.Eventually(t, func() bool {
		all := col.all()
		return strings.Contains(all, traceID) && strings.Contains(all, `"work"`) && strings.Contains(all, "GET /emit")
	}, 20*time.Second, 20*time.Millisecond, "spans not exported; collector got:\n%s\nhost:\n%s", col.all(), h.out)
	assert.Contains(t, col.all(), `"traced"`, "service.name is the function name")
}

// TestNodeHandlersRequestsCarryTheTrace is Kyma's tracing test
// (tests/serverless/internal/testsuite/tracing.go with its
// BasicTracingNodeFunction and the check of
// tests/serverless/internal/assertion/check.go) on kfn's host: without
// TRACE_COLLECTOR_ENDPOINT, a handler's own HTTP request carries the call's
// trace as W3C traceparent and B3 x-b3-traceid, x-b3-spanid, x-b3-sampled
// of one span, a new trace when the call has none (Kyma's test sends only
// X-B3-Sampled: 1), the caller's when it has one (W3C or B3); and the
// handler's own @opentelemetry/api sees the call's span.
func TestNodeHandlersRequestsCarryTheTrace(t *testing.T) {
	t.Parallel()
	depsDir := nodeTracingSDK(t)
	for _, name := range []string{"nodejs22", "nodejs24"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rt := lookup(t, name)
			target, sent := headerSink(t)
			h := startHost(t, rt, fixture(t, rt, "kyma-tracing"), hostOptions{
				cfg: runtimes.Config{FunctionName: "traced", DepsDir: depsDir},
				env: map[string]string{"TARGET_URL": target},
			})
			// call returns what the handler's request carried, and the
			// trace id the handler's API saw.
			call := func(header map[string]string) (http.Header, string) {
				t.Helper()
				r := h.mustDo("GET", "/", header, "")
				require.Equal(t, 200, r.status, "%s\n%s", r.body, h.out)
				var body struct{ Active string }
				require.NoError(t, json.Unmarshal([]byte(r.body), &body), r.body)
				return sent(), body.Active
			}
			w3c := func(t *testing.T, hdr http.Header) (traceID, spanID string) {
				t.Helper()
				tp := strings.Split(hdr.Get("Traceparent"), "-")
				require.Len(t, tp, 4, "traceparent %q", hdr.Get("Traceparent"))
				assert.Equal(t, "01", tp[3], "sampled")
				assert.Equal(t, tp[1], hdr.Get("X-B3-Traceid"), "B3 names the same trace")
				assert.Equal(t, tp[2], hdr.Get("X-B3-Spanid"), "and the same span")
				assert.Equal(t, "1", hdr.Get("X-B3-Sampled"))
				return tp[1], tp[2]
			}

			hdr, active := call(map[string]string{"X-B3-Sampled": "1"})
			traceID, _ := w3c(t, hdr)
			assert.Regexp(t, "^[0-9a-f]{32}$", traceID)
			assert.NotEqual(t, strings.Repeat("0", 32), traceID, "a trace of its own")
			assert.Equal(t, traceID, active, "the handler's API sees the call's span")

			const caller, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			hdr, active = call(map[string]string{"Traceparent": "00-" + caller + "-" + parent + "-01"})
			traceID, spanID := w3c(t, hdr)
			assert.Equal(t, caller, traceID, "the caller's trace goes on")
			assert.NotEqual(t, parent, spanID, "from a span of the call's")
			assert.Equal(t, caller, active)

			const b3Trace = "80f198ee56343ba864fe8b2a57d3eff7"
			hdr, _ = call(map[string]string{"X-B3-Traceid": b3Trace, "X-B3-Spanid": "e457b5a2e4d86bd1", "X-B3-Sampled": "1"})
			traceID, _ = w3c(t, hdr)
			assert.Equal(t, b3Trace, traceID, "a B3 caller's trace goes on")
			assert.NotContains(t, h.out.String(), "exporting spans", "no endpoint: nothing is exported")
		})
	}
}

// TestStandbyNodeHostTracesTheFunctionItIsGiven: a standby host, which
// loads the SDK before it is given a Function (found here through
// NODE_PATH, in an image next to the host), traces the Function it is
// given as a host started for it does: the handler's requests carry the
// caller's trace.
func TestStandbyNodeHostTracesTheFunctionItIsGiven(t *testing.T) {
	t.Parallel()
	depsDir := nodeTracingSDK(t)
	rt := lookup(t, "nodejs22")
	target, sent := headerSink(t)
	const token = "a-standby-token-only-the-pool-knows"
	h := startHost(t, rt, t.TempDir(), hostOptions{noWait: true, env: map[string]string{
		runtimes.EnvStandbyTokenSHA256: runtimes.StandbyTokenHash(token),
		"NODE_PATH":                    filepath.Join(depsDir, "node_modules"),
	}})
	h.waitServing(15 * time.Second)
	source, err := os.ReadFile(filepath.Join(fixture(t, rt, "kyma-tracing"), "handler.js"))
	require.NoError(t, err)
	spec, err := json.Marshal(runtimes.Specialization{
		Env:   map[string]string{runtimes.EnvFunctionName: "traced", runtimes.EnvNamespace: "shop", "TARGET_URL": target},
		Files: map[string]string{"handler.js": string(source)},
	})
	require.NoError(t, err)
	r := h.mustDo("POST", runtimes.SpecializePath, map[string]string{"Authorization": "Bearer " + token}, string(spec))
	require.Equal(t, http.StatusOK, r.status, "%s\n%s", r.body, h.out)

	const caller = "4bf92f3577b34da6a3ce929d0e0e4736"
	r = h.mustDo("GET", "/", map[string]string{"Traceparent": "00-" + caller + "-00f067aa0ba902b7-01"}, "")
	require.Equal(t, 200, r.status, "%s\n%s", r.body, h.out)
	assert.JSONEq(t, `{"active":"`+caller+`"}`, r.body, "the handler's API sees the call's span")
	hdr := sent()
	assert.Contains(t, hdr.Get("Traceparent"), "00-"+caller+"-")
	assert.Equal(t, caller, hdr.Get("X-B3-Traceid"))
}

// headerSink is a server where a traced handler sends its own request:
// sent returns the headers of the next request it got.
func headerSink(t *testing.T) (url string, sent func() http.Header) {
	got := make(chan http.Header, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	t.Cleanup(srv.Close)
	return srv.URL, func() http.Header {
		t.Helper()
		select {
		case hdr := <-got:
			return hdr
		case <-time.After(10 * time.Second):
			t.Fatal("the handler's request did not arrive")
			return nil
		}
	}
}

var (
	nodeSDKOnce sync.Once
	nodeSDKDir  string
	nodeSDKErr  error
)

// nodeTracingSDK installs, once per test binary, exactly the OpenTelemetry
// SDK set the runtime images ship (nodejs/otel/package.json) from the npm
// registry and returns the installed dependency directory; it skips the
// test with -short, and without npm (fails under CI=true).
func nodeTracingSDK(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the npm registry")
	}
	testenv.LookPath(t, "npm")
	nodeSDKOnce.Do(func() {
		var inst *deps.Installer
		if inst, nodeSDKErr = deps.New(filepath.Join(os.TempDir(), "kfn-runtimes-test-otel")); nodeSDKErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var pkg []byte
		if pkg, nodeSDKErr = os.ReadFile(filepath.Join("nodejs", "otel", "package.json")); nodeSDKErr != nil {
			return
		}
		nodeSDKDir, nodeSDKErr = inst.Ensure(ctx, lookup(t, "nodejs22"), string(pkg), deps.Registry{})
	})
	require.NoError(t, nodeSDKErr)
	return nodeSDKDir
}

// TestPythonHandlersRequestsCarryTheTrace is Kyma's tracing test (as
// TestNodeHandlersRequestsCarryTheTrace) for the Python runtimes, whose
// images instrument `requests` (opentelemetry-instrumentation-requests,
// OTEL_PROPAGATORS=tracecontext,baggage,b3multi): without
// TRACE_COLLECTOR_ENDPOINT, a handler's request made with requests carries
// the call's trace as W3C traceparent and B3 x-b3-traceid, x-b3-spanid,
// x-b3-sampled of one span of its own: a new trace when the call has none,
// the caller's when it has one (W3C, B3 headers or B3's single header),
// sampled as the caller said; a header the handler sets itself stays.
func TestPythonHandlersRequestsCarryTheTrace(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"python312", "python314"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rt := lookup(t, name)
			target, sent := headerSink(t)
			h := startHost(t, rt, fixture(t, rt, "kyma-tracing"), hostOptions{
				cfg:         runtimes.Config{FunctionName: "traced"},
				env:         map[string]string{"TARGET_URL": target},
				interpreter: requestsPython(t, rt),
			})
			call := func(header map[string]string) http.Header {
				t.Helper()
				r := h.mustDo("GET", "/", header, "")
				require.Equal(t, 200, r.status, "%s\n%s", r.body, h.out)
				return sent()
			}
			w3c := func(t *testing.T, hdr http.Header, sampled bool) (traceID, spanID string) {
				t.Helper()
				tp := strings.Split(hdr.Get("Traceparent"), "-")
				require.Len(t, tp, 4, "traceparent %q", hdr.Get("Traceparent"))
				flags, b3 := "01", "1"
				if !sampled {
					flags, b3 = "00", "0"
				}
				assert.Equal(t, "00", tp[0])
				assert.Regexp(t, "^[0-9a-f]{32}$", tp[1])
				assert.Regexp(t, "^[0-9a-f]{16}$", tp[2])
				assert.Equal(t, flags, tp[3], "sampled")
				assert.Equal(t, tp[1], hdr.Get("X-B3-Traceid"), "B3 names the same trace")
				assert.Equal(t, tp[2], hdr.Get("X-B3-Spanid"), "and the same span")
				assert.Equal(t, b3, hdr.Get("X-B3-Sampled"))
				return tp[1], tp[2]
			}

			first, firstSpan := w3c(t, call(map[string]string{"X-B3-Sampled": "1"}), true)
			assert.NotEqual(t, strings.Repeat("0", 32), first, "a trace of its own")
			second, secondSpan := w3c(t, call(nil), true)
			assert.NotEqual(t, first, second, "each call without a caller's trace has its own")
			assert.NotEqual(t, firstSpan, secondSpan)

			const caller, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			traceID, spanID := w3c(t, call(map[string]string{"Traceparent": "00-" + caller + "-" + parent + "-01"}), true)
			assert.Equal(t, caller, traceID, "the caller's trace goes on")
			assert.NotEqual(t, parent, spanID, "from a span of the call's")
			traceID, _ = w3c(t, call(map[string]string{"Traceparent": "00-" + caller + "-" + parent + "-00"}), false)
			assert.Equal(t, caller, traceID, "unsampled, as the caller said")

			const b3Trace = "80f198ee56343ba864fe8b2a57d3eff7"
			traceID, _ = w3c(t, call(map[string]string{"X-B3-Traceid": b3Trace, "X-B3-Spanid": "e457b5a2e4d86bd1", "X-B3-Sampled": "1"}), true)
			assert.Equal(t, b3Trace, traceID, "a B3 caller's trace goes on")
			traceID, _ = w3c(t, call(map[string]string{"X-B3-Traceid": "64fe8b2a57d3eff7", "X-B3-Spanid": "e457b5a2e4d86bd1", "X-B3-Sampled": "1"}), true)
			assert.Equal(t, "000000000000000064fe8b2a57d3eff7", traceID, "a 64-bit B3 trace id, widened")
			traceID, _ = w3c(t, call(map[string]string{"B3": b3Trace + "-e457b5a2e4d86bd1-1"}), true)
			assert.Equal(t, b3Trace, traceID, "B3's single header too")
			traceID, _ = w3c(t, call(map[string]string{"X-B3-Traceid": b3Trace, "X-B3-Spanid": "e457b5a2e4d86bd1", "X-B3-Sampled": "0"}), false)
			assert.Equal(t, b3Trace, traceID, "unsampled, as the B3 caller said")

			traceID, _ = w3c(t, call(map[string]string{"Traceparent": "00-" + strings.Repeat("0", 32) + "-" + parent + "-01"}), true)
			assert.NotEqual(t, strings.Repeat("0", 32), traceID, "an invalid traceparent is no caller's trace")
			traceID, _ = w3c(t, call(map[string]string{"Traceparent": "00-" + caller + "-zz" + parent[2:] + "-01"}), true)
			assert.NotEqual(t, caller, traceID)

			if rt.API != runtimes.RequestAPI {
				own := "00-" + caller + "-1111111111111111-01"
				hdr := call(map[string]string{"X-Own-Traceparent": own})
				assert.Equal(t, own, hdr.Get("Traceparent"), "the handler's own traceparent stays")
				assert.Empty(t, hdr.Get("X-B3-Traceid"), "and no other trace is added beside it")
			}
			assert.NotContains(t, h.out.String(), "exporting spans", "no endpoint: nothing is exported")
		})
	}
}

// requestsPython returns a python3 for rt's host that imports requests
// (and Flask, for python314): rt's interpreter, else Debian's
// /usr/bin/python3 (make test installs python3-requests there:
// hack/test-packages.sh). Without one the test skips, or fails under
// CI=true.
func requestsPython(t testing.TB, rt runtimes.Runtime) string {
	t.Helper()
	imports := "import requests"
	if rt.API == runtimes.RequestAPI {
		imports += ", flask"
	}
	var err error
	for _, p := range []string{interpreter(t, rt), "/usr/bin/python3"} {
		var out []byte
		if out, err = exec.Command(p, "-c", imports).CombinedOutput(); err == nil {
			return p
		}
		err = fmt.Errorf("%s: %w: %s", p, err, strings.TrimSpace(string(out)))
	}
	testenv.Missing(t, "requests for python3 (Debian: python3-requests)", err)
	return ""
}
