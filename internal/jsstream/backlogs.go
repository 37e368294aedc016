package jsstream

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
)

// Backlogs reads the backlog of every consumer of the event stream's
// partitions, those taken away and not yet drained included: one paged
// consumer list of each partition's stream per read (in a cluster, each
// consumer leader's view), and a list of the streams' names at most every
// DefaultPartitionLook. It is safe for concurrent use.
type Backlogs struct {
	js         jetstream.JetStream
	partitions *PartitionWatch

	mu      sync.Mutex
	handles map[string]jetstream.Stream // cached; a stream's is dropped after an error
}

// NewBacklogs returns a reader of the consumers of c's partitions.
func NewBacklogs(js jetstream.JetStream, c stream.Config) *Backlogs {
	return &Backlogs{js: js, partitions: NewPartitionWatch(js, c, 0), handles: map[string]jetstream.Stream{}}
}

// Read returns, by consumer name, the events pending and unacknowledged in
// the consumers of that name, summed over the streams (a Subscription's
// consumer has one name in every partition). The error says which stream
// could not be listed. A partition taken away that is gone (drained and
// deleted since the last list of names) counts nothing.
func (b *Backlogs) Read(ctx context.Context) (map[string]uint64, error) {
	served, err := b.partitions.Served(ctx)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]uint64{}
	for _, p := range served {
		name := b.partitions.c.PartitionStream(p)
		h := b.handles[name]
		if h == nil {
			var err error
			h, err = b.js.Stream(ctx, name)
			if b.drained(p, err) {
				continue
			}
			if err != nil {
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
			if b.drained(p, err) {
				continue
			}
			return nil, fmt.Errorf("list consumers of stream %s: %w", name, err)
		}
	}
	return out, nil
}

// drained reports whether err says that partition p, one taken away, was
// deleted since the streams' names were listed.
func (b *Backlogs) drained(p int, err error) bool {
	return errors.Is(err, jetstream.ErrStreamNotFound) && p >= b.partitions.c.PartitionCount()
}
