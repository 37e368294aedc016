package dispatcher

import (
	"net/http"
	"time"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/delivery"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/observe"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/schedule"
	"github.com/kfn-dev/kfn/internal/egress"
)

// The names of the parts' API that callers of the dispatcher use, so
// that they import this package only.

// Where a sink is and whether it is ready (package delivery, schedule).
type (
	// Resolver maps a Subscription's sink to the URL the dispatcher POSTs to.
	Resolver = delivery.Resolver
	// ResolverFunc adapts a function to Resolver.
	ResolverFunc = delivery.ResolverFunc
	// Endpoints tells whether a sink Service can take requests now.
	Endpoints = schedule.Endpoints
	// AlwaysReady is an Endpoints for which every Service is always ready.
	AlwaysReady = schedule.AlwaysReady
	// Waking is what an Endpoints may also tell: a Service without a
	// ready endpoint is being given one now, and its events are pulled
	// ahead of it.
	Waking = schedule.Waking
)

// DirectResolver delivers to the sink URL as written.
var DirectResolver = delivery.DirectResolver

// NewTransport returns the HTTP transport the dispatcher uses by default
// (delivery.NewTransport): connections only to the addresses policy lets
// deliveries reach.
func NewTransport(policy egress.Policy) *http.Transport { return delivery.NewTransport(policy) }

// MaxResponseHeaderBytes bounds the headers of a sink's answer.
const MaxResponseHeaderBytes = delivery.MaxResponseHeaderBytes

// What an attempt's answer leads to (package delivery).
type Verdict = delivery.Verdict

// The verdicts.
const (
	Done   = delivery.Done
	Retry  = delivery.Retry
	GiveUp = delivery.GiveUp
)

// MaxRetryAfter caps the delay a sink can ask for with Retry-After.
const MaxRetryAfter = delivery.MaxRetryAfter

// Judge returns the verdict for an HTTP status (delivery.Judge).
func Judge(status int) Verdict { return delivery.Judge(status) }

// RetryAfter parses a Retry-After header (delivery.RetryAfter).
func RetryAfter(value string, now time.Time) time.Duration { return delivery.RetryAfter(value, now) }

// RedeliveryDelay is the delay before the next attempt
// (delivery.RedeliveryDelay).
func RedeliveryDelay(d v1alpha2.Delivery, failures int, jitter float64, retryAfter time.Duration) time.Duration {
	return delivery.RedeliveryDelay(d, failures, jitter, retryAfter)
}

// What becomes of each event (package observe).
type (
	// Outcome is what became of an event at one step of its delivery.
	Outcome = observe.Outcome
	// EventRef names a CloudEvent by its attributes.
	EventRef = observe.EventRef
	// Step is one step of an event's delivery to a Subscription.
	Step = observe.Step
	// Observer is told every Step of every delivery.
	Observer = observe.Observer
	// ObserverFunc adapts a function to Observer.
	ObserverFunc = observe.ObserverFunc
	// Counts are a Subscription's delivery counts.
	Counts = observe.Counts
)

// The outcomes of a Step.
const (
	Delivered    = observe.Delivered
	Failed       = observe.Failed
	DeadLettered = observe.DeadLettered
	Discarded    = observe.Discarded
)

// Buckets of the histograms, in seconds (observe.DeliveryDurationBuckets,
// observe.EventAgeBuckets).
var (
	DeliveryDurationBuckets = observe.DeliveryDurationBuckets
	EventAgeBuckets         = observe.EventAgeBuckets
)
