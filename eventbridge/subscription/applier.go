package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/replay"
	"github.com/kfn-dev/kfn/eventbridge/stream"
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
}

// Check validates what a Subscription's spec alone cannot show, such as
// whether its sink's Service exists; its error makes the spec invalid.
type Check func(ctx context.Context, sub *v1alpha2.Subscription, sink v1alpha2.Sink) error

// Apply validates sub as Kyma does (its sink a Service in its own
// namespace, its spec.config values, its event types), then with checks,
// and makes its consumer exist as the spec says, recreating the event
// stream first when NATS lost it. A consumer that has its replay subject
// in its filter keeps it (see package replay). A Subscription whose spec
// cannot be served loses its consumer. The Observation has the SpecError
// (with the failure to delete that consumer, if any, as ConsumerError) or
// the ConsumerError, or else the consumer's name.
func (a Applier) Apply(ctx context.Context, sub *v1alpha2.Subscription, checks ...Check) Observation {
	cfg, err := a.consumerConfig(ctx, sub, checks)
	if err != nil {
		return Observation{SpecError: err, ConsumerError: a.Delete(ctx, sub.Namespace, sub.Name)}
	}
	err = a.filters().Apply(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// NATS lost the stream: recreate it, then the consumer.
		if err = stream.Ensure(ctx, a.JetStream, a.Streams); err == nil {
			err = a.filters().Apply(ctx, cfg)
		}
	}
	if err != nil {
		return Observation{ConsumerError: err}
	}
	return Observation{Consumer: cfg.Durable}
}

// consumerConfig validates sub and returns its consumer's configuration.
func (a Applier) consumerConfig(ctx context.Context, sub *v1alpha2.Subscription, checks []Check) (jetstream.ConsumerConfig, error) {
	sink, err := sub.ValidateSink()
	if err != nil {
		return jetstream.ConsumerConfig{}, fmt.Errorf("spec.sink: %w", err)
	}
	cfg, err := stream.ConsumerConfig(sub, a.Consumer)
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	for _, check := range checks {
		if err := check(ctx, sub, sink); err != nil {
			return jetstream.ConsumerConfig{}, err
		}
	}
	return cfg, nil
}

// SweepReplays runs replay.Filters.Run over the applier's stream: every
// interval (replay.DefaultSweepInterval when not positive), until ctx ends,
// consumers whose replayed events all settled lose their replay subject.
func (a Applier) SweepReplays(ctx context.Context, interval time.Duration, log *slog.Logger) {
	a.filters().Run(ctx, interval, log)
}

func (a Applier) filters() replay.Filters {
	return replay.Filters{JetStream: a.JetStream, Streams: a.Streams}
}

// Delete deletes the consumer of the Subscription namespace/name, and the
// events waiting in it, as deleting the Subscription does in a cluster. A
// consumer that does not exist is no error.
func (a Applier) Delete(ctx context.Context, namespace, name string) error {
	return stream.DeleteConsumer(ctx, a.JetStream, a.Streams.EventStream, stream.ConsumerName(namespace, name))
}
