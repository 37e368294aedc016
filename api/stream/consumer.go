package stream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// Metadata keys kfn sets on each consumer, so a consumer can be traced back
// to its Subscription from JetStream alone.
const (
	MetadataNamespace    = "kfn.dev/namespace"
	MetadataSubscription = "kfn.dev/subscription"
)

// DefaultAckWait is how long JetStream waits for the dispatcher to settle a
// delivered event before it redelivers it. The dispatcher extends it while a
// request to the sink is in progress, so it only matters when a dispatcher
// dies: it is then the delay before another replica takes over the event.
const DefaultAckWait = 30 * time.Second

// ConsumerName returns the durable name of the JetStream consumer of the
// Subscription namespace/name: "kfn-" and 40 hex digits of a SHA-256 of
// both. It is deterministic, the same in every component and release, a
// valid consumer name and subject token, and differs for different
// Subscriptions.
func ConsumerName(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return "kfn-" + hex.EncodeToString(sum[:20])
}

// ConsumerSettings are the consumer settings that are not in the
// Subscription.
type ConsumerSettings struct {
	// AckWait is JetStream's ack wait; DefaultAckWait when zero.
	AckWait time.Duration
	// Defaults are the delivery settings of the spec.config keys a
	// Subscription does not set; the zero value means
	// v1alpha2.DefaultDelivery().
	Defaults v1alpha2.Delivery
}

// ConsumerConfig returns the configuration of the Subscription's durable
// pull consumer: its filter subjects (one per type; the replay subject is
// added only while replayed events wait, see package replay), explicit
// acknowledgement, MaxAckPending equal to
// maxInFlightMessages (so the limit holds across all dispatcher replicas),
// and no JetStream delivery limit (the dispatcher counts attempts and
// dead-letters, so an event is never dropped silently). New consumers start
// with the events published after them. The error wraps
// v1alpha2.ErrInvalidConfig or v1alpha2.ErrInvalidEventType.
func ConsumerConfig(sub *v1alpha2.Subscription, s ConsumerSettings) (jetstream.ConsumerConfig, error) {
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
	name := ConsumerName(sub.Namespace, sub.Name)
	ackWait := s.AckWait
	if ackWait <= 0 {
		ackWait = DefaultAckWait
	}
	return jetstream.ConsumerConfig{
		Durable:        name,
		Description:    fmt.Sprintf("kfn Subscription %s/%s", sub.Namespace, sub.Name),
		DeliverPolicy:  jetstream.DeliverNewPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        ackWait,
		MaxDeliver:     -1,
		MaxAckPending:  delivery.MaxInFlight,
		FilterSubjects: subjects,
		ReplayPolicy:   jetstream.ReplayInstantPolicy,
		Metadata: map[string]string{
			MetadataNamespace:    sub.Namespace,
			MetadataSubscription: sub.Name,
		},
	}, nil
}

// EnsureConsumer creates the consumer or updates it to cfg in the given
// stream. It is idempotent.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("create or update consumer %s in stream %s: %w", cfg.Durable, stream, err)
	}
	return c, nil
}

// DeleteConsumer deletes the named consumer; a consumer or stream that does
// not exist is not an error.
func DeleteConsumer(ctx context.Context, js jetstream.JetStream, stream, name string) error {
	err := js.DeleteConsumer(ctx, stream, name)
	if err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	return fmt.Errorf("delete consumer %s in stream %s: %w", name, stream, err)
}
