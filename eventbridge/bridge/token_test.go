package bridge_test

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

	"github.com/kfn-dev/kfn/eventbridge/bridge"
	"github.com/kfn-dev/kfn/eventbridge/internal/natstest"
)

// TestPublisherToken runs the publisher with -token-file: publishing needs
// the bearer token, probes do not, and a bad token file stops the start.
func TestPublisherToken(t *testing.T) {
	ns := natstest.Start(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "subscriptions.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata: {name: orders, namespace: default}
spec: {sink: "http://orders.default.svc.cluster.local", source: shop, types: [order.created.v1]}
`), 0o600))
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("a-long-enough-token\n"), 0o600))
	cfg := bridge.DefaultConfig()
	cfg.NATSURL = ns.URL()
	cfg.Components = []string{bridge.ComponentPublisher}
	cfg.Subscriptions = []string{manifest}
	cfg.TokenFile = tokenFile
	cfg.Listen, cfg.AdminListen, cfg.MetricsListen = freeAddr(t), "", ""
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("x"), 0o600))
	bad := cfg
	bad.TokenFile = short
	require.ErrorContains(t, bridge.Run(context.Background(), bad, logger), "-token-file")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bridge.Run(ctx, cfg, logger) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("the event bridge did not stop")
		}
	})
	base := "http://" + cfg.Listen
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 10*time.Millisecond, "probes need no token")
	publish := func(authorization string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/publish", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Id", "1")
		req.Header.Set("Ce-Source", "shop")
		req.Header.Set("Ce-Type", "order.created.v1")
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, publish(""))
	assert.Equal(t, http.StatusUnauthorized, publish("Bearer wrong-token-of-length"))
	assert.Equal(t, http.StatusNoContent, publish("Bearer a-long-enough-token"))
}
