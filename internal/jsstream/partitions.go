package jsstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
)

// Partitions taken away.
//
// An event bridge of N partitions publishes into partitions 0 to N-1. A
// partition p >= N whose stream exists (left by an event bridge of more
// partitions: the chart's value was lowered) is taken away: it still
// holds events its Subscriptions have not acknowledged, so it is served
// (its consumers pulled, its backlog counted) until it is drained. The
// leader of the consumers (the Opener) closes it, so that it takes no new
// event (one published there is stored in partition 0 instead, see
// eventstore), and deletes it once it holds no event. Partition 0's stream
// records the count of partitions of that leader (PartitionsMetadata,
// RecordPartitions), so that every replica, of the old count or the new
// while a change rolls out, reads a partition deleted so as taken away and
// not lost; and a leader drains only what it recorded as taken away.

// PartitionsMetadata is the key of partition 0's stream metadata that
// records the count of partitions of the consumers' leader (or, until a
// leader recorded one, of the event bridge that made the stream). A
// stream without it was made by one of a single partition.
const PartitionsMetadata = "kfn.dev/partitions"

// RecordPartitions records c's count of partitions in partition 0's
// stream (PartitionsMetadata) when it records another, and reports
// whether it changed it. Call it from the consumers' leader only, before
// DrainTakenAway.
func RecordPartitions(ctx context.Context, js jetstream.JetStream, c stream.Config) (bool, error) {
	s, err := js.Stream(ctx, c.EventStream)
	if err != nil {
		return false, fmt.Errorf("look up stream %s: %w", c.EventStream, err)
	}
	sc := s.CachedInfo().Config
	want := strconv.Itoa(c.PartitionCount())
	if sc.Metadata[PartitionsMetadata] == want {
		return false, nil
	}
	sc.Metadata = maps.Clone(sc.Metadata)
	if sc.Metadata == nil {
		sc.Metadata = map[string]string{}
	}
	sc.Metadata[PartitionsMetadata] = want
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		return false, fmt.Errorf("record %s partitions in stream %s: %w", want, c.EventStream, err)
	}
	return true, nil
}

// ServedPartitions returns the partitions to serve, in order: 0 to
// c.PartitionCount()-1, and every partition taken away (p >= the count)
// whose stream exists. It lists the streams' names once.
func ServedPartitions(ctx context.Context, js jetstream.JetStream, c stream.Config) ([]int, error) {
	served := publishedPartitions(c)
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		if p, ok := c.PartitionNumber(name); ok && p >= c.PartitionCount() {
			served = append(served, p)
		}
	}
	if err := names.Err(); err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	slices.Sort(served)
	return served, nil
}

// publishedPartitions are 0 to c.PartitionCount()-1.
func publishedPartitions(c stream.Config) []int {
	ps := make([]int, c.PartitionCount())
	for p := range ps {
		ps[p] = p
	}
	return ps
}

// PartitionStreamsOf names the streams of partitions ps.
func PartitionStreamsOf(c stream.Config, ps []int) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = c.PartitionStream(p)
	}
	return names
}

// TakenAway reports whether the partition of the named stream is one
// partition 0's stream no longer counts (PartitionsMetadata): a stream
// gone so was drained and deleted, not lost. Partition 0, or a missing
// partition 0, is never taken away.
func TakenAway(ctx context.Context, js jetstream.JetStream, c stream.Config, name string) (bool, error) {
	p, ok := c.PartitionNumber(name)
	if !ok || p == 0 {
		return false, nil
	}
	s, err := js.Stream(ctx, c.EventStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up stream %s: %w", c.EventStream, err)
	}
	return p >= RecordedPartitions(s.CachedInfo().Config), nil
}

// RecordedPartitions is the count of partitions partition 0's stream
// configuration records: 1 without a record (or with one that is not a
// count).
func RecordedPartitions(sc jetstream.StreamConfig) int {
	n, err := strconv.Atoi(sc.Metadata[PartitionsMetadata])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Drained is what one DrainTakenAway did.
type Drained struct {
	// Closed are the partitions it closed, Deleted those it deleted, and
	// Draining those left closed because they still hold events.
	Closed, Deleted, Draining []int
}

// DrainTakenAway looks once at every partition taken away (p >= the
// count of c) whose stream exists, if partition 0 records c's count
// (RecordPartitions: a leader of another count, while a change rolls out,
// drains nothing it does not count as taken away): an open one is closed, and one that is closed and holds no
// event (every consumer acknowledged every event, interest retention) is
// deleted, with its consumers. A partition closed by this call is
// deleted by a later one at the earliest, so that an event stored while
// it was closing is read first. Call it from the consumers' leader only.
func DrainTakenAway(ctx context.Context, js jetstream.JetStream, c stream.Config) (Drained, error) {
	var d Drained
	s, err := js.Stream(ctx, c.EventStream)
	if err != nil {
		return d, fmt.Errorf("look up stream %s: %w", c.EventStream, err)
	}
	if RecordedPartitions(s.CachedInfo().Config) != c.PartitionCount() {
		return d, nil
	}
	served, err := ServedPartitions(ctx, js, c)
	if err != nil {
		return d, err
	}
	var errs []error
	for _, p := range served[c.PartitionCount():] {
		if err := drainPartition(ctx, js, c, p, &d); err != nil {
			errs = append(errs, err)
		}
	}
	return d, errors.Join(errs...)
}

func drainPartition(ctx context.Context, js jetstream.JetStream, c stream.Config, p int, d *Drained) error {
	name := c.PartitionStream(p)
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up stream %s: %w", name, err)
	}
	info := s.CachedInfo()
	switch {
	case IsOpen(info.Config):
		closed := closedConfig(info.Config, c, p, fmt.Sprintf("kfn events of partition %d, taken away: closed, deleted once its events are delivered", p))
		if _, err := js.UpdateStream(ctx, closed); err != nil {
			return fmt.Errorf("close stream %s: %w", name, err)
		}
		d.Closed = append(d.Closed, p)
	case info.State.Msgs == 0:
		if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("delete stream %s: %w", name, err)
		}
		d.Deleted = append(d.Deleted, p)
	default:
		d.Draining = append(d.Draining, p)
	}
	return nil
}

// PartitionWatch keeps the served partitions (ServedPartitions), looked
// up again at most once an interval. It is safe for concurrent use.
type PartitionWatch struct {
	js       jetstream.JetStream
	c        stream.Config
	interval time.Duration

	mu     sync.Mutex
	served []int
	at     time.Time
}

// DefaultPartitionLook is how long a PartitionWatch keeps what it found.
const DefaultPartitionLook = 2 * time.Second

// NewPartitionWatch returns a watch of c's partitions in js that looks
// again once what it found is older than interval (DefaultPartitionLook
// when zero).
func NewPartitionWatch(js jetstream.JetStream, c stream.Config, interval time.Duration) *PartitionWatch {
	if interval <= 0 {
		interval = DefaultPartitionLook
	}
	return &PartitionWatch{js: js, c: c, interval: interval}
}

// Served returns the served partitions, as last found when that is
// younger than the interval. When they cannot be listed, the error says
// why and the partitions returned are the last found, or 0 to the count
// before any was.
func (w *PartitionWatch) Served(ctx context.Context) ([]int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.served != nil && time.Since(w.at) < w.interval {
		return w.served, nil
	}
	served, err := ServedPartitions(ctx, w.js, w.c)
	if err != nil {
		if w.served == nil {
			return publishedPartitions(w.c), err
		}
		return w.served, err
	}
	w.served, w.at = served, time.Now()
	return served, nil
}

// Streams returns the names of the served partitions' streams (Served).
func (w *PartitionWatch) Streams(ctx context.Context) ([]string, error) {
	served, err := w.Served(ctx)
	return PartitionStreamsOf(w.c, served), err
}
