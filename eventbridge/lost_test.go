package eventbridge_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/internal/natsconn"
	"github.com/kfn-dev/kfn/test/natsfault"
	"github.com/kfn-dev/kfn/test/natstest"
	"github.com/kfn-dev/kfn/test/testport"
)

// TestRunEndsWhenNATSClosesTheConnection runs the event bridge through a
// proxy that closes its connection as NATS does after a protocol error
// (-ERR, then the close): nats.go gives it up for good, and the bridge
// ends with the reason, for its supervisor to start it again, rather than
// answering every publish 503 forever with /healthz 200. A connection cut
// without a word before that comes back, and publishing goes on.
func TestRunEndsWhenNATSClosesTheConnection(t *testing.T) {
	ns := natstest.Start(t)
	proxy := natsfault.Start(t, ns.URL())
	manifest := filepath.Join(t.TempDir(), "subscriptions.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata: {name: orders, namespace: default}
spec: {sink: "http://orders.default.svc.cluster.local", source: shop, types: [order.created.v1]}
`), 0o600))
	cfg := eventbridge.DefaultProcess()
	cfg.NATSURL = proxy.URL()
	cfg.Subscriptions = []string{manifest}
	cfg.Listen, cfg.AdminListen, cfg.MetricsListen = testport.Addr(t), "", ""
	done := make(chan error, 1)
	go func() {
		done <- eventbridge.Run(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	publish := func(id string) int { return publishStatus(t, cfg.Listen, id) }
	require.Eventually(t, func() bool { return publish("1") == http.StatusNoContent }, 20*time.Second, 20*time.Millisecond, "the bridge publishes")

	require.Positive(t, proxy.Cut())
	require.Eventually(t, func() bool { return publish("2") == http.StatusNoContent }, 20*time.Second, 20*time.Millisecond, "after a cut, it publishes again")
	assert.Empty(t, done)

	require.Positive(t, proxy.Refuse("Maximum Control Line Exceeded"))
	select {
	case err := <-done:
		require.ErrorIs(t, err, natsconn.ErrLost)
		assert.ErrorContains(t, err, "Maximum Control Line Exceeded")
	case <-time.After(20 * time.Second):
		t.Fatal("the event bridge went on without a NATS connection that cannot come back")
	}
}

// publishStatus publishes event id in binary mode to the event bridge
// listening at addr and returns the answer's status, 0 when none came.
func publishStatus(t *testing.T, addr, id string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/publish", strings.NewReader(`{}`))
	require.NoError(t, err)
	for k, v := range binaryHeaders(id) {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func binaryHeaders(id string) map[string]string {
	return map[string]string{"Ce-Specversion": "1.0", "Ce-Id": id, "Ce-Source": "shop", "Ce-Type": "order.created.v1", "Content-Type": "application/json"}
}

// TestLostStreamIsReported runs the event bridge on a real NATS, then
// stops NATS, deletes its store directory and starts it again, as a NATS
// of the small profile that lost its volume: the event bridge makes the
// streams anew (publishing works again) and says the events are gone in
// kfn_eventbridge_streams_lost_total, rather than going on as if nothing
// had happened.
func TestLostStreamIsReported(t *testing.T) {
	ns := natstest.Start(t)
	manifest := filepath.Join(t.TempDir(), "subscriptions.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata: {name: orders, namespace: default}
spec: {sink: "http://orders.default.svc.cluster.local", source: shop, types: [order.created.v1]}
`), 0o600))
	cfg := eventbridge.DefaultProcess()
	cfg.NATSURL = ns.URL()
	cfg.Subscriptions = []string{manifest}
	cfg.Listen, cfg.MetricsListen, cfg.AdminListen = testport.Addr(t), testport.Addr(t), ""
	cfg.MetricsAuth = eventbridge.MetricsAuthNone // -subscriptions: no Kubernetes to ask
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eventbridge.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() { cancel(); <-done })
	publish := func(id string) int { return publishStatus(t, cfg.Listen, id) }
	lost := func() string {
		resp, err := http.Get("http://" + cfg.MetricsListen + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, `kfn_eventbridge_streams_lost_total{reason="missing",stream="kfn-events"}`) {
				return strings.Fields(line)[1]
			}
		}
		return ""
	}
	require.Eventually(t, func() bool { return publish("1") == http.StatusNoContent }, 20*time.Second, 20*time.Millisecond, "the bridge publishes")
	require.Equal(t, http.StatusNoContent, publish("2"))
	require.Eventually(t, func() bool { return lost() == "0" }, 20*time.Second, 20*time.Millisecond, "no loss yet, and the series is there")

	ns.Shutdown()
	require.NoError(t, os.RemoveAll(ns.StoreDir()))
	ns.Restart()

	require.Eventually(t, func() bool { return lost() == "1" }, 20*time.Second, 20*time.Millisecond, "the loss is reported")
	require.Eventually(t, func() bool { return publish("3") == http.StatusNoContent }, 20*time.Second, 20*time.Millisecond, "the streams are made anew")
	assert.Equal(t, "1", lost(), "once")
}
