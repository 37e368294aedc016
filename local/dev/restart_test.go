package dev

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer collects the platform's output; safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

const restartProject = `apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata: {name: echo, namespace: default}
spec:
  runtime: python312
  source:
    inline:
      source: |
        def main(event, context):
            print("got %s" % event["ce-id"], flush=True)
            return ""
---
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata: {name: echo, namespace: default}
spec: {sink: "http://echo.default.svc.cluster.local", source: shop, types: [order.created.v1]}
`

// TestRestartsWhenNATSClosesTheConnection makes the embedded NATS server
// close kfn dev's connection the way it does after a protocol error (a
// subject longer than its control line, published on it): nats.go gives
// the connection up for good. kfn dev starts again by itself, on the same
// address, and events published after it are delivered, as are those
// published before.
func TestRestartsWhenNATSClosesTheConnection(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "echo.yaml"), []byte(restartProject), 0o644))
	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan *Platform, 4)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Dir: dir, Addr: "127.0.0.1:0", Output: out, DrainGrace: 5 * time.Second}, func(p *Platform) { started <- p })
	}()
	next := func() *Platform {
		select {
		case p := <-started:
			return p
		case err := <-done:
			t.Fatalf("kfn dev stopped: %v\n%s", err, out.String())
		case <-time.After(60 * time.Second):
			t.Fatalf("kfn dev did not start within 60s\n%s", out.String())
		}
		return nil
	}
	publish := func(addr, id string) {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/publish", strings.NewReader(`{}`))
		require.NoError(t, err)
		for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": id, "Ce-Source": "shop", "Ce-Type": "order.created.v1", "Content-Type": "application/json"} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode, string(b))
	}
	first := next()
	publish(first.Addr(), "before")
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "got before") }, 60*time.Second, 20*time.Millisecond, out.String())

	require.NoError(t, first.nc.Publish(strings.Repeat("a", 5000), nil)) // the server answers -ERR and closes
	second := next()
	assert.Equal(t, first.Addr(), second.Addr(), "started again where it was")
	assert.Contains(t, out.String(), "starting kfn dev again: the NATS connection closed for good")
	publish(second.Addr(), "after")
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "got after") }, 60*time.Second, 20*time.Millisecond, out.String())

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("kfn dev did not stop")
	}
}
