package depcache_test

import (
	"bytes"
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/depcache"
)

// silentJetStream is a JetStream whose object stores' watches never say
// they delivered the bucket's history (their nil update is dropped), as
// the client library's watch leaves it unsaid when its first look at an
// empty bucket fails (an election under way) or the descriptions it saw
// expire before it starts: a fake of timing, which no real part does on
// demand.
type silentJetStream struct {
	jetstream.JetStream
	dropped atomic.Int32
}

func (s *silentJetStream) CreateOrUpdateObjectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	obs, err := s.JetStream.CreateOrUpdateObjectStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return silentStore{ObjectStore: obs, s: s}, nil
}

// silentStore is an object store of a silentJetStream.
type silentStore struct {
	jetstream.ObjectStore
	s *silentJetStream
}

func (o silentStore) Watch(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.ObjectWatcher, error) {
	w, err := o.ObjectStore.Watch(ctx, opts...)
	if err != nil {
		return nil, err
	}
	out := make(chan *jetstream.ObjectInfo, 32)
	go func() {
		defer close(out)
		for info := range w.Updates() {
			if info == nil {
				o.s.dropped.Add(1)
				continue
			}
			out <- info
		}
	}()
	return silentWatcher{ObjectWatcher: w, updates: out}, nil
}

// silentWatcher is a watch of a silentStore.
type silentWatcher struct {
	jetstream.ObjectWatcher
	updates chan *jetstream.ObjectInfo
}

func (w silentWatcher) Updates() <-chan *jetstream.ObjectInfo { return w.updates }

// testUnsaidHistory: the watch of an empty bucket never says it delivered
// the bucket's history; an upload is still stored, within a few seconds,
// rather than answered 503 after waiting for it (every upload, for as
// long as the watch lasted).
func testUnsaidHistory(t *testing.T, w *world) {
	js := &silentJetStream{JetStream: w.js}
	s := w.serveOn(t, js, w.bucket(0), depcache.DefaultConfig(), nil)
	done := make(chan int, 1)
	go func() {
		code, _ := s.do(http.MethodPut, "nodejs22/"+hash, w.tokens["team-a"], bytes.NewReader(gz(t, 1000)))
		done <- code
	}()
	select {
	case code := <-done:
		require.Equal(t, http.StatusCreated, code)
	case <-time.After(8 * time.Second): // the upload waits 10s for the index before it answers 503
		t.Fatal("the upload still waits for the index after 8s")
	}
	assert.Positive(t, js.dropped.Load(), "the watch said it delivered the history, and was not heard")
}
