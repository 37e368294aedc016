package dispatcher

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/pull"
	"github.com/kfn-dev/kfn/internal/egress"
)

// Defaults of Config.
const (
	DefaultRequestTimeout = 60 * time.Second
	DefaultMaxHops        = admission.DefaultMaxHops
	DefaultJitter         = 0.2
	DefaultMaxReplyBytes  = 1 << 20
	DefaultPullExpiry     = 30 * time.Second
	DefaultBudgetInterval = 2 * time.Second
	DefaultShutdownGrace  = 10 * time.Second

	DefaultMaxHeldBytes                = 256 << 20
	DefaultMaxHeldBytesPerSubscription = 16 << 20

	// DefaultNamespaceMaxBacklog is the default Config.NamespaceMaxBacklog:
	// what one Subscription may ask for at most.
	DefaultNamespaceMaxBacklog = v1alpha2.MaxMaxBacklog
	// NamespaceShareOfStream divides the event stream's MaxBytes into the
	// default Config.NamespaceMaxBacklogBytes: 16 namespaces at their
	// total fill the stream, 15 leave a 16th of it to the others (64 MiB
	// of the default 1 GiB).
	NamespaceShareOfStream = 16

	// DefaultSlotsPerCPU is Config.DeliverySlots by default, per CPU the
	// process may use (GOMAXPROCS).
	DefaultSlotsPerCPU = 16
	DefaultSlotTime    = 2 * time.Millisecond
	// DefaultDeliverySlotsPerNamespace is
	// Config.DeliverySlotsPerNamespace by default.
	DefaultDeliverySlotsPerNamespace = 4

	// DefaultRetryRatePerNamespace and DefaultRetryBurstPerNamespace are
	// Config.RetryRatePerNamespace and RetryBurstPerNamespace by default:
	// a namespace's sinks failing at once (1,000 in flight) retry without
	// waiting once; a namespace retrying faster than 500 a second waits.
	DefaultRetryRatePerNamespace  = 500
	DefaultRetryBurstPerNamespace = 1000

	// DefaultStreamingConsumersPerNamespace and DefaultConsumerTurn are
	// Config.StreamingConsumersPerNamespace and ConsumerTurn by default.
	DefaultStreamingConsumersPerNamespace = 8
	DefaultConsumerTurn                   = pull.DefaultTurn

	// DefaultLogLinesPerNamespace is Config.LogLinesPerNamespace by
	// default.
	DefaultLogLinesPerNamespace = 10

	// DefaultMaxInFlight and DefaultMaxInFlightPerNamespace are
	// Config.MaxInFlight and MaxInFlightPerNamespace by default: a
	// namespace as many as one Subscription may have (maxInFlightMessages
	// at most 1,000), four namespaces at it fill the total (about 40 KiB
	// each, a connection and its goroutines: 160 MiB).
	DefaultMaxInFlight             = 4096
	DefaultMaxInFlightPerNamespace = v1alpha2.MaxMaxInFlightMessages
)

// MinPullExpiry is the shortest Config.PullExpiry.
const MinPullExpiry = 100 * time.Millisecond

// ErrInvalidOption is wrapped by errors about options of New.
var ErrInvalidOption = errors.New("invalid dispatcher option")

// Config configures a Dispatcher. A zero field means its default.
type Config struct {
	// Streams names the event and dead-letter streams.
	Streams stream.Config
	// RequestTimeout bounds one delivery request: a request is given up
	// after at least RequestTimeout and at most a 64th of it more (requests
	// that start together share their deadline). Default 60s.
	RequestTimeout time.Duration
	// MaxHops bounds reply chains: a reply whose hop count would exceed it
	// is dropped. Default 16 (admission.DefaultMaxHops).
	MaxHops int
	// Reserved keeps sources for some namespaces (admission.Reservation):
	// the reply of a sink whose Subscription is of another namespace is
	// dropped, as the publisher refuses their events. The publisher's
	// reservations.
	Reserved []admission.Reservation
	// LegacyPrefix is the prefix of Kyma's legacy event types, for the
	// reservations (default v1alpha2.DefaultLegacyPrefix). The publisher's.
	LegacyPrefix string
	// Jitter is the random part of each backoff, a fraction in [0,1].
	// Default 0.2; negative means none.
	Jitter float64
	// MaxReplyBytes bounds a sink's CloudEvent reply. Default 1 MiB.
	MaxReplyBytes int64
	// PullExpiry is how long one pull request waits on the server (each
	// drawn from its last quarter). An idle Subscription costs one request
	// per expiry; a request the server lost without telling is asked again
	// within about a quarter of it more. A deleted consumer is noticed at
	// once. Default 30s.
	PullExpiry time.Duration
	// BudgetInterval is how often the backlog of a Subscription whose
	// sink failed or is not ready is read (one consumer info request) to
	// hold it to its maxBacklog. Default 2s.
	BudgetInterval time.Duration
	// ShutdownGrace bounds how long Start, once its context ends, waits
	// for deliveries in flight; past it they end (their events come again
	// after the ack wait), so that a sink that never answers cannot hold
	// up a restart of the shared dispatcher. Default 10s.
	ShutdownGrace time.Duration
	// MaxHeldBytes bounds the bytes of the events the dispatcher holds at
	// once (from their arrival to their settling, those waiting for a
	// retry included); past it, it asks for no more until some are
	// settled. MaxHeldBytesPerSubscription bounds one Subscription's
	// share, so that one with large events or a slow sink cannot take it
	// all, and a namespace holding a quarter of MaxHeldBytes or more
	// shares the other three quarters with every other such namespace,
	// the last quarter kept for namespaces holding less, so that one
	// namespace's many Subscriptions cannot take it all either. A
	// Subscription whose namespace holds nothing may take one event of
	// any size.
	// The CloudEvent replies of its sink count too, from their headers to
	// the last byte read until they are stored: a reply that does not fit
	// fails its attempt (retried), unless its event is all the
	// Subscription holds. Defaults 256 MiB and 16 MiB; negative means no
	// bound.
	MaxHeldBytes, MaxHeldBytesPerSubscription int64
	// Egress says which addresses deliveries may reach (package egress);
	// the zero value refuses loopback among others. It holds for the
	// default transport (NewTransport).
	Egress egress.Policy
	// DeliverySlots is how many events' turns (an attempt, and what
	// settles it: storing the sink's reply, acknowledging, retrying,
	// dead-lettering) run at once, shared fairly among namespaces: a
	// namespace alone may use all but a quarter kept for namespaces that
	// run few, and when turns wait, each slot that frees goes to the
	// waiting namespace that runs the fewest, so that one namespace's
	// fan-out, retries, large events or replies wait behind its own
	// work, not in front of another's (package slots). SlotTime bounds how
	// long a turn holds its slot (one to two of it; a sink that is slower
	// keeps none from the others, and the turn takes one again once it
	// answered). Defaults DefaultSlotsPerCPU per GOMAXPROCS and 2ms;
	// negative DeliverySlots means no bound.
	DeliverySlots int
	SlotTime      time.Duration
	// DeliverySlotsPerNamespace holds each namespace to this many turns
	// at once while another namespace is active (has turns waiting or
	// had a slot in the last slots.ActiveSlotTimes SlotTimes); a
	// namespace alone takes what DeliverySlots allows. A fan-out's or a
	// reply storm's deliveries so run a few at a time beside another
	// namespace's, not all at once (slots.WithPerNamespace). Turns whose
	// sink works past their SlotTimes give their slot back, so it bounds
	// deliveries to fast sinks only. Default
	// DefaultDeliverySlotsPerNamespace; negative: no bound.
	DeliverySlotsPerNamespace int
	// RetryRatePerNamespace bounds the retries all of one namespace's
	// Subscriptions make a second (bursts of RetryBurstPerNamespace): past
	// it, a failed delivery's next attempt waits for its namespace's turn
	// beyond its backoff, so that a namespace's failing sinks cost its own
	// events time, not the other namespaces' the dispatcher's and NATS's
	// work (100 in flight at the shortest backoff made 8,000 attempts a
	// second). Defaults DefaultRetryRatePerNamespace and
	// DefaultRetryBurstPerNamespace; a negative rate means no bound.
	RetryRatePerNamespace  float64
	RetryBurstPerNamespace int
	// StreamingConsumersPerNamespace bounds how many of one namespace's
	// Subscriptions' consumers are pulled for their whole
	// maxInFlightMessages at once: NATS's work grows with the consumers
	// that are handed events (each one's state is written to a file up to
	// ten times a second), so a namespace with 100 busy Subscriptions
	// cost the others ten times what one with 5 did for as many events.
	// Past the bound a consumer is asked for one event, then waits for
	// its turn, which the consumers of its namespace hand on after
	// ConsumerTurn while others wait, shorter when more than 16 x the
	// bound wait (a round of turns then lasts about 16 ConsumerTurns; no
	// turn shorter than 10 ms), or when they pause (package pull's
	// turns). The bound holds while another namespace has Subscriptions
	// (from their start, whether or not they are sent events): the only
	// namespace with Subscriptions has nobody's NATS work to spare, and
	// each of its busy consumers (handed two events within a ConsumerTurn;
	// one sent an event now and then is asked for one event at a time) is
	// lent a turn, asking for no more than a
	// ConsumerTurn's worth at once so that the loans end within one when
	// another namespace's Subscription starts.
	// Defaults
	// DefaultStreamingConsumersPerNamespace and DefaultConsumerTurn; a
	// negative bound means none.
	StreamingConsumersPerNamespace int
	ConsumerTurn                   time.Duration
	// LogLinesPerNamespace bounds the lines the events of one namespace
	// log a second (a failing sink's dead letters, replies dropped), in
	// bursts of ten seconds' worth: past it they are dropped, and the
	// namespace's next line says how many were (droppedLines), so that one
	// namespace's thousands of failing events a second do not fill the
	// log every namespace's lines are in. Default
	// DefaultLogLinesPerNamespace; negative means no bound.
	LogLinesPerNamespace float64
	// MaxInFlight bounds the deliveries in flight (sent, their sinks'
	// answers not yet read) of all Subscriptions, MaxInFlightPerNamespace
	// those of one namespace's: each holds a connection, goroutines and
	// buffers, and a namespace's Subscriptions may each have up to 1,000
	// in flight, so that without them one namespace's sinks that never
	// answer took the dispatcher's descriptors and memory. Past a bound an
	// attempt waits, within its request timeout, for a delivery to end;
	// each that ends goes to the namespace waiting that has the fewest in
	// flight. Defaults DefaultMaxInFlight and
	// DefaultMaxInFlightPerNamespace; a negative MaxInFlight means no
	// bound.
	MaxInFlight, MaxInFlightPerNamespace int
	// Delivery holds the delivery settings of the spec.config keys a
	// Subscription does not set (retries, backoff, dead-lettering); it must
	// match the stream.ConsumerSettings.Defaults the consumers were made
	// with. The zero value means v1alpha2.DefaultDelivery(), and a zero
	// MaxBacklogBytes v1alpha2.DefaultMaxBacklogBytes.
	Delivery v1alpha2.Delivery
	// NamespaceMaxBacklog and NamespaceMaxBacklogBytes bound the backlog
	// of all of one namespace's Subscriptions together, in events and in
	// bytes (each Subscription's backlog counted, so that an event waiting
	// for three of them counts three times: a namespace's fan-out costs
	// its own total). Past either, the namespace's oldest waiting events
	// are given up as over a Subscription's budget, and never another
	// namespace's; a Subscription's own maxBacklog and maxBacklogBytes
	// are held to them, so that no spec.config asks for more of the
	// shared event stream than its namespace may hold. Defaults
	// DefaultNamespaceMaxBacklog and the event stream's MaxBytes divided
	// by NamespaceShareOfStream (v1alpha2.MaxMaxBacklogBytes for a stream
	// without a limit); the bytes must not be above the stream's MaxBytes
	// nor below its MaxMsgSize.
	NamespaceMaxBacklog      int
	NamespaceMaxBacklogBytes int64
}

// admission is the policy replies are held to.
func (c *Config) admission() admission.Policy {
	return admission.Policy{Reserved: c.Reserved, LegacyPrefix: c.LegacyPrefix, MaxHops: c.MaxHops}
}

func (c *Config) defaults() error {
	if err := c.Streams.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	if c.RequestTimeout < 0 || c.MaxHops < 0 || c.MaxReplyBytes < 0 || c.PullExpiry < 0 || c.Jitter > 1 {
		return fmt.Errorf("%w: negative duration, size or hop limit, or jitter above 1", ErrInvalidOption)
	}
	policy := c.admission()
	if err := policy.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	if c.PullExpiry != 0 && c.PullExpiry < MinPullExpiry {
		return fmt.Errorf("%w: pull expiry %s is below %s", ErrInvalidOption, c.PullExpiry, MinPullExpiry)
	}
	if c.Delivery == (v1alpha2.Delivery{}) {
		c.Delivery = v1alpha2.DefaultDelivery()
	}
	if c.Delivery.MaxBacklogBytes == 0 {
		c.Delivery.MaxBacklogBytes = v1alpha2.DefaultMaxBacklogBytes
	}
	if err := c.Delivery.Validate(); err != nil {
		return fmt.Errorf("%w: delivery defaults: %w", ErrInvalidOption, err)
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxHops == 0 {
		c.MaxHops = DefaultMaxHops
	}
	if c.Jitter == 0 {
		c.Jitter = DefaultJitter
	}
	if c.Jitter < 0 {
		c.Jitter = 0
	}
	if c.MaxReplyBytes == 0 {
		c.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if c.PullExpiry == 0 {
		c.PullExpiry = DefaultPullExpiry
	}
	if c.BudgetInterval < 0 {
		return fmt.Errorf("%w: negative budget interval", ErrInvalidOption)
	}
	if c.BudgetInterval == 0 {
		c.BudgetInterval = DefaultBudgetInterval
	}
	if c.MaxHeldBytes == 0 {
		c.MaxHeldBytes = DefaultMaxHeldBytes
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.MaxHeldBytesPerSubscription == 0 {
		c.MaxHeldBytesPerSubscription = DefaultMaxHeldBytesPerSubscription
	}
	if err := c.sharesDefaults(); err != nil {
		return err
	}
	return c.namespaceDefaults()
}

// sharesDefaults sets and checks what shares the dispatcher's work among
// namespaces: delivery slots, retry turns, consumer turns, log lines.
func (c *Config) sharesDefaults() error {
	if c.SlotTime < 0 {
		return fmt.Errorf("%w: negative slot time", ErrInvalidOption)
	}
	if c.DeliverySlots == 0 {
		c.DeliverySlots = DefaultSlotsPerCPU * runtime.GOMAXPROCS(0)
	}
	if c.SlotTime == 0 {
		c.SlotTime = DefaultSlotTime
	}
	if c.DeliverySlotsPerNamespace == 0 {
		c.DeliverySlotsPerNamespace = DefaultDeliverySlotsPerNamespace
	}
	if c.RetryRatePerNamespace == 0 {
		c.RetryRatePerNamespace = DefaultRetryRatePerNamespace
	}
	if c.RetryBurstPerNamespace < 0 {
		return fmt.Errorf("%w: negative retry burst per namespace", ErrInvalidOption)
	}
	if c.RetryBurstPerNamespace == 0 {
		c.RetryBurstPerNamespace = DefaultRetryBurstPerNamespace
	}
	if c.StreamingConsumersPerNamespace == 0 {
		c.StreamingConsumersPerNamespace = DefaultStreamingConsumersPerNamespace
	}
	if c.ConsumerTurn < 0 {
		return fmt.Errorf("%w: negative consumer turn", ErrInvalidOption)
	}
	if c.ConsumerTurn == 0 {
		c.ConsumerTurn = DefaultConsumerTurn
	}
	if c.LogLinesPerNamespace == 0 {
		c.LogLinesPerNamespace = DefaultLogLinesPerNamespace
	}
	if c.MaxInFlightPerNamespace < 0 {
		return fmt.Errorf("%w: negative deliveries in flight per namespace", ErrInvalidOption)
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxInFlightPerNamespace == 0 {
		c.MaxInFlightPerNamespace = DefaultMaxInFlightPerNamespace
	}
	return nil
}

// namespaceDefaults sets and checks the namespace totals.
func (c *Config) namespaceDefaults() error {
	if c.NamespaceMaxBacklog == 0 {
		c.NamespaceMaxBacklog = DefaultNamespaceMaxBacklog
	}
	if c.NamespaceMaxBacklogBytes == 0 {
		c.NamespaceMaxBacklogBytes = v1alpha2.MaxMaxBacklogBytes
		if c.Streams.MaxBytes > 0 {
			// At least one event of the largest size, at most the stream.
			c.NamespaceMaxBacklogBytes = min(max(c.Streams.MaxBytes/NamespaceShareOfStream, int64(c.Streams.MaxMsgSize)), c.Streams.MaxBytes)
			if c.Streams.MaxMsgSize < 0 {
				c.NamespaceMaxBacklogBytes = c.Streams.MaxBytes / NamespaceShareOfStream
			}
		}
	}
	largest := int64(c.Streams.MaxMsgSize)
	if c.Streams.MaxBytes > 0 && (largest < 0 || largest > c.Streams.MaxBytes) {
		largest = c.Streams.MaxBytes
	}
	switch {
	case c.NamespaceMaxBacklog < 1:
		return fmt.Errorf("%w: a namespace's total backlog must be at least 1 event, not %d", ErrInvalidOption, c.NamespaceMaxBacklog)
	case c.Streams.MaxBytes > 0 && c.NamespaceMaxBacklogBytes > c.Streams.MaxBytes:
		return fmt.Errorf("%w: a namespace's total backlog (%d bytes) must not be above the event stream's max bytes (%d)",
			ErrInvalidOption, c.NamespaceMaxBacklogBytes, c.Streams.MaxBytes)
	case c.NamespaceMaxBacklogBytes < max(largest, 1):
		return fmt.Errorf("%w: a namespace's total backlog (%d bytes) must hold at least one event of the stream's largest (%d bytes)",
			ErrInvalidOption, c.NamespaceMaxBacklogBytes, largest)
	}
	return nil
}
