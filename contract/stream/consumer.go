package stream

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

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

// The priority group of an ordered Subscription's consumer (one of
// partitionkey ordering): JetStream pins the consumer to one client, the
// pull of one dispatcher replica, at a time, and pins another when that
// one has asked for nothing for PinnedTTL. The dispatcher's pulls ask
// again at least every 30 seconds while they pull; a replica that takes
// over the pin delivers nothing before every event the consumer handed
// out is in its hands (package eventbridge/dispatcher/schedule), so that
// a key's events never run on two replicas, nor out of order.
const (
	PriorityGroup = "kfn"
	PinnedTTL     = time.Minute
)

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
	// PinnedTTL is an ordered Subscription's pin's time to live (how
	// long a replica that stopped holds its consumer); PinnedTTL when
	// zero.
	PinnedTTL time.Duration
	// Defaults are the delivery settings of the spec.config keys a
	// Subscription does not set; the zero value means
	// v1alpha2.DefaultDelivery().
	Defaults v1alpha2.Delivery
}
