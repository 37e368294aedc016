package dev_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/local/dev"
)

// syncBuffer is a bytes.Buffer safe for the platform's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// copyDir copies the example project, so its .kfn state stays in the test.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if d.Name() == ".kfn" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	}))
}

func status(t *testing.T, addr string) dev.Status {
	t.Helper()
	st, err := readStatus(addr)
	require.NoError(t, err)
	return st
}

// readStatus is status for conditions, which run in Eventually's goroutine
// and must not stop the test: it returns the error.
func readStatus(addr string) (dev.Status, error) {
	var st dev.Status
	resp, err := http.Get("http://" + addr + dev.AdminPrefix + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func function(st dev.Status, name string) dev.FunctionStatus {
	for _, f := range st.Functions {
		if f.Name == name {
			return f
		}
	}
	return dev.FunctionStatus{}
}

func publish(t *testing.T, addr, typ, id, data string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/publish", strings.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Type", typ)
	req.Header.Set("Ce-Source", "shop")
	req.Header.Set("Ce-Id", id)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode, string(body))
}

func TestShopChainScalesFromZeroAndBack(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, filepath.Join("..", "..", "examples", "shop"), dir)
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	started := make(chan *dev.Platform, 1)
	done := make(chan error, 1)
	go func() {
		done <- dev.Run(ctx, dev.Config{
			Dir: dir, Addr: "127.0.0.1:0", Output: out,
			Cooldown: time.Second, PollingInterval: 100 * time.Millisecond, ScaleDownStabilization: 200 * time.Millisecond,
			DrainGrace: 5 * time.Second,
		}, func(p *dev.Platform) { started <- p })
	}()
	var p *dev.Platform
	select {
	case p = <-started:
	case err := <-done:
		t.Fatalf("kfn dev stopped: %v\n%s", err, out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("kfn dev did not start\n%s", out.String())
	}
	addr := p.Addr()
	begin := time.Now()
	phase := func(name string) { t.Logf("%6.2fs %s", time.Since(begin).Seconds(), name) }

	st := status(t, addr)
	require.True(t, st.Ready)
	require.Empty(t, st.Errors, out.String())
	assert.Equal(t, 1, function(st, "orders").Ready)
	assert.Equal(t, 1, function(st, "notify").Ready)
	assert.Equal(t, 0, function(st, "fulfil").Replicas, "fulfil starts at zero")

	const n = 50
	phase("started")
	for i := 0; i < n; i++ {
		publish(t, addr, "order.created.v1", fmt.Sprintf("order-%d", i), fmt.Sprintf(`{"id":"%d","item":"book"}`, i))
	}
	phase("published")
	assert.Eventually(t, func() bool {
		return strings.Count(out.String(), "| notified order ") >= n
	}, 60*time.Second, 50*time.Millisecond, "every order reaches notify through fulfil")
	if t.Failed() {
		t.Fatalf("status: %+v\noutput:\n%s", status(t, addr), out.String())
	}
	for i := 0; i < n; i++ {
		assert.Contains(t, out.String(), fmt.Sprintf("| notified order %d via email\n", i))
	}

	phase("notified")
	// A function answers the delivery after its handler returns, so the
	// last acknowledgements may follow notify's output.
	require.Eventually(t, func() bool {
		st, err := readStatus(addr)
		if err != nil {
			return false
		}
		for _, s := range st.Subscriptions {
			if !s.Ready || s.Delivered < n || s.DeadLettered != 0 {
				return false
			}
		}
		return len(st.Subscriptions) == 2
	}, 30*time.Second, 50*time.Millisecond, "both subscriptions delivered every event, none dead-lettered: %+v", status(t, addr).Subscriptions)
	phase("delivered")
	// Once, as on the real node (e2e/cluster TestScaleToZeroAndBack): the
	// events that woke fulfil from zero each reached it once (its
	// replies carry fixed ids, so the publisher's deduplication would
	// hide a second delivery from notify), and notify once.
	for i := 0; i < n; i++ {
		assert.Equal(t, 1, strings.Count(out.String(), fmt.Sprintf("fulfilling order %d (book)\n", i)), "order %d fulfilled once", i)
		assert.Equal(t, 1, strings.Count(out.String(), fmt.Sprintf("| notified order %d via email\n", i)), "order %d notified once", i)
	}
	require.Eventually(t, func() bool { st, err := readStatus(addr); return err == nil && function(st, "fulfil").Replicas == 0 },
		60*time.Second, 50*time.Millisecond, "fulfil goes back to zero after the cooldown")

	phase("fulfil at zero")

	// A request for a function at zero starts it and waits for it.
	resp, err := http.Post("http://"+addr+"/default/fulfil", "application/json", strings.NewReader(`{"id":"direct","item":"pen"}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get("X-Kfn-Cold-Start"), "the request met a cold start")
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "| notified order direct via email") }, 30*time.Second, 20*time.Millisecond)
	resp, err = http.Get("http://" + addr + "/default/nope/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	phase("cold start through the gateway")
	// Woken by a request, fulfil goes back to zero after its cooldown too:
	// the gateway's count of its requests went back to none.
	require.Eventually(t, func() bool { st, err := readStatus(addr); return err == nil && function(st, "fulfil").Replicas == 0 },
		60*time.Second, 50*time.Millisecond, "fulfil, woken by a request, goes back to zero after the cooldown")
	phase("fulfil at zero again")
	// kfn logs reads the kept lines of one function.
	resp, err = http.Get("http://" + addr + dev.AdminPrefix + "/logs/default/fulfil")
	require.NoError(t, err)
	logs, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(logs), "fulfilling order 7 (book)")
	// kfn trace reads one event's path: its chain, found by id (and
	// source); an id kfn dev does not hold is 404, one longer than an
	// event's may be 400, and neither changes anything.
	for _, c := range []struct {
		path string
		code int
		has  string
	}{
		{"/events/order-7", http.StatusOK, `"id":"order-7"`},
		{"/events/order-7?source=shop", http.StatusOK, `"type":"order.fulfilled.v1"`},
		{"/events/order-7?source=elsewhere", http.StatusNotFound, `no event "order-7" of source "elsewhere" among the 1000 most recent events kfn dev keeps`},
		{"/events/never-published", http.StatusNotFound, `no event "never-published"`},
		{"/events/" + strings.Repeat("x", 1025), http.StatusBadRequest, "an event id is at most 1024 bytes"},
		{"/events/order-7?source=" + strings.Repeat("s", 1025), http.StatusBadRequest, "and a source 1024"},
	} {
		resp, err = http.Get("http://" + addr + dev.AdminPrefix + c.path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, c.code, resp.StatusCode, "%.80s: %s", c.path, body)
		assert.Contains(t, string(body), c.has, "%.80s", c.path)
	}

	var pids []int
	for _, f := range []string{"orders", "notify"} {
		pids = append(pids, processIDs(t, p, f)...)
	}
	require.NotEmpty(t, pids)
	cancel()
	select {
	case err := <-done:
		phase("stopped")
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("kfn dev did not stop")
	}
	for _, pid := range pids {
		assert.Error(t, syscall.Kill(pid, 0), "process %d outlived kfn dev", pid)
	}
}

func processIDs(t *testing.T, p *dev.Platform, name string) []int {
	t.Helper()
	return p.PIDs("default", name)
}
