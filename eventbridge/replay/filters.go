package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/internal/jsstream"
)

// DefaultSweepInterval is how often Run sweeps by default: how long, at
// most, a consumer keeps its replay subject after its replays settled.
const DefaultSweepInterval = 30 * time.Second

// ErrNoConsumer is wrapped by Hold's error when the consumer does not
// exist: its Subscription was deleted, or its spec cannot be served.
var ErrNoConsumer = errors.New("the Subscription has no consumer")

// Filters changes the filters of the event stream's consumers. Replayed
// events are stored in partition 0 (stream.Config.EventStream): a
// consumer's replay subject is in the filter of its partition 0 only. The zero
// value is not usable; set both fields. It is safe for concurrent use.
type Filters struct {
	// JetStream is where the streams and the lock bucket live.
	JetStream jetstream.JetStream
	// Streams names the event stream and, through it, the lock bucket.
	Streams stream.Config
}

// Hold locks the named consumer and adds its replay subject to its filter.
// The caller publishes its replayed events, then calls release, which
// unlocks. The error wraps ErrNoConsumer when the consumer does not exist.
func (f Filters) Hold(ctx context.Context, consumer string) (release func(), err error) {
	unlock, err := f.lock(ctx, consumer)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	cfg, err := f.config(ctx, consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("replay to consumer %s: %w", consumer, ErrNoConsumer)
	}
	if err != nil {
		return nil, err
	}
	if subjects, ok := withReplay(cfg.FilterSubjects, consumer); ok {
		cfg.FilterSubjects = subjects
		if err := f.update(ctx, cfg); err != nil {
			return nil, err
		}
	}
	return unlock, nil
}

// Apply creates the consumer cfg.Durable or updates it to cfg in every
// partition of the event stream, keeping its replay subject in the filter
// of partition 0's, where replayed events are stored, if it has it:
// replayed events may still wait. It reports whether it created the
// consumer in partition 0, or in another partition that takes events (in
// a closed one, a partition added, no event was taken for it to lose; a
// partition lost whole is told by package streamloss). A partition taken
// away (jsstream.DrainTakenAway) keeps its consumers as they are while it
// is drained. The error wraps jetstream.ErrStreamNotFound when a partition's stream does
// not exist.
func (f Filters) Apply(ctx context.Context, cfg jetstream.ConsumerConfig) (created bool, err error) {
	unlock, err := f.lock(ctx, cfg.Durable)
	if err != nil {
		return false, err
	}
	defer unlock()
	current, err := f.config(ctx, cfg.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		created = true
	case err != nil:
		return false, err
	}
	partition0 := cfg
	if slices.Contains(current.FilterSubjects, stream.ReplaySubject(cfg.Durable)) {
		partition0.FilterSubjects, _ = withReplay(slices.Clone(cfg.FilterSubjects), cfg.Durable)
	}
	if err := f.update(ctx, partition0); err != nil {
		return false, err
	}
	for p := 1; p < f.Streams.PartitionCount(); p++ {
		name := f.Streams.PartitionStream(p)
		_, err := f.JetStream.Consumer(ctx, name, cfg.Durable)
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			open, err := f.takesEvents(ctx, p)
			if err != nil {
				return false, err
			}
			created = created || open
		case err != nil:
			return false, fmt.Errorf("read consumer %s in stream %s: %w", cfg.Durable, name, err)
		}
		if _, err := jsstream.EnsureConsumer(ctx, f.JetStream, name, cfg); err != nil {
			return false, err
		}
	}
	return created, nil
}

// takesEvents reports whether partition p's stream is open.
func (f Filters) takesEvents(ctx context.Context, p int) (bool, error) {
	name := f.Streams.PartitionStream(p)
	s, err := f.JetStream.Stream(ctx, name)
	if err != nil {
		return false, fmt.Errorf("look up stream %s: %w", name, err)
	}
	return jsstream.IsOpen(s.CachedInfo().Config), nil
}

// Sweep takes the replay subject out of the filter of every consumer of the
// event stream that has it and has no replayed event left in the stream
// (waiting, in delivery or retrying), and returns how many it changed. It
// goes on past a consumer it cannot change and returns the errors joined.
func (f Filters) Sweep(ctx context.Context) (int, error) {
	s, err := f.JetStream.Stream(ctx, f.Streams.EventStream)
	if err != nil {
		return 0, fmt.Errorf("open stream %s: %w", f.Streams.EventStream, err)
	}
	var held []string
	list := s.ListConsumers(ctx)
	for info := range list.Info() {
		if slices.Contains(info.Config.FilterSubjects, stream.ReplaySubject(info.Name)) {
			held = append(held, info.Name)
		}
	}
	if err := list.Err(); err != nil {
		return 0, fmt.Errorf("list consumers of %s: %w", f.Streams.EventStream, err)
	}
	n, errs := 0, []error(nil)
	for _, consumer := range held {
		changed, err := f.release(ctx, s, consumer)
		if err != nil {
			errs = append(errs, err)
		}
		if changed {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// release takes the replay subject out of the consumer's filter if no
// replayed event for it is left in the stream.
func (f Filters) release(ctx context.Context, s jetstream.Stream, consumer string) (bool, error) {
	unlock, err := f.lock(ctx, consumer)
	if err != nil {
		return false, err
	}
	defer unlock()
	subject := stream.ReplaySubject(consumer)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return false, fmt.Errorf("count replayed events of %s: %w", consumer, err)
	}
	if info.State.Subjects[subject] > 0 {
		return false, nil
	}
	cfg, err := f.config(ctx, consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	i := slices.Index(cfg.FilterSubjects, subject)
	if i < 0 {
		return false, nil
	}
	cfg.FilterSubjects = slices.Delete(cfg.FilterSubjects, i, i+1)
	return true, f.update(ctx, cfg)
}

// Sweeper runs Filters.Sweep on a period: consumers whose replayed events
// all settled lose their replay subject.
type Sweeper struct {
	filters  Filters
	interval time.Duration
	log      *slog.Logger
}

// NewSweeper returns a Sweeper of f's consumers that sweeps every interval
// (DefaultSweepInterval when not positive) and logs what a sweep changed
// or could not to log (discarded when nil).
func NewSweeper(f Filters, interval time.Duration, log *slog.Logger) *Sweeper {
	if interval <= 0 {
		interval = DefaultSweepInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sweeper{filters: f, interval: interval, log: log}
}

// Run sweeps until ctx ends, then returns nil. A sweep under way when ctx
// ends stops between consumers: each consumer's filter is updated whole or
// not at all, and the next sweep (in this or another process) finishes.
func (s *Sweeper) Run(ctx context.Context) error {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, err := s.filters.Sweep(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("sweeping replay subjects out of consumer filters", "changed", n, "error", err)
		case n > 0:
			s.log.Debug("replay subjects swept out of consumer filters", "consumers", n)
		}
	}
}

// withReplay returns subjects with the consumer's replay subject added,
// and whether it was missing.
func withReplay(subjects []string, consumer string) ([]string, bool) {
	subject := stream.ReplaySubject(consumer)
	if slices.Contains(subjects, subject) {
		return subjects, false
	}
	return append(subjects, subject), true
}

// config returns the consumer's current configuration.
func (f Filters) config(ctx context.Context, consumer string) (jetstream.ConsumerConfig, error) {
	c, err := f.JetStream.Consumer(ctx, f.Streams.EventStream, consumer)
	if err != nil {
		return jetstream.ConsumerConfig{}, fmt.Errorf("read consumer %s: %w", consumer, err)
	}
	return c.CachedInfo().Config, nil
}

func (f Filters) update(ctx context.Context, cfg jetstream.ConsumerConfig) error {
	_, err := jsstream.EnsureConsumer(ctx, f.JetStream, f.Streams.EventStream, cfg)
	return err
}
