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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/depcache"
)

// TestPublisherToken runs the publisher with -token-file: publishing needs
// the bearer token, probes do not, and a bad token file stops the start.
func TestPublisherToken(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("x"), 0o600))
	bad := eventbridge.DefaultProcess()
	bad.TokenFile = short
	bad.Subscriptions = []string{filepath.Join(dir, "none.yaml")}
	bad.AdminAuth = eventbridge.AdminAuthNone
	bad.MetricsAuth = eventbridge.MetricsAuthNone
	require.ErrorContains(t, eventbridge.Run(context.Background(), bad, slog.New(slog.NewTextHandler(io.Discard, nil))), "-token-file")

	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("a-long-enough-token\n"), 0o600))
	cfg := startPublisher(t, func(c *eventbridge.Process) { c.TokenFile = tokenFile })
	base := "http://" + cfg.Listen
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

	// Without Kubernetes the bridge cannot tell a pod's namespace: the
	// dependency cache is off, whatever the token, and says so.
	req, _ := http.NewRequest(http.MethodGet, base+depcache.PathPrefix+"nodejs24/"+strings.Repeat("ab", 32), nil)
	req.Header.Set("Authorization", "Bearer a-long-enough-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Contains(t, string(body), "the dependency cache is off")
}
