package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/test/logtest"
	"github.com/kfn-dev/kfn/test/testport"
)

func TestRunRefusesBadFlagsBeforeDoingAnything(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
	}{
		"unknown flag":                {args: []string{"-nope"}, wantErr: "flag provided but not defined"},
		"unknown component":           {args: []string{"-components=publisher,scaler"}, wantErr: `unknown component "scaler"`},
		"gateway without k8s":         {args: []string{"-components=gateway", "-subscriptions=subs.yaml"}, wantErr: "the gateway needs Kubernetes"},
		"bad storage":                 {args: []string{"-storage=tape"}, wantErr: `storage must be "file" or "memory"`},
		"bad resolve":                 {args: []string{"-resolve=fn"}, wantErr: "want <service>.<namespace>=<base URL>"},
		"short ack wait":              {args: []string{"-ack-wait=10ms"}, wantErr: "-ack-wait must be at least 1s"},
		"no replay sweep":             {args: []string{"-replay-sweep=0s"}, wantErr: "-replay-sweep must be positive"},
		"bad log level":               {args: []string{"-log-level=loud"}, wantErr: "log-level"},
		"bad trace endpoint":          {args: []string{"-trace-endpoint=collector:4318"}, wantErr: "-trace-endpoint must be an http(s) URL"},
		"no delivery":                 {args: []string{"-default-max-deliver=0"}, wantErr: "maxDeliver must be between 1 and 100, not 0"},
		"in flight over its cap":      {args: []string{"-default-max-in-flight=1001"}, wantErr: "maxInFlightMessages must be between 1 and 1000, not 1001"},
		"backoff max < init":          {args: []string{"-default-backoff-initial=10s", "-default-backoff-max=1s"}, wantErr: "backoffMax (1s) must not be less than backoffInitial (10s)"},
		"unknown admin auth":          {args: []string{"-admin-auth=maybe"}, wantErr: `-admin-auth must be kubernetes or none, not "maybe"`},
		"admin auth without k8s":      {args: []string{"-subscriptions=subs.yaml"}, wantErr: "-admin-auth=kubernetes needs Kubernetes"},
		"unknown metrics auth":        {args: []string{"-metrics-auth=maybe"}, wantErr: `-metrics-auth must be kubernetes or none, not "maybe"`},
		"metrics auth without k8s":    {args: []string{"-subscriptions=subs.yaml", "-admin-listen="}, wantErr: "-metrics-auth=kubernetes needs Kubernetes"},
		"unknown gateway auth":        {args: []string{"-components=gateway", "-gateway-auth=maybe"}, wantErr: `-gateway-auth must be kubernetes or none, not "maybe"`},
		"unknown publisher senders":   {args: []string{"-publisher-senders=maybe"}, wantErr: `-publisher-senders must be kubernetes or none, not "maybe"`},
		"reservation without senders": {args: []string{"-reserve-source=bank=team-a", "-publisher-senders=none"}, wantErr: "-reserve-source needs senders"},
		"bad reservation":             {args: []string{"-reserve-source=bank"}, wantErr: "want SOURCE[:TYPEPREFIX]=NAMESPACE"},
		"burst below a batch":         {args: []string{"-publish-burst-per-namespace=10"}, wantErr: "-publish-burst-* 0 or at least 100"},
		"namespace over the stream":   {args: []string{"-stream-max-bytes=1048576", "-stream-max-msg-size=65536", "-namespace-max-backlog-bytes=2097152"}, wantErr: "-namespace-max-backlog-bytes (2097152) must not be above -stream-max-bytes (1048576)"},
		"consumers per namespace":     {args: []string{"-stream-max-consumers=10", "-max-consumers-per-namespace=11"}, wantErr: "-max-consumers-per-namespace (11) must not be above -stream-max-consumers (10)"},
		"dead letters per namespace":  {args: []string{"-dead-letter-max-bytes=4194304", "-dead-letter-max-bytes-per-namespace=8388608"}, wantErr: "dead-letter bytes per namespace (8388608) must not be above"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := component().Execute(context.Background(), tt.args, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
	require.NoError(t, component().Execute(context.Background(), []string{"-h"}, io.Discard), "help is no failure")
}

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := eventbridge.DefaultProcess()
	require.NoError(t, cfg.Validate())
}

// TestLogsAndMetrics runs the event bridge without Kubernetes (a
// Subscription from a file, a real embedded NATS) through one failed and
// one successful delivery, and checks that every line it logs is in kfn's
// layout, that the delivery lines name the event, the Subscription and
// the function, and that /metrics has the latency histograms and the
// backlog gauge.
func TestLogsAndMetrics(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	ns.Start()
	t.Cleanup(ns.Shutdown)
	require.True(t, ns.ReadyForConnections(10*time.Second))

	var calls atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer sink.Close()
	manifest := filepath.Join(t.TempDir(), "subscriptions.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata: {name: orders, namespace: default}
spec:
  sink: http://orders.default.svc.cluster.local
  source: shop
  types: [order.created.v1]
  config: {backoffInitial: 10ms, backoffMax: 10ms}
`), 0o600))
	listen, metrics := testport.Addr(t), testport.Addr(t)

	ctx, cancel := context.WithCancel(context.Background())
	var logs logtest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- component().Execute(ctx, []string{
			"-components=publisher,dispatcher", "-subscriptions=" + manifest, "-nats-url=" + ns.ClientURL(),
			"-resolve=orders.default=" + sink.URL, "-allow-loopback-sinks", "-storage=memory", "-listen=" + listen,
			"-admin-listen=", "-metrics-listen=" + metrics, "-metrics-auth=none", "-log-level=debug",
		}, &logs)
	}()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), `"server":"publisher"`) }, 30*time.Second, 10*time.Millisecond)
	req, err := http.NewRequest(http.MethodPost, "http://"+listen+"/publish", strings.NewReader(`{}`))
	require.NoError(t, err)
	for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "e-1", "Ce-Source": "shop", "Ce-Type": "order.created.v1", "Content-Type": "application/json"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Eventually(t, func() bool { return calls.Load() == 2 }, 10*time.Second, 10*time.Millisecond, "delivered on the second attempt")
	sub := `{namespace="default",subscription="orders"}`
	wants := []string{
		"kfn_eventbridge_backlog" + sub + " 0",
		`kfn_eventbridge_publish_duration_seconds_count{endpoint="publish"} 1`,
		"kfn_eventbridge_delivery_duration_seconds_count" + sub + " 2",
		"kfn_eventbridge_event_age_seconds_count" + sub + " 1",
		"kfn_eventbridge_backlog_budget" + sub + " 100000",
		"kfn_eventbridge_dispatcher_ready 1",
	}
	// The second attempt's figures are recorded once the dispatcher has
	// its answer, after the sink counted it, and a page read under load
	// showed the backlog at 0 with them still missing: the page is read
	// until it has them all.
	var page string
	assert.Eventually(t, func() bool {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		page = string(b)
		for _, want := range wants {
			if !strings.Contains(page, want) {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the backlog drains to 0, and the figures of both attempts are there")
	for _, want := range wants {
		assert.Contains(t, page, want)
	}
	cancel()
	require.NoError(t, <-done)

	lines := logtest.CheckLayout(t, logs.String(), "eventbridge", "publisher", "dispatcher")
	retried := false
	for _, l := range lines {
		if l.String("msg") != "delivery failed, will retry" {
			continue
		}
		retried = true
		assert.Equal(t, "dispatcher", l.String("component"))
		assert.Equal(t, "e-1", l.String("eventID"))
		assert.Equal(t, "default", l.String("namespace"))
		assert.Equal(t, "orders", l.String("subscription"))
		assert.Equal(t, "orders", l.String("function"))
	}
	assert.True(t, retried, "the failed attempt is logged at debug:\n%s", logs.String())
}
