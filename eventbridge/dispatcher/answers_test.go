package dispatcher_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
)

// inNamespace puts a Subscription, and the Service of its sink, in
// namespace ns.
func inNamespace(ns string) func(*v1alpha2.Subscription) {
	return func(s *v1alpha2.Subscription) {
		s.Namespace = ns
		s.Spec.Sink = strings.Replace(s.Spec.Sink, ".default.svc", "."+ns+".svc", 1)
	}
}

// TestSinkHeadersAreBounded: a sink that answers with megabytes of headers
// (Go's own bound is 10 MiB, which at a thousand deliveries in flight is
// 10 GiB) gets each delivery failed with the reason, past
// dispatcher.MaxResponseHeaderBytes, and another tenant's deliveries go on.
func TestSinkHeadersAreBounded(t *testing.T) {
	b := newBridge(t)
	big := strings.Repeat("x", 1<<20)
	b.newSink("loud", func(_ int, _ *http.Request, w http.ResponseWriter) {
		for i := range 2 {
			w.Header().Set("X-Big-"+strconv.Itoa(i), big)
		}
	})
	victim := b.newSink("victim", nil)
	b.subscribe(sub("loud", "loud", inNamespace("tenant-a"), config("maxDeliver", "1", "maxInFlightMessages", "20")))
	b.subscribe(sub("victim", "victim", inNamespace("tenant-b")))
	const n = 20
	for i := range n {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return victim.count() == n }, wait, tick, "the other tenant's events are delivered")
	require.Eventually(t, func() bool { return len(b.deadLetters()) == n }, wait, tick, "each delivery to the loud sink failed")
	for _, dl := range b.deadLetters() {
		assert.Contains(t, dl.Headers().Get(deadletter.HeaderError), "response headers exceeded "+strconv.Itoa(dispatcher.MaxResponseHeaderBytes))
	}
}

// TestRepliesCountAgainstTheHeldBytes: a sink's CloudEvent replies are
// read into memory before they are stored, and count against its
// Subscription's held bytes as its events do. With 256 KiB per
// Subscription, eight deliveries in flight whose replies of 100 KiB stall
// after 99: two fit, and the other six attempts fail with the reason
// rather than hold 800 KiB; another tenant's deliveries go on, and the two
// replies are stored once they end.
func TestRepliesCountAgainstTheHeldBytes(t *testing.T) {
	b := newBridge(t, withConfig(func(c *dispatcher.Config) { c.MaxHeldBytesPerSubscription = 256 << 10 }))
	const inFlight, size = 8, 100 << 10
	arrived, all := 0, make(chan struct{})
	var mu sync.Mutex
	finish := make(chan struct{})
	b.newSink("replier", func(_ int, r *http.Request, w http.ResponseWriter) {
		mu.Lock()
		if arrived++; arrived == inFlight {
			close(all)
		}
		mu.Unlock()
		<-all
		w.Header().Set("Ce-Specversion", "1.0")
		w.Header().Set("Ce-Id", "reply-"+r.Header.Get("Ce-Id"))
		w.Header().Set("Ce-Source", "replier")
		w.Header().Set("Ce-Type", "order.replied.v1")
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(size))
		body := strings.Repeat("r", size)
		_, _ = io.WriteString(w, body[:size-1<<10])
		w.(http.Flusher).Flush()
		select {
		case <-finish:
			_, _ = io.WriteString(w, body[size-1<<10:])
		case <-r.Context().Done():
		}
	})
	final := b.newSink("final", nil)
	victim := b.newSink("victim", nil)
	b.subscribe(sub("replier", "replier", inNamespace("tenant-a"), config("maxDeliver", "1", "maxInFlightMessages", strconv.Itoa(inFlight))))
	b.subscribe(sub("final", "final", inNamespace("tenant-a"), func(s *v1alpha2.Subscription) {
		s.Spec.Source = "replier"
		s.Spec.Types = []string{"order.replied.v1"}
	}))
	b.subscribe(sub("victim", "victim", inNamespace("tenant-b")))
	for i := range inFlight {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return len(b.deadLetters()) == inFlight-2 }, wait, tick, "the replies that do not fit fail their attempts")
	for _, dl := range b.deadLetters() {
		assert.Contains(t, dl.Headers().Get(deadletter.HeaderError), "held bytes")
	}
	require.Eventually(t, func() bool { return victim.count() == inFlight }, wait, tick, "the other tenant's events are delivered")
	close(finish)
	require.Eventually(t, func() bool { return final.count() == 2 }, wait, tick, "the replies that fit are stored")
	require.Never(t, func() bool { return len(b.deadLetters()) > inFlight-2 }, 200*time.Millisecond, tick)
}
