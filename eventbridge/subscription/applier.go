package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/replay"
	"github.com/kfn-dev/kfn/internal/jsstream"
)

// Applier makes Subscriptions' durable JetStream consumers match their
// specs. It is the one way kfn applies a Subscription to JetStream: the
// cluster's [Reconciler] and, through a [Set], the event bridge's
// -subscriptions mode and kfn dev.
type Applier struct {
	// JetStream is where the consumers live.
	JetStream jetstream.JetStream
	// Streams names the event stream, which is recreated when NATS lost it.
	Streams stream.Config
	// Consumer holds the consumer settings not in the Subscription.
	Consumer stream.ConsumerSettings
	// Limits bound a namespace's Subscriptions that get a consumer; the
	// Reconciler and the Set hold them (Apply does not: it sees one
	// Subscription).
	Limits Limits
}

// Check validates what a Subscription's spec alone cannot show, such as
// whether its sink's Service exists; its error makes the spec invalid.
type Check func(ctx context.Context, sub *v1alpha2.Subscription, sink v1alpha2.Sink) error

// Apply validates sub as Kyma does (its sink a Service in its own
// namespace, its spec.config values, its event types), then with checks,
// and makes its consumer exist as the spec says, recreating the event
// stream first when NATS lost it. A consumer that has its replay subject
// in its filter keeps it (see package replay).
//
// Nothing acknowledged is lost while a spec is invalid: when only the sink
// is wrong (another namespace, a Service that does not exist yet), the
// consumer is made or updated all the same, so that the events published
// meanwhile wait for the sink to be fixed; when the types or spec.config
// are wrong, the consumer is left as it was, with the events waiting in
// it. Only Delete, for a deleted Subscription, removes a consumer.
//
// The Observation has the SpecError, and the ConsumerError or the
// consumer's name, and whether Apply made a consumer that did not exist.
func (a Applier) Apply(ctx context.Context, sub *v1alpha2.Subscription, checks ...Check) Observation {
	cfg, err := jsstream.ConsumerConfig(sub, a.Consumer)
	if err != nil {
		return a.keep(ctx, sub, err)
	}
	obs := Observation{SpecError: a.checkSink(ctx, sub, checks)}
	created, err := a.filters().Apply(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// NATS lost the stream: make it anew, closed (an Opener opens it
		// once every Subscription's consumer exists), then the consumer.
		if _, err = jsstream.EnsureClosed(ctx, a.JetStream, a.Streams); err == nil {
			created, err = a.filters().Apply(ctx, cfg)
		}
	}
	if err != nil {
		obs.ConsumerError = err
		return obs
	}
	obs.Consumer, obs.Created = cfg.Durable, created
	return obs
}

// Check validates sub as Apply does, then with checks, without making or
// changing anything: the error is the SpecError Apply would observe.
func (a Applier) Check(ctx context.Context, sub *v1alpha2.Subscription, checks ...Check) error {
	if _, err := jsstream.ConsumerConfig(sub, a.Consumer); err != nil {
		return err
	}
	return a.checkSink(ctx, sub, checks)
}

// keep is Apply's Observation of a Subscription whose consumer cannot be
// computed from its spec (invalid types or spec.config): the consumer is
// left as it is, and named when it exists.
func (a Applier) keep(ctx context.Context, sub *v1alpha2.Subscription, specErr error) Observation {
	name := stream.ConsumerName(sub.Namespace, sub.Name)
	obs := Observation{SpecError: specErr}
	_, err := a.JetStream.Consumer(ctx, a.Streams.EventStream, name)
	switch {
	case err == nil:
		obs.Consumer = name
	case !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound):
		obs.ConsumerError = fmt.Errorf("look up consumer %s: %w", name, err)
	}
	return obs
}

// checkSink validates what of sub the consumer does not depend on: its
// sink, as written and with checks.
func (a Applier) checkSink(ctx context.Context, sub *v1alpha2.Subscription, checks []Check) error {
	sink, err := sub.ValidateSink()
	if err != nil {
		return fmt.Errorf("spec.sink: %w", err)
	}
	for _, check := range checks {
		if err := check(ctx, sub, sink); err != nil {
			return err
		}
	}
	return nil
}

// SweepReplays runs a replay.Sweeper over the applier's stream until ctx
// ends (see replay.Sweeper.Run): every interval (replay.DefaultSweepInterval
// when not positive), consumers whose replayed events all settled lose
// their replay subject.
func (a Applier) SweepReplays(ctx context.Context, interval time.Duration, log *slog.Logger) error {
	return replay.NewSweeper(a.filters(), interval, log).Run(ctx)
}

func (a Applier) filters() replay.Filters {
	return replay.Filters{JetStream: a.JetStream, Streams: a.Streams}
}

// reserve is Limits.Reserve for sub, whose namespace holds held consumers
// (see Limits.NeedsRoom), asking NATS whether sub has its consumer (in the
// event stream's partition 0, as every Subscription with a consumer has)
// and how many consumers the stream holds; err is why NATS could not
// tell.
func (a Applier) reserve(ctx context.Context, sub *v1alpha2.Subscription, held int) (over, err error) {
	_, err = a.JetStream.Consumer(ctx, a.Streams.EventStream, stream.ConsumerName(sub.Namespace, sub.Name))
	switch {
	case err == nil:
		return nil, nil // it keeps its consumer
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, nil // Apply makes the stream anew, and its first consumers
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, fmt.Errorf("look up the consumer of %s/%s: %w", sub.Namespace, sub.Name, err)
	}
	s, err := a.JetStream.Stream(ctx, a.Streams.EventStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("count the consumers of stream %s: %w", a.Streams.EventStream, err)
	}
	return a.Limits.Reserve(sub, held, s.CachedInfo().State.Consumers, a.Streams), nil
}

// Delete deletes the consumer of the Subscription namespace/name in every
// partition, those taken away and still drained included (whose events
// it would otherwise keep), and the events waiting in them, as deleting
// the Subscription does in a cluster. A consumer, or a partition taken
// away, that does not exist is no error (jsstream.DeleteConsumer).
func (a Applier) Delete(ctx context.Context, namespace, name string) error {
	served, err := jsstream.ServedPartitions(ctx, a.JetStream, a.Streams)
	if err != nil {
		return fmt.Errorf("delete the consumers of %s/%s: %w", namespace, name, err)
	}
	var errs []error
	for _, s := range jsstream.PartitionStreamsOf(a.Streams, served) {
		errs = append(errs, jsstream.DeleteConsumer(ctx, a.JetStream, s, stream.ConsumerName(namespace, name)))
	}
	return errors.Join(errs...)
}
