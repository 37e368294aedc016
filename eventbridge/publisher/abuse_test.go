package publisher_test

import (
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/publisher"
)

// TestAbuseLeavesNothingBehind sends a storm of oversized and malformed
// requests to every publishing endpoint at once, over HTTP to a publisher
// on a real JetStream: each gets a 4xx that says why, and afterwards the
// goroutines and the live heap are back to where they were (an oversized
// body is never kept, a refused request holds nothing).
func TestAbuseLeavesNothingBehind(t *testing.T) {
	const limit = 1 << 20
	e := newEnv(t, publisher.Config{MaxRequestBytes: limit}, nil)
	client := &http.Client{Timeout: 10 * time.Second}
	ce := func(extra map[string]string) map[string]string {
		h := binary("1", "order.created.v1")
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	big := strings.Repeat("x", 2*limit)
	cases := map[string]struct {
		path   string
		header map[string]string
		body   string
		chunk  bool // no Content-Length: the limit must hold while reading
		want   int
	}{
		"binary oversized":             {"/publish", ce(nil), big, false, http.StatusRequestEntityTooLarge},
		"binary oversized, chunked":    {"/publish", ce(nil), big, true, http.StatusRequestEntityTooLarge},
		"structured oversized":         {"/publish", map[string]string{"Content-Type": "application/cloudevents+json"}, `{"specversion":"1.0","data":"` + big + `"}`, true, http.StatusRequestEntityTooLarge},
		"batch oversized":              {"/publish", map[string]string{"Content-Type": "application/cloudevents-batch+json"}, "[" + strings.Repeat(`{"specversion":"1.0","id":"1","source":"s","type":"a.b"},`, limit/50) + "{}]", true, http.StatusRequestEntityTooLarge},
		"legacy oversized":             {"/app/v1/events", map[string]string{"Content-Type": "application/json"}, `{"event-type":"a","data":"` + big + `"}`, true, http.StatusRequestEntityTooLarge},
		"binary without attributes":    {"/publish", map[string]string{"Content-Type": "application/json"}, `{}`, false, http.StatusBadRequest},
		"binary bad specversion":       {"/publish", ce(map[string]string{"Ce-Specversion": "9.9"}), `{}`, false, http.StatusBadRequest},
		"structured truncated":         {"/publish", map[string]string{"Content-Type": "application/cloudevents+json"}, `{"specversion":"1.0","id":`, false, http.StatusBadRequest},
		"structured nested deep":       {"/publish", map[string]string{"Content-Type": "application/cloudevents+json"}, strings.Repeat("[", 100000), false, http.StatusBadRequest},
		"batch of garbage":             {"/publish", map[string]string{"Content-Type": "application/cloudevents-batch+json"}, `[1, "x", null]`, false, http.StatusBadRequest},
		"legacy not json":              {"/app/v1/events", map[string]string{"Content-Type": "application/json"}, "\x00\xff not json", false, http.StatusBadRequest},
		"legacy without a type":        {"/app/v1/events", map[string]string{"Content-Type": "application/json"}, `{"event-type-version":"v1","data":{}}`, false, http.StatusBadRequest},
		"v2 type that cleans to empty": {"/app/v2/events", ce(map[string]string{"Ce-Type": "..."}), `{}`, false, http.StatusBadRequest},
	}
	send := func(name string) (int, string, error) {
		c := cases[name]
		var body io.Reader = strings.NewReader(c.body)
		if c.chunk {
			body = io.MultiReader(body) // hides the length
		}
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+c.path, body)
		if err != nil {
			return 0, "", err
		}
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b), err
	}
	for name, c := range cases { // each once on its own, for a clear failure
		code, msg, err := send(name)
		require.NoError(t, err, name)
		assert.Equal(t, c.want, code, "%s: %s", name, msg)
		assert.NotEmpty(t, strings.TrimSpace(msg), "%s: the error says why", name)
	}

	client.CloseIdleConnections()
	goroutines, heap := runtime.NumGoroutine(), liveHeap()
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	unexpected := map[string]int{}
	const storm = 400
	sem := make(chan struct{}, 32)
	for i := range storm {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			name := names[i%len(names)]
			code, _, err := send(name)
			if err != nil && cases[name].want == http.StatusRequestEntityTooLarge && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
				// Refused before its body was read, the connection closed
				// on a client still sending it (HTTP's own race, which a
				// loaded machine shows): refused all the same.
				return
			}
			if err != nil || code != cases[name].want {
				mu.Lock()
				unexpected[name+" "+strconv.Itoa(code)]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Empty(t, unexpected, "every request of the storm got its 4xx")
	code, _, _ := e.post(t, "/publish", binary("after", "order.created.v1"), `{"ok":true}`)
	assert.Equal(t, http.StatusNoContent, code, "an honest client is served after the storm")
	e.stored(t, 1)

	client.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= goroutines+2 }, 10*time.Second, 20*time.Millisecond,
		"goroutines back to the baseline (%d) after %d bad requests", goroutines, storm)
	var after uint64
	require.Eventually(t, func() bool { after = liveHeap(); return after <= heap+8<<20 }, 10*time.Second, 100*time.Millisecond,
		"the live heap is back within 8 MiB of the baseline (%d MiB)", heap>>20)
	t.Logf("%d bad requests (5 in 13 over 1 MiB): goroutines %d -> %d, live heap %d -> %d KiB",
		storm, goroutines, runtime.NumGoroutine(), heap>>10, after>>10)
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
