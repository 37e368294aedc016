package v1alpha2

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The spec.config keys kfn understands. Values are strings, as in Kyma.
const (
	// ConfigMaxInFlightMessages is how many events may be unacknowledged at
	// once for the Subscription, across all dispatcher replicas. 1 delivers
	// in order. Default "10" (Kyma's key and default), at most "1000".
	ConfigMaxInFlightMessages = "maxInFlightMessages"
	// ConfigMaxDeliver is how many delivery attempts an event gets before it
	// is dead-lettered. Default "10", at most "100".
	ConfigMaxDeliver = "maxDeliver"
	// ConfigBackoffInitial is the delay before the first redelivery; each
	// further one doubles it, with jitter, up to ConfigBackoffMax. A Go
	// duration of at least MinBackoff. Default "1s".
	ConfigBackoffInitial = "backoffInitial"
	// ConfigBackoffMax caps the redelivery delay. A Go duration. Default "60s".
	ConfigBackoffMax = "backoffMax"
	// ConfigDeadLetter is "true" (default) to keep events that ran out of
	// attempts in the dead-letter stream, where they can be listed and
	// replayed, or "false" to drop them.
	ConfigDeadLetter = "deadLetter"
	// ConfigMaxBacklog is the Subscription's backlog budget: the most events
	// that may wait for it (pending plus unacknowledged). Past it, the
	// oldest are dead-lettered (or dropped with deadLetter "false") with the
	// reason, so that a dead sink cannot fill the shared event stream and
	// make publishing fail for every Subscription. Default "100000", at
	// most "1000000". The event bridge holds it to the total of the
	// Subscription's namespace (-namespace-max-backlog), which all of the
	// namespace's Subscriptions share.
	ConfigMaxBacklog = "maxBacklog"
	// ConfigMaxBacklogBytes is kfn's backlog budget in bytes: the most
	// bytes of events that may wait for the Subscription, estimated from
	// a sample of them. Past it the oldest are given up as past
	// maxBacklog, so that a few large events cannot fill what a count of
	// small ones would not. Default "67108864" (64 MiB), at most
	// "4294967296" (4 GiB), which is more than an event stream may hold:
	// the event bridge holds it to the total of the Subscription's
	// namespace (-namespace-max-backlog-bytes, by default a 16th of the
	// stream), which all of the namespace's Subscriptions share.
	ConfigMaxBacklogBytes = "maxBacklogBytes"
	// ConfigOrdering is kfn's ordering of deliveries: "none" (default)
	// delivers events in parallel, up to maxInFlightMessages, in any order;
	// OrderingPartitionKey delivers the events of one partition key (the
	// CloudEvents extension partitionkey) one at a time, in the order they
	// were published, across retries, redeliveries and dispatcher
	// replicas, and events of different keys in parallel up to
	// maxInFlightMessages. A failing event holds back only its own key,
	// until it is delivered or given up. Events without a partitionkey are
	// not ordered. Kyma has no ordering; the key is kfn's.
	ConfigOrdering = "ordering"
)

// The values of ConfigOrdering.
const (
	// OrderingNone delivers events in any order (the default).
	OrderingNone = "none"
	// OrderingPartitionKey delivers the events of one partitionkey in
	// order (see ConfigOrdering).
	OrderingPartitionKey = "partitionkey"
)

// OrderedAckPendingFactor is how many events an ordered Subscription may
// hold per delivery slot (maxInFlightMessages): events of a key wait
// behind the key's event in delivery, and the events of the other keys
// behind them must still reach the dispatcher to run in parallel.
// OrderedAckPending bounds it.
const OrderedAckPendingFactor = 8

// MaxOrderedAckPending is the most events an ordered Subscription holds
// unacknowledged at once (delivered, waiting behind their key, or in
// retry), whatever its maxInFlightMessages.
const MaxOrderedAckPending = 4000

// Defaults of the delivery settings.
const (
	DefaultMaxInFlightMessages = 10
	DefaultMaxDeliver          = 10
	DefaultBackoffInitial      = time.Second
	DefaultBackoffMax          = 60 * time.Second
	DefaultDeadLetter          = true
	DefaultMaxBacklog          = 100000
	DefaultMaxBacklogBytes     = 64 << 20
)

// Caps on the delivery settings, so that no Subscription holds more of the
// shared event bridge than its share: each event in flight holds a
// goroutine, a request and its data in every dispatcher replica (and
// maxInFlightMessages is JetStream's MaxAckPending and the size of a pull),
// and a backlog holds the shared event stream. The CRD refuses values above
// them, as ParseDeliveryOver does. Kyma sets no maximum; its JetStream
// backend keeps at most 1,000,000 events per subject and makes 100
// attempts.
const (
	MaxMaxInFlightMessages = 1000
	MaxMaxDeliver          = 100
	MaxMaxBacklog          = 1000000
	MaxMaxBacklogBytes     = 4 << 30
)

// MinBackoff is the shortest backoffInitial (and so backoffMax): with
// maxDeliver's 100 attempts an event then retries for at least a second,
// and a Subscription makes at most maxInFlightMessages attempts per 10 ms,
// where a backoff of 1 ns made 100,000 attempts in 7 s. (Knative asks only
// for a positive backoffDelay; Kyma sets no backoff per Subscription.)
const MinBackoff = 10 * time.Millisecond

// minMaxBacklogBytes is the smallest maxBacklogBytes: one event of the
// largest a stream takes by default (2 MiB).
const minMaxBacklogBytes = 2 << 20

// ErrInvalidConfig is wrapped by every error about spec.config.
var ErrInvalidConfig = errors.New("invalid spec.config")

// Delivery is a Subscription's parsed delivery settings.
type Delivery struct {
	// MaxInFlight is the most unacknowledged events at once (>= 1).
	MaxInFlight int
	// MaxDeliver is the most delivery attempts per event (>= 1).
	MaxDeliver int
	// BackoffInitial is the first redelivery delay (> 0).
	BackoffInitial time.Duration
	// BackoffMax caps the redelivery delay (>= BackoffInitial).
	BackoffMax time.Duration
	// DeadLetter keeps events that ran out of attempts.
	DeadLetter bool
	// MaxBacklog is the most events that may wait for the Subscription
	// (>= MaxInFlight); the oldest past it are given up.
	MaxBacklog int
	// MaxBacklogBytes is the most bytes of events that may wait for the
	// Subscription; the oldest past it are given up.
	MaxBacklogBytes int64
	// Ordered delivers the events of one partitionkey in order
	// (ConfigOrdering).
	Ordered bool
}

// AckPending is the most events the Subscription's consumer hands out
// unacknowledged (JetStream's MaxAckPending): maxInFlightMessages, and
// for an ordered Subscription OrderedAckPendingFactor times as many (at
// most MaxOrderedAckPending), of which maxInFlightMessages are in
// delivery at once and the others wait behind their key.
func (d Delivery) AckPending() int {
	if !d.Ordered {
		return d.MaxInFlight
	}
	return min(d.MaxInFlight*OrderedAckPendingFactor, MaxOrderedAckPending)
}

// DefaultDelivery returns the settings of a Subscription with no config.
func DefaultDelivery() Delivery {
	return Delivery{
		MaxInFlight:     DefaultMaxInFlightMessages,
		MaxDeliver:      DefaultMaxDeliver,
		BackoffInitial:  DefaultBackoffInitial,
		BackoffMax:      DefaultBackoffMax,
		DeadLetter:      DefaultDeadLetter,
		MaxBacklog:      DefaultMaxBacklog,
		MaxBacklogBytes: DefaultMaxBacklogBytes,
	}
}

// Validate reports the first setting out of range, naming its spec.config
// key; the error wraps ErrInvalidConfig. Every Delivery that
// ParseDeliveryOver returns is valid; Validate is for defaults from elsewhere (flags).
func (d Delivery) Validate() error {
	switch {
	case d.MaxInFlight < 1 || d.MaxInFlight > MaxMaxInFlightMessages:
		return fmt.Errorf("%w: %s must be between 1 and %d, not %d", ErrInvalidConfig, ConfigMaxInFlightMessages, MaxMaxInFlightMessages, d.MaxInFlight)
	case d.MaxDeliver < 1 || d.MaxDeliver > MaxMaxDeliver:
		return fmt.Errorf("%w: %s must be between 1 and %d, not %d", ErrInvalidConfig, ConfigMaxDeliver, MaxMaxDeliver, d.MaxDeliver)
	case d.MaxBacklog > MaxMaxBacklog:
		return fmt.Errorf("%w: %s must be at most %d, not %d", ErrInvalidConfig, ConfigMaxBacklog, MaxMaxBacklog, d.MaxBacklog)
	case d.MaxBacklogBytes < minMaxBacklogBytes || d.MaxBacklogBytes > MaxMaxBacklogBytes:
		return fmt.Errorf("%w: %s must be between %d and %d, not %d", ErrInvalidConfig, ConfigMaxBacklogBytes, minMaxBacklogBytes, int64(MaxMaxBacklogBytes), d.MaxBacklogBytes)
	case d.BackoffInitial < MinBackoff:
		return fmt.Errorf("%w: %s must be at least %s, not %s", ErrInvalidConfig, ConfigBackoffInitial, MinBackoff, d.BackoffInitial)
	case d.BackoffMax < d.BackoffInitial:
		return fmt.Errorf("%w: %s (%s) must not be less than %s (%s)",
			ErrInvalidConfig, ConfigBackoffMax, d.BackoffMax, ConfigBackoffInitial, d.BackoffInitial)
	case d.MaxBacklog < d.MaxInFlight:
		return fmt.Errorf("%w: %s (%d) must not be less than %s (%d)",
			ErrInvalidConfig, ConfigMaxBacklog, d.MaxBacklog, ConfigMaxInFlightMessages, d.MaxInFlight)
	}
	return nil
}

// Delivery parses spec.config over the defaults. The error wraps
// ErrInvalidConfig and names the key and what it must be.
func (s *Subscription) Delivery() (Delivery, error) {
	return ParseDeliveryOver(DefaultDelivery(), s.Spec.Config)
}

// DeliveryOver parses spec.config over the given defaults (an operator's
// choice instead of DefaultDelivery), as Delivery does.
func (s *Subscription) DeliveryOver(defaults Delivery) (Delivery, error) {
	return ParseDeliveryOver(defaults, s.Spec.Config)
}

// ParseDeliveryOver parses a spec.config map over defaults, which must be
// valid (see Delivery.Validate); a key the map does not set keeps its
// default, and keys it does not know are ignored (the CRD refuses unknown
// keys; Kyma's EventMesh keys pass). The result is checked as a whole, so a backoffInitial set above
// the default backoffMax is refused.
func ParseDeliveryOver(defaults Delivery, config map[string]ConfigValue) (Delivery, error) {
	d := defaults
	var err error
	if v, ok := config[ConfigMaxInFlightMessages]; ok {
		if d.MaxInFlight, err = boundedInt(ConfigMaxInFlightMessages, string(v), MaxMaxInFlightMessages); err != nil {
			return Delivery{}, err
		}
	}
	if v, ok := config[ConfigMaxDeliver]; ok {
		if d.MaxDeliver, err = boundedInt(ConfigMaxDeliver, string(v), MaxMaxDeliver); err != nil {
			return Delivery{}, err
		}
	}
	if v, ok := config[ConfigBackoffInitial]; ok {
		if d.BackoffInitial, err = backoff(ConfigBackoffInitial, string(v)); err != nil {
			return Delivery{}, err
		}
	}
	if v, ok := config[ConfigBackoffMax]; ok {
		if d.BackoffMax, err = backoff(ConfigBackoffMax, string(v)); err != nil {
			return Delivery{}, err
		}
	}
	if v, ok := config[ConfigMaxBacklog]; ok {
		if d.MaxBacklog, err = boundedInt(ConfigMaxBacklog, string(v), MaxMaxBacklog); err != nil {
			return Delivery{}, err
		}
	} else if d.MaxBacklog < d.MaxInFlight {
		// A default budget never refuses a Kyma manifest with a large
		// maxInFlightMessages: it grows to hold what may be in flight.
		d.MaxBacklog = d.MaxInFlight
	}
	if v, ok := config[ConfigMaxBacklogBytes]; ok {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < minMaxBacklogBytes || n > MaxMaxBacklogBytes {
			return Delivery{}, fmt.Errorf("%w: %s must be a stringified int value between %d and %d, not %q", ErrInvalidConfig, ConfigMaxBacklogBytes, minMaxBacklogBytes, int64(MaxMaxBacklogBytes), v)
		}
		d.MaxBacklogBytes = n
	}
	if err := d.Validate(); err != nil {
		return Delivery{}, err
	}
	if v, ok := config[ConfigOrdering]; ok {
		switch v {
		case OrderingNone:
			d.Ordered = false
		case OrderingPartitionKey:
			d.Ordered = true
		default:
			return Delivery{}, fmt.Errorf("%w: %s must be %q or %q, not %q", ErrInvalidConfig, ConfigOrdering, OrderingNone, OrderingPartitionKey, v)
		}
	}
	if v, ok := config[ConfigDeadLetter]; ok {
		switch v {
		case "true":
			d.DeadLetter = true
		case "false":
			d.DeadLetter = false
		default:
			return Delivery{}, fmt.Errorf("%w: %s must be \"true\" or \"false\", not %q", ErrInvalidConfig, ConfigDeadLetter, v)
		}
	}
	return d, nil
}

// Backoff returns the delay before redelivery after the given number of
// failed attempts (1 for the first failure), without jitter: BackoffInitial
// doubled per further attempt, capped at BackoffMax.
func (d Delivery) Backoff(failures int) time.Duration {
	delay := d.BackoffInitial
	for i := 1; i < failures && delay < d.BackoffMax; i++ {
		delay *= 2
	}
	return min(delay, d.BackoffMax)
}

func boundedInt(key, v string, most int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("%w: %s must be a stringified int value between 1 and %d, not %q", ErrInvalidConfig, key, most, v)
	}
	return n, nil
}

func backoff(key, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < MinBackoff {
		return 0, fmt.Errorf("%w: %s must be a duration of at least %s such as 1s or 5m, not %q", ErrInvalidConfig, key, MinBackoff, v)
	}
	return d, nil
}
