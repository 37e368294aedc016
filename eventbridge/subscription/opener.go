package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kfn-dev/kfn/internal/jsstream"
)

// DefaultOpenInterval is how often an Opener looks at the event stream
// when nothing wakes it.
const DefaultOpenInterval = time.Second

// DefaultOpenAnywayAfter is how many looks in a row an Opener lets a
// consumer that cannot be made keep the event stream closed before it
// opens it all the same.
const DefaultOpenAnywayAfter = 30

// Opener opens the event stream once every Subscription's consumer exists
// in it (see stream.ClosedSubjectPrefix), so that no event is acknowledged
// to its sender before the consumers that keep it for the Subscriptions
// exist. It makes a missing event stream closed itself. Run it where the
// consumers are made: in the Reconciler's leader (MakeConsumers), or
// beside a Set (Set.Reapply).
//
// A consumer is made at new events (Kyma's semantics), which in a stream
// that has taken no event yet is its first: the Opener adds no delivery
// and no duplicate. An event published while the stream is closed is
// refused, never acknowledged.
type Opener struct {
	// Applier names the streams and is how the stream is looked at.
	Applier Applier
	// MakeConsumers makes the consumer of every Subscription served and
	// returns an error per consumer it could not make (not one per
	// consumer made anew: that is a loss, reported where it is seen).
	MakeConsumers func(ctx context.Context) []error
	// Log receives what the Opener does; nil discards.
	Log *slog.Logger
	// Interval is how often it looks at the stream unasked;
	// DefaultOpenInterval when zero.
	Interval time.Duration
	// OpenAnywayAfter is how many looks in a row a consumer that cannot be
	// made keeps the stream closed; then the stream is opened all the same
	// (the other Subscriptions' events are taken again, that one's are
	// lost until its consumer is made) and that is logged as an error.
	// DefaultOpenAnywayAfter when zero.
	OpenAnywayAfter int

	wake    chan struct{}
	failing int
	// looks counts the looks that found the stream open, for the leaders'
	// spread every spreadLeadersEvery of them.
	looks int
	// closed and openedAnyway are nil until WithMetrics.
	closed       prometheus.Gauge
	openedAnyway prometheus.Counter
}

// WithMetrics registers the Opener's metrics with reg:
// kfn_eventbridge_event_stream_closed, 1 while the last look found the
// event stream closed and left it so (publishing answers 503 until every
// consumer exists), else 0; and
// kfn_eventbridge_event_stream_opened_anyway_total, the times it was
// opened although consumers could not be made. Only the replica that
// runs the Opener (the reconciler's leader) reports 1.
func (o *Opener) WithMetrics(reg prometheus.Registerer) error {
	labels := prometheus.Labels{"stream": o.Applier.Streams.EventStream}
	o.closed = prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "kfn_eventbridge_event_stream_closed",
		Help:        "1 while the event stream is held closed (publishing answers 503) until every Subscription's consumer exists in it, as this replica's last look found it.",
		ConstLabels: labels,
	})
	o.openedAnyway = prometheus.NewCounter(prometheus.CounterOpts{
		Name:        "kfn_eventbridge_event_stream_opened_anyway_total",
		Help:        "Times the event stream was opened although some Subscription's consumer could not be made (its events are lost until it is).",
		ConstLabels: labels,
	})
	for _, c := range []prometheus.Collector{o.closed, o.openedAnyway} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register event stream opener metrics: %w", err)
		}
	}
	return nil
}

// setClosed reports whether the stream stays closed after a look.
func (o *Opener) setClosed(closed bool) {
	if o.closed == nil {
		return
	}
	if closed {
		o.closed.Set(1)
	} else {
		o.closed.Set(0)
	}
}

// NewOpener returns an Opener of a's event stream that makes the
// consumers with makeConsumers. Run it, or call Open, from one goroutine
// at a time.
func NewOpener(a Applier, makeConsumers func(ctx context.Context) []error, log *slog.Logger) *Opener {
	return &Opener{Applier: a, MakeConsumers: makeConsumers, Log: log, wake: make(chan struct{}, 1)}
}

// Wake makes a running Opener look at the stream now (its stream may have
// been made anew). It never blocks.
func (o *Opener) Wake() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// openErrorLogEvery is how often Run logs that looks keep failing (NATS
// unreachable, say): the first failure is logged, then one in this many.
const openErrorLogEvery = 30

// Run looks at the stream at once, then at every Wake and Interval, until
// ctx ends; it returns nil then. An error is logged (the first of a run of
// failures, then one in 30) and the next look tries again.
func (o *Opener) Run(ctx context.Context) error {
	interval := o.Interval
	if interval <= 0 {
		interval = DefaultOpenInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	failures := 0
	for {
		_, err := o.Open(ctx)
		switch {
		case err == nil || ctx.Err() != nil:
			failures = 0
		case failures%openErrorLogEvery == 0:
			failures++
			o.log().Warn("opening the event stream failed; the next look retries", "error", err, "failuresInARow", failures)
		default:
			failures++
		}
		select {
		case <-ctx.Done():
			return nil
		case <-o.wake:
		case <-t.C:
		}
	}
}

// Open looks at the event stream once: a missing one is made closed; a
// closed one gets every Subscription's consumer, then is opened. It
// reports whether it opened the stream. While a consumer cannot be made,
// the stream stays closed and the error says why, for OpenAnywayAfter
// calls in a row.
func (o *Opener) Open(ctx context.Context) (bool, error) {
	js, streams := o.Applier.JetStream, o.Applier.Streams
	open, err := jsstream.EventStreamOpen(ctx, js, streams)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		open, err = jsstream.EnsureClosed(ctx, js, streams)
	}
	if err == nil && open {
		o.failing = 0
		o.setClosed(false)
		return false, errors.Join(o.raiseReplicas(ctx), o.spreadLeaders(ctx), o.drainTakenAway(ctx))
	}
	if err != nil {
		o.failing = 0
		return false, err
	}
	o.setClosed(true)
	if errs := o.MakeConsumers(ctx); len(errs) > 0 {
		o.failing++
		limit := o.OpenAnywayAfter
		if limit <= 0 {
			limit = DefaultOpenAnywayAfter
		}
		if o.failing < limit {
			return false, fmt.Errorf("the event stream stays closed until every consumer exists (%d of %d looks): %w", o.failing, limit, errors.Join(errs...))
		}
		o.log().Error("opening the event stream although consumers could not be made: their Subscriptions' events are lost until they are",
			"stream", streams.EventStream, "looks", o.failing, "error", errors.Join(errs...))
		if o.openedAnyway != nil {
			o.openedAnyway.Inc()
		}
	}
	if err := jsstream.Open(ctx, js, streams); err != nil {
		return false, err
	}
	o.setClosed(false)
	o.failing = 0
	o.log().Info("the event stream is open: every Subscription's consumer exists in it", "stream", streams.EventStream)
	return true, nil
}

// raiseReplicas gives the streams the replicas of this event bridge's
// configuration when one has fewer (stream.FewerReplicas): a stream made
// anew by a replica of a smaller configuration, during a move from profile
// small to ha, would otherwise keep one replica until an event bridge
// restarts.
func (o *Opener) raiseReplicas(ctx context.Context) error {
	js, streams := o.Applier.JetStream, o.Applier.Streams
	fewer, err := jsstream.FewerReplicas(ctx, js, streams)
	if err != nil || !fewer {
		return err
	}
	if err := jsstream.Ensure(ctx, js, streams); err != nil {
		return fmt.Errorf("raise the streams to %d replicas: %w", streams.Replicas, err)
	}
	o.log().Info("the streams had fewer replicas than configured: raised", "replicas", streams.Replicas)
	return nil
}

// spreadLeadersEvery is how many looks at an open stream go between two
// spreads of the partitions' leaders (jsstream.SpreadLeaders): a leader
// moves when a NATS server restarts, and the next spread, within this many
// Intervals, moves it back.
const spreadLeadersEvery = 10

// spreadLeaders moves the partitions' leaders onto different servers, at
// the first look at an open stream and every spreadLeadersEvery after.
func (o *Opener) spreadLeaders(ctx context.Context) error {
	o.looks++
	if (o.looks-1)%spreadLeadersEvery != 0 {
		return nil
	}
	moved, err := jsstream.SpreadLeaders(ctx, o.Applier.JetStream, o.Applier.Streams)
	if moved > 0 {
		o.log().Info("asked the partitions' leaders to move onto servers of their own", "moved", moved, "partitions", o.Applier.Streams.PartitionCount())
	}
	return err
}

// drainTakenAway records this event bridge's count of partitions in the
// event stream (jsstream.RecordPartitions), closes the partitions taken
// away (a count of partitions lowered, jsstream.DrainTakenAway) and
// deletes those drained, at each look at an open stream.
func (o *Opener) drainTakenAway(ctx context.Context) error {
	changed, err := jsstream.RecordPartitions(ctx, o.Applier.JetStream, o.Applier.Streams)
	if err != nil {
		return err
	}
	if changed {
		o.log().Info("recorded the count of partitions in the event stream", "partitions", o.Applier.Streams.PartitionCount())
	}
	d, err := jsstream.DrainTakenAway(ctx, o.Applier.JetStream, o.Applier.Streams)
	if len(d.Closed) > 0 {
		o.log().Info("closed partitions taken away: their events are delivered, then they are deleted", "partitions", d.Closed)
	}
	if len(d.Deleted) > 0 {
		o.log().Info("deleted partitions taken away: every event they held was delivered", "partitions", d.Deleted)
	}
	return err
}

func (o *Opener) log() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}
