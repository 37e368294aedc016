package dev_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/local/dev"
	"github.com/kfn-dev/kfn/local/webview"
	"github.com/kfn-dev/kfn/test/testenv"
)

// runDev runs kfn dev on dir until the test ends.
func runDev(t *testing.T, dir string, out *syncBuffer) *dev.Platform {
	t.Helper()
	return runDevConfig(t, dev.Config{Dir: dir, DrainGrace: 5 * time.Second}, out)
}

// runDevConfig runs kfn dev with cfg, on a port of its own and its
// output to out, until the test ends.
func runDevConfig(t *testing.T, cfg dev.Config, out *syncBuffer) *dev.Platform {
	t.Helper()
	cfg.Addr, cfg.Output = "127.0.0.1:0", out
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan *dev.Platform, 1)
	done := make(chan error, 1)
	go func() {
		done <- dev.Run(ctx, cfg, func(p *dev.Platform) { started <- p })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(60 * time.Second):
			t.Error("kfn dev did not stop")
		}
	})
	select {
	case p := <-started:
		return p
	case err := <-done:
		t.Fatalf("kfn dev stopped: %v\n%s", err, out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("kfn dev did not start\n%s", out.String())
	}
	return nil
}

// viewStates reads the web view's event stream of kfn dev at addr.
func viewStates(t *testing.T, addr string) <-chan webview.State {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+dev.ViewPath+"events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	states := make(chan webview.State, 1000)
	go func() {
		defer resp.Body.Close()
		defer close(states)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<22)
		for sc.Scan() {
			var st webview.State
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &st) == nil {
				states <- st
			}
		}
	}()
	return states
}

// await reads states until ok accepts one, for at most 60s.
func await(t *testing.T, states <-chan webview.State, what string, ok func(webview.State) bool) webview.State {
	t.Helper()
	timeout := time.After(60 * time.Second)
	var last webview.State
	for {
		select {
		case st, open := <-states:
			require.True(t, open, "the event stream ended")
			if ok(st) {
				return st
			}
			last = st
		case <-timeout:
			data, _ := json.MarshalIndent(last, "", "  ")
			t.Fatalf("no state with %s within 60s; last:\n%s", what, data)
		}
	}
}

// findEvent returns the event with id among chains and what followed them.
func findEvent(chains []eventpath.Chain, id string) *eventpath.Event {
	var find func(events []*eventpath.Event) *eventpath.Event
	find = func(events []*eventpath.Event) *eventpath.Event {
		for _, e := range events {
			if e.ID == id {
				return e
			}
			for _, d := range e.Deliveries {
				if x := find(d.Emitted); x != nil {
					return x
				}
			}
			if x := find(e.Replays); x != nil {
				return x
			}
		}
		return nil
	}
	for _, c := range chains {
		if e := find(c.Events); e != nil {
			return e
		}
	}
	return nil
}

// delivered returns e's delivery to subscription once it is delivered.
func delivered(e *eventpath.Event, subscription string) *eventpath.Delivery {
	if e == nil {
		return nil
	}
	for _, d := range e.Deliveries {
		if d.Subscription == subscription && d.Outcome == "delivered" {
			return d
		}
	}
	return nil
}

func TestWebViewFollowsTheShopChain(t *testing.T) {
	testenv.LookPath(t, "node")
	testenv.LookPath(t, "python3")
	dir := t.TempDir()
	copyDir(t, filepath.Join("..", "..", "examples", "shop"), dir)
	out := &syncBuffer{}
	p := runDev(t, dir, out)
	addr := p.Addr()

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{dev.AdminPrefix, dev.AdminPrefix + "/"} {
		resp, err := noRedirect.Get("http://" + addr + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusFound, resp.StatusCode, path)
		assert.Equal(t, dev.ViewPath, resp.Header.Get("Location"), "%s leads to the web view", path)
	}
	resp, err := http.Get("http://" + addr + dev.ViewPath)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(page), "<title>kfn dev</title>")

	states := viewStates(t, addr)
	st := await(t, states, "the shop's functions", func(st webview.State) bool { return len(st.Functions) == 3 && len(st.Subscriptions) == 2 })
	assert.Equal(t, addr, st.Addr)
	want := map[string]webview.FunctionState{"fulfil": webview.ScaledToZero, "notify": webview.Running, "orders": webview.Running}
	for _, f := range st.Functions {
		assert.Equal(t, want[f.Name], f.State, f.Name)
	}

	// An order through the gateway: orders emits order.created.v1, fulfil
	// (woken from zero) emits order.fulfilled.v1, notify takes it.
	resp, err = http.Post("http://"+addr+"/default/orders", "application/json", strings.NewReader(`{"id":"w1","item":"lamp"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	publish(t, addr, "order.created.v1", "w2", `{"id":"w2","item":"pen"}`)

	st = await(t, states, "both chains delivered to notify", func(st webview.State) bool {
		for _, id := range []string{"fulfilled-w1", "fulfilled-w2"} {
			if delivered(findEvent(st.Chains, id), "notify") == nil {
				return false
			}
		}
		return true
	})
	w2 := findEvent(st.Chains, "w2")
	require.NotNil(t, w2)
	assert.Equal(t, eventpath.Published, w2.Origin)
	d := delivered(w2, "fulfil")
	require.NotNil(t, d, "w2 went to fulfil")
	assert.Equal(t, "default/fulfil", d.Function)
	assert.Equal(t, 1, d.Attempts)
	require.Len(t, d.Emitted, 1, "fulfil emitted one event while handling it")
	assert.Equal(t, "fulfilled-w2", d.Emitted[0].ID)
	assert.Equal(t, eventpath.Emitted, d.Emitted[0].Origin)
	for _, c := range st.Chains {
		if findEvent([]eventpath.Chain{c}, "w2") != nil {
			assert.Len(t, c.TraceID, 32, "the chain is one trace")
			assert.Len(t, c.Events, 1, "w2 starts its chain alone")
		}
	}
	w1 := findEvent(st.Chains, "order-w1")
	require.NotNil(t, w1, "orders emitted order-w1")
	assert.Equal(t, eventpath.Emitted, w1.Origin)
	assert.Equal(t, &eventpath.Call{Function: "default/orders", Request: "POST /default/orders"}, w1.Call, "emitted for the gateway's request")
	st = await(t, states, "the delivery counts", func(st webview.State) bool {
		for _, s := range st.Subscriptions {
			if s.Delivered < 2 {
				return false
			}
		}
		return true
	})
	for _, s := range st.Subscriptions {
		assert.Zero(t, s.Failed, s.Name)
		assert.Zero(t, s.DeadLettered, s.Name)
	}
}
