package jsstream

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Backlogs reads the backlog of every consumer of the event stream's
// partitions: one paged consumer list of each partition's stream per read
// (in a cluster, each consumer leader's view). It is safe for concurrent
// use.
type Backlogs struct {
	js      jetstream.JetStream
	streams []string

	mu      sync.Mutex
	handles map[string]jetstream.Stream // cached; a stream's is dropped after an error
}

// NewBacklogs returns a reader of the consumers of the named streams: the
// event stream's partitions (stream.Config.PartitionStreams).
func NewBacklogs(js jetstream.JetStream, streams ...string) *Backlogs {
	return &Backlogs{js: js, streams: streams, handles: map[string]jetstream.Stream{}}
}

// Read returns, by consumer name, the events pending and unacknowledged in
// the consumers of that name, summed over the streams (a Subscription's
// consumer has one name in every partition). The error says which stream
// could not be listed.
func (b *Backlogs) Read(ctx context.Context) (map[string]uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]uint64{}
	for _, name := range b.streams {
		h := b.handles[name]
		if h == nil {
			var err error
			if h, err = b.js.Stream(ctx, name); err != nil {
				return nil, fmt.Errorf("look up stream %s: %w", name, err)
			}
			b.handles[name] = h
		}
		lister := h.ListConsumers(ctx)
		for info := range lister.Info() {
			out[info.Name] += info.NumPending + uint64(max(info.NumAckPending, 0))
		}
		if err := lister.Err(); err != nil {
			delete(b.handles, name) // it may have been made anew
			return nil, fmt.Errorf("list consumers of stream %s: %w", name, err)
		}
	}
	return out, nil
}
