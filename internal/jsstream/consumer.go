package jsstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
)

// ConsumerConfig returns the configuration of the Subscription's durable
// pull consumer: its filter subjects (one per type; the replay subject is
// added only while replayed events wait, see package replay), explicit
// acknowledgement, MaxAckPending equal to maxInFlightMessages (so the
// limit holds across all dispatcher replicas), and no JetStream delivery
// limit (the dispatcher counts attempts and dead-letters, so an event is
// never dropped silently). An ordered Subscription's consumer (ordering
// partitionkey) hands out Delivery.AckPending events, and is pinned to
// one client at a time (stream.PriorityGroup), whose dispatcher holds its
// deliveries to maxInFlightMessages. New consumers start with the events
// published after them. The error wraps v1alpha2.ErrInvalidConfig or
// v1alpha2.ErrInvalidEventType.
func ConsumerConfig(sub *v1alpha2.Subscription, s stream.ConsumerSettings) (jetstream.ConsumerConfig, error) {
	defaults := s.Defaults
	if defaults == (v1alpha2.Delivery{}) {
		defaults = v1alpha2.DefaultDelivery()
	}
	if defaults.MaxBacklogBytes == 0 {
		defaults.MaxBacklogBytes = v1alpha2.DefaultMaxBacklogBytes
	}
	delivery, err := sub.DeliveryOver(defaults)
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	subjects, err := sub.FilterSubjects()
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	name := stream.ConsumerName(sub.Namespace, sub.Name)
	ackWait := s.AckWait
	if ackWait <= 0 {
		ackWait = stream.DefaultAckWait
	}
	cfg := jetstream.ConsumerConfig{
		Durable:        name,
		Description:    fmt.Sprintf("kfn Subscription %s/%s", sub.Namespace, sub.Name),
		DeliverPolicy:  jetstream.DeliverNewPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        ackWait,
		MaxDeliver:     -1,
		MaxAckPending:  delivery.AckPending(),
		FilterSubjects: subjects,
		ReplayPolicy:   jetstream.ReplayInstantPolicy,
		Metadata: map[string]string{
			stream.MetadataNamespace:    sub.Namespace,
			stream.MetadataSubscription: sub.Name,
		},
	}
	if delivery.Ordered {
		cfg.PriorityPolicy = jetstream.PriorityPolicyPinned
		cfg.PriorityGroups = []string{stream.PriorityGroup}
		cfg.PinnedTTL = s.PinnedTTL
		if cfg.PinnedTTL <= 0 {
			cfg.PinnedTTL = stream.PinnedTTL
		}
	}
	return cfg, nil
}

// EnsureConsumer creates the consumer or updates it to cfg in the given
// stream. It is idempotent.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, streamName string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c, err := js.CreateOrUpdateConsumer(ctx, streamName, cfg)
	if err != nil {
		return nil, fmt.Errorf("create or update consumer %s in stream %s: %w", cfg.Durable, streamName, err)
	}
	if info := c.CachedInfo(); info != nil {
		if err := applied(cfg, info.Config); err != nil {
			return nil, fmt.Errorf("consumer %s in stream %s: %w", cfg.Durable, streamName, err)
		}
	}
	return c, nil
}

// ErrNoPriorityGroups is the error of an ordered Subscription's consumer
// on a NATS server that does not know priority groups (before 2.11): it
// ignores them, and the consumer would hand its events to every replica.
var ErrNoPriorityGroups = errors.New("the NATS server ignored the consumer's priority group (ordering partitionkey needs NATS 2.11 or later)")

// applied reports a setting of want that the server did not keep in got.
func applied(want, got jetstream.ConsumerConfig) error {
	if want.PriorityPolicy != got.PriorityPolicy {
		return ErrNoPriorityGroups
	}
	return nil
}

// DeleteConsumer deletes the named consumer; a consumer or stream that does
// not exist is not an error.
func DeleteConsumer(ctx context.Context, js jetstream.JetStream, streamName, name string) error {
	err := js.DeleteConsumer(ctx, streamName, name)
	if err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	return fmt.Errorf("delete consumer %s in stream %s: %w", name, streamName, err)
}
