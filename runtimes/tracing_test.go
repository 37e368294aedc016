package runtimes_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
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
	if testing.Short() {
		t.Skip("needs the npm registry")
	}
	testenv.LookPath(t, "npm")
	rt := lookup(t, runtime)
	depsDir := nodeTracingSDK(t)

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

var (
	nodeSDKOnce sync.Once
	nodeSDKDir  string
	nodeSDKErr  error
)

// nodeTracingSDK installs, once per test binary, exactly the OpenTelemetry
// SDK set the runtime images ship (nodejs/otel/package.json) from the npm
// registry and returns the installed dependency directory.
func nodeTracingSDK(t *testing.T) string {
	t.Helper()
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
