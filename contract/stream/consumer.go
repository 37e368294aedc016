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
