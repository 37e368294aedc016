package deadletter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// buryData stores a dead letter of ns/name with the given data, as the
// dispatcher does, and returns the store's error.
func (e *env) buryData(ns, name string, seq uint64, data []byte) error {
	h := nats.Header{"ce-specversion": {"1.0"}, "ce-id": {strconv.FormatUint(seq, 10)}, "ce-source": {"shop"}, "ce-type": {"order.created.v1"}}
	f := deadletter.Failure{Namespace: ns, Subscription: name, Status: 500, Error: "sink answered 500", Attempts: 3,
		Subject: "kyma.shop.order.created.v1", Sequence: seq, At: time.Now()}
	_, err := eventstore.New(e.js, e.streams.DeadLetterStream).Put(context.Background(), eventstore.Restore(deadletter.NewMsg(h, data, f), deadletter.MsgID(f)))
	return err
}

func newBoundedEnv(t *testing.T, perNamespace, maxBytes int64) *env {
	t.Helper()
	js := natstest.Start(t).JetStream()
	sc := stream.DefaultConfig()
	sc.Storage = stream.StorageMemory
	sc.DeadLetterMaxPerNamespace, sc.DeadLetterMaxBytes = perNamespace, maxBytes
	require.NoError(t, jsstream.Ensure(context.Background(), js, sc))
	a, err := deadletter.NewAdmin(js, sc)
	require.NoError(t, err)
	return &env{js: js, streams: sc, admin: a}
}

// TestOneNamespaceCannotEvictAnothersDeadLetters: a namespace that fails a
// lot keeps its newest dead letters up to the per-namespace bound, and the
// other namespace's stay; a stream full in bytes refuses new letters
// instead of dropping anyone's (the Writer then chooses whose oldest
// makes room: TestAFullDeadLetterStreamMakesRoomWithTheLargestHoldersOldest).
func TestOneNamespaceCannotEvictAnothersDeadLetters(t *testing.T) {
	e := newBoundedEnv(t, 5, 64<<10)
	ctx := context.Background()
	for i := range 3 {
		require.NoError(t, e.buryData("victim", "orders", uint64(i+1), []byte("v")))
	}
	for i := range 40 {
		require.NoError(t, e.buryData("attacker", "spam", uint64(100+i), []byte("a")))
	}
	attacker, err := e.admin.List(ctx, deadletter.Filter{Namespace: "attacker"})
	require.NoError(t, err)
	require.Len(t, attacker, 5, "the per-namespace bound")
	assert.Equal(t, "135", attacker[0].ID, "its newest are kept")
	victim, err := e.admin.List(ctx, deadletter.Filter{Namespace: "victim"})
	require.NoError(t, err)
	assert.Len(t, victim, 3, "another namespace's letters stay")

	big := make([]byte, 16<<10)
	var refused error
	for i := range 20 { // 320 KiB into a stream of 64 KiB, over several namespaces
		if err := e.buryData(fmt.Sprintf("filler-%d", i), "s", uint64(1000+i), big); err != nil {
			refused = err
			break
		}
	}
	require.ErrorIs(t, refused, eventstore.ErrStorageFull, "a full stream refuses new letters")
	victim, err = e.admin.List(ctx, deadletter.Filter{Namespace: "victim"})
	require.NoError(t, err)
	assert.Len(t, victim, 3, "and drops no one's")
}

// TestListingIsPagedAndStreamed lists 140 dead letters of 900 KiB over
// HTTP: a page is at most its limit, the trailer Kfn-Next-After leads to
// the next, and the admin holds a few letters at a time, not the page:
// the heap grows by far less than the 123 MiB listed.
func TestListingIsPagedAndStreamed(t *testing.T) {
	e := newBoundedEnv(t, 1000, 1<<30)
	data := []byte(strings.Repeat("x", 900<<10)) // within NATS's default 1 MiB payload, headers included
	for i := range 140 {
		require.NoError(t, e.buryData("default", "s", uint64(i+1), data))
	}
	srv := newServer(t, e.admin)

	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
		}
	}()
	seen, pages := 0, 0
	after := ""
	for {
		resp, err := http.Get(srv + "/deadletters?limit=50&after=" + after)
		require.NoError(t, err)
		dec := json.NewDecoder(resp.Body)
		_, err = dec.Token() // [
		require.NoError(t, err)
		n := 0
		for dec.More() {
			var l deadletter.Letter
			require.NoError(t, dec.Decode(&l))
			n++
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.LessOrEqual(t, n, 50)
		seen += n
		pages++
		after = resp.Trailer.Get(deadletter.HeaderNextAfter)
		if after == "" {
			break
		}
	}
	close(stop)
	<-sampled
	assert.Equal(t, 140, seen)
	assert.Equal(t, 3, pages)
	grew := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("heap grew by %d MiB at most while 123 MiB of dead letters were listed", grew>>20)
	assert.Less(t, grew, int64(96<<20), "letters are streamed, not held a page at a time (held, a page of 50 grows it by about 190 MiB; streamed, about 45, most of it the test's own decoding and the in-process NATS server)")
}

func newServer(t *testing.T, a *deadletter.Admin) string {
	t.Helper()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}
