package eventbridge

import (
	"errors"
	"fmt"
	"slices"
	"time"

	v1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/activation"
	"github.com/kfn-dev/kfn/contract/claim"
	"github.com/kfn-dev/kfn/contract/inflight"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/applications"
	"github.com/kfn-dev/kfn/eventbridge/depcache"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/eventbridge/httproute"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/replay"
	"github.com/kfn-dev/kfn/eventbridge/sharedrates"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
)

// Components the event bridge can run.
const (
	ComponentPublisher  = "publisher"
	ComponentDispatcher = "dispatcher"
	// ComponentReconciler is the Subscription reconciler; it needs
	// Kubernetes.
	ComponentReconciler = "reconciler"
	// ComponentGateway is the synchronous HTTP gateway to Functions (see
	// package gateway).
	ComponentGateway = "gateway"
)

// ErrInvalidConfig is wrapped by every error of Config.Validate and
// Process.Validate.
var ErrInvalidConfig = errors.New("invalid event bridge configuration")

// Config is every setting of the event bridge's parts, the same wherever
// they run (a process of their own, kfn dev, a benchmark): New reads it.
// DefaultConfig has working values; Process.RegisterFlags documents each
// one as a flag.
type Config struct {
	// Components to run: publisher, dispatcher, reconciler, gateway.
	Components []string
	// Streams configures the event and dead-letter streams.
	Streams stream.Config
	// AckWait is the consumers' ack wait: how soon another replica takes
	// over the events of a dispatcher that died.
	AckWait time.Duration
	// Publisher configures the publisher.
	Publisher publisher.Config
	// KymaApplications makes the publisher route the events of Kyma
	// Applications by their application-type label, as Kyma's publisher
	// does, once the Application CRD is served (looked for every
	// ApplicationCheckInterval until then). Needs Kubernetes.
	KymaApplications bool
	// ApplicationCheckInterval is how often the Application CRD is looked
	// for until it is served.
	ApplicationCheckInterval time.Duration
	// Dispatcher configures the dispatcher. Its Streams are set from
	// Streams; its Delivery are also the consumers' defaults (one setting
	// for both, so that they cannot disagree); a Jitter of 0 means none.
	// Its Egress is also where the gateway and the wake probes may reach
	// Functions (in a cluster, never the API server).
	Dispatcher dispatcher.Config
	// Gateway tunes the gateway (HoldTimeout, MaxHeld, MaxHeldPerNamespace, MaxInFlightPerNamespace; Source names the
	// reporter of its in-flight counts). Its Egress is Dispatcher's.
	Gateway gateway.Config
	// ServeAPIRules has the gateway serve the Environment's APIRules and
	// write their status, when it has them (a cluster's: see
	// APIRuleServer); Process.ExposeListen is where their hosts are
	// served.
	ServeAPIRules bool
	// APIRoutes, when set, has the Environment's APIRules written as
	// HTTPRoutes of this Gateway (Gateway API) instead of served by the
	// gateway (package httproute); with ServeAPIRules.
	APIRoutes *httproute.Parent
	// GatewayInFlightSubject is the core NATS subject on which the gateway
	// reports its in-flight requests to the scalers, unless the host gives
	// another reporter (WithInFlight).
	GatewayInFlightSubject string
	// RatesSubject is the core NATS subject on which the event bridge
	// replicas tell each other what each namespace took of its events and
	// bytes a second (publishes and sinks' replies), so that the bound is
	// the namespace's across replicas (package sharedrates); "" holds each
	// replica's bound alone.
	RatesSubject string
	// Resolve maps sink Services, as "<service>.<namespace>", to base URLs
	// to deliver to instead of the cluster DNS name (for running outside a
	// cluster). Unlisted sinks are delivered to as written.
	Resolve map[string]string
	// Resync is how often each Subscription is reconciled without change.
	Resync time.Duration
	// SubscriptionLimits bound one namespace's Subscriptions that get a
	// consumer, all of them and those of one event type; zero fields mean
	// their defaults, a 100th of the event stream's consumers and
	// subscription.DefaultMaxSubscriptionsPerType.
	SubscriptionLimits subscription.Limits
	// WakeProbeInterval is how often the dispatcher and the gateway ask a
	// pod of a Function woken from zero whether its host has loaded the
	// handler, before the kubelet's readiness probe says so (package
	// endpoints, WithProbeInterval); 0 leaves it to the EndpointSlices.
	WakeProbeInterval time.Duration
	// Claims has the first event or request for a Function at zero claim
	// a standby pod of the warm pool at once (package contract/claim).
	Claims ClaimsConfig
	// ReplaySweep is how often consumers whose replays settled lose their
	// replay subject (package replay).
	ReplaySweep time.Duration
	// Admin makes the dead-letter admin API (Bridge.DeadLetters), whose
	// replays the bridge then sweeps.
	Admin bool
	// EventPaths is how many recent events of each namespace the admin
	// API keeps the paths of (Bridge.EventPaths, for kfn trace), when the
	// admin API and the dispatcher run; 0 keeps none.
	EventPaths int
	// EventPathsNamespaces is how many namespaces' paths are kept at
	// once, the least recently active forgotten first.
	EventPathsNamespaces int
	// EventPathsSubject is the core NATS subject on which a replica asks
	// the others for their record of a namespace, so that each answers
	// every path; empty: each answers from its own record only.
	EventPathsSubject string
	// DependencyCache makes the dependency cache (Bridge.DependencyCache,
	// package depcache), served on the publisher's listener, when the
	// publisher runs and the bridge can tell a caller's namespace
	// (Access.Senders); otherwise its routes answer 404 and pods install
	// their dependencies themselves. Its objects are in the bucket
	// Streams.DependencyBucket.
	DependencyCache bool
	// DependencyCacheBounds bounds it.
	DependencyCacheBounds depcache.Config
}

// ClaimsConfig configures the claims of standby pods: a request that
// finds a Function without a ready endpoint (the gateway's), and each
// activation the scalers publish (the first event for a Function at
// zero), ask the controller's leader for a standby pod, and the pod's
// address is a ready endpoint of the Function from the answer on, until
// its EndpointSlice lists it (package endpoints, WithClaimer).
type ClaimsConfig struct {
	// Controller is the DNS name of the controller's headless claims
	// Service, each of whose addresses is tried (only the leader
	// listens); empty: no claims (a Function at zero wakes once KEDA
	// scaled its Deployment).
	Controller string
	// Port is the controller's claim port.
	Port int
	// TokenFile holds the event bridge's ServiceAccount token for kfn's
	// audience (a projected token, read again at each claim).
	TokenFile string
	// ActivationSubject is the core NATS subject of the scalers'
	// activations (package contract/activation); empty: only the
	// gateway's requests claim.
	ActivationSubject string
	// ClaimedSubject is the core NATS subject on which the bridge says
	// that the claim an activation started has ended (package
	// contract/activation), for the scalers to tell KEDA then; empty:
	// nothing is said (the scalers tell KEDA after their claim hold).
	ClaimedSubject string
	// Hold is how long a claimed pod's address is taken as ready before
	// its EndpointSlice lists it (0: endpoints.DefaultClaimHold).
	Hold time.Duration
}

// DefaultConfig returns working defaults: every component but the gateway,
// the admin API on.
func DefaultConfig() Config {
	return Config{
		Components: []string{ComponentPublisher, ComponentDispatcher, ComponentReconciler},
		Streams:    stream.DefaultConfig(),
		AckWait:    stream.DefaultAckWait,
		Publisher: publisher.Config{MaxRequestBytes: publisher.DefaultMaxRequestBytes, StoreTimeout: publisher.DefaultStoreTimeout, LegacyPrefix: v1alpha2.DefaultLegacyPrefix, LegacySource: publisher.DefaultLegacySource, SenderRate: publisher.DefaultSenderRate, SenderBytesRate: publisher.DefaultSenderBytesRate,
			MaxPublishing: publisher.DefaultMaxPublishing, PublishingPerNamespace: publisher.DefaultPublishingPerNamespace},
		KymaApplications:         true,
		ApplicationCheckInterval: applications.DefaultCheckInterval,
		Dispatcher: dispatcher.Config{RequestTimeout: dispatcher.DefaultRequestTimeout, MaxHops: dispatcher.DefaultMaxHops, Jitter: dispatcher.DefaultJitter, Delivery: v1alpha2.DefaultDelivery(),
			MaxHeldBytes: dispatcher.DefaultMaxHeldBytes, MaxHeldBytesPerSubscription: dispatcher.DefaultMaxHeldBytesPerSubscription, BudgetInterval: dispatcher.DefaultBudgetInterval,
			SlotTime: dispatcher.DefaultSlotTime},
		Gateway:                gateway.Config{HoldTimeout: gateway.DefaultHoldTimeout, MaxHeld: gateway.DefaultMaxHeld, MaxHeldPerNamespace: gateway.DefaultMaxHeldPerNamespace, MaxInFlightPerNamespace: gateway.DefaultMaxInFlightPerNamespace},
		GatewayInFlightSubject: inflight.DefaultSubject,
		RatesSubject:           sharedrates.DefaultSubject,
		Resync:                 subscription.DefaultResync,
		ReplaySweep:            replay.DefaultSweepInterval,
		WakeProbeInterval:      endpoints.DefaultProbeInterval,
		Claims:                 ClaimsConfig{Port: claim.DefaultPort, ActivationSubject: activation.DefaultSubject, ClaimedSubject: activation.ClaimedSubject, Hold: endpoints.DefaultClaimHold},
		Admin:                  true,
		EventPaths:             eventpath.DefaultEventsPerNamespace,
		EventPathsNamespaces:   eventpath.DefaultNamespaces,
		EventPathsSubject:      eventpath.DefaultAskSubject,
		DependencyCache:        true,
		DependencyCacheBounds:  depcache.DefaultConfig(),
	}
}

// maxEventPaths and maxEventPathsNamespaces bound Config.EventPaths and
// EventPathsNamespaces: every record is held in memory (about 750 bytes
// an event).
const maxEventPaths, maxEventPathsNamespaces = 10_000, 100_000

// Has reports whether the component is to run.
func (c *Config) Has(component string) bool { return slices.Contains(c.Components, component) }

// Validate returns an error wrapping ErrInvalidConfig that says what to
// fix, naming the flag of each setting.
func (c *Config) Validate() error {
	if err := c.Streams.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if len(c.Components) == 0 {
		return fmt.Errorf("%w: no component to run", ErrInvalidConfig)
	}
	for _, x := range c.Components {
		switch x {
		case ComponentPublisher, ComponentDispatcher, ComponentReconciler, ComponentGateway:
		default:
			return fmt.Errorf("%w: unknown component %q (want publisher, dispatcher, reconciler, gateway)", ErrInvalidConfig, x)
		}
	}
	if c.Has(ComponentGateway) && (c.Gateway.HoldTimeout <= 0 || c.Gateway.MaxHeld < 1 || c.Gateway.MaxHeldPerNamespace < 1 || c.Gateway.MaxInFlightPerNamespace < 1) {
		return fmt.Errorf("%w: -gateway-hold-timeout must be positive, -gateway-max-held, -gateway-max-held-per-namespace and -gateway-max-in-flight-per-namespace at least 1", ErrInvalidConfig)
	}
	if c.EventPaths < 0 || c.EventPaths > maxEventPaths || c.EventPathsNamespaces < 1 || c.EventPathsNamespaces > maxEventPathsNamespaces {
		return fmt.Errorf("%w: -event-paths must be within 0..%d, not %d, and -event-paths-namespaces within 1..%d, not %d",
			ErrInvalidConfig, maxEventPaths, c.EventPaths, maxEventPathsNamespaces, c.EventPathsNamespaces)
	}
	if c.AckWait < time.Second {
		return fmt.Errorf("%w: -ack-wait must be at least 1s, not %s", ErrInvalidConfig, c.AckWait)
	}
	if c.Publisher.MaxRequestBytes <= 0 || c.Publisher.StoreTimeout <= 0 {
		return fmt.Errorf("%w: -max-request-bytes and -store-timeout must be positive", ErrInvalidConfig)
	}
	p := c.Publisher
	if p.SenderRate < 0 || p.AnonymousRate < 0 || p.SenderBytesRate < 0 || p.AnonymousBytesRate < 0 || p.SenderBurst < 0 || p.AnonymousBurst < 0 ||
		p.SenderBurst > 0 && p.SenderBurst < publisher.MaxBatchEvents || p.AnonymousBurst > 0 && p.AnonymousBurst < publisher.MaxBatchEvents {
		return fmt.Errorf("%w: -publish-rate-* must not be negative, -publish-burst-* 0 or at least %d (a batch)", ErrInvalidConfig, publisher.MaxBatchEvents)
	}
	if c.Dispatcher.RequestTimeout <= 0 || c.Dispatcher.MaxHops < 1 || c.Dispatcher.Jitter < 0 || c.Dispatcher.Jitter > 1 {
		return fmt.Errorf("%w: -request-timeout must be positive, -max-hops at least 1, -backoff-jitter within 0..1", ErrInvalidConfig)
	}
	if err := c.Dispatcher.Delivery.Validate(); err != nil {
		return fmt.Errorf("%w: -default-*: %w", ErrInvalidConfig, err)
	}
	if c.Resync <= 0 {
		return fmt.Errorf("%w: -resync must be positive", ErrInvalidConfig)
	}
	if c.Dispatcher.NamespaceMaxBacklog < 0 || c.Dispatcher.NamespaceMaxBacklogBytes < 0 {
		return fmt.Errorf("%w: -namespace-max-backlog and -namespace-max-backlog-bytes must not be negative (0: their defaults)", ErrInvalidConfig)
	}
	if c.Streams.MaxBytes > 0 && c.Dispatcher.NamespaceMaxBacklogBytes > c.Streams.MaxBytes {
		return fmt.Errorf("%w: -namespace-max-backlog-bytes (%d) must not be above -stream-max-bytes (%d): a namespace's events would fill the event stream for everyone",
			ErrInvalidConfig, c.Dispatcher.NamespaceMaxBacklogBytes, c.Streams.MaxBytes)
	}
	if l := c.SubscriptionLimits; l.MaxConsumersPerNamespace < 0 || l.MaxSubscriptionsPerType < 0 {
		return fmt.Errorf("%w: -max-consumers-per-namespace and -max-subscriptions-per-type must not be negative (0: their defaults)", ErrInvalidConfig)
	}
	if n := c.SubscriptionLimits.MaxConsumersPerNamespace; n > c.Streams.MaxConsumers {
		return fmt.Errorf("%w: -max-consumers-per-namespace (%d) must not be above -stream-max-consumers (%d)", ErrInvalidConfig, n, c.Streams.MaxConsumers)
	}
	if c.WakeProbeInterval < 0 {
		return fmt.Errorf("%w: -wake-probe-interval must not be negative (0 turns the probes off)", ErrInvalidConfig)
	}
	if c.Claims.Controller != "" && (c.Claims.TokenFile == "" || c.Claims.Port < 1 || c.Claims.Port > 65535 || c.Claims.Hold < 0) {
		return fmt.Errorf("%w: -claim-controller needs -claim-token-file, a -claim-port within 1..65535 and a -claim-hold not negative", ErrInvalidConfig)
	}
	if c.ReplaySweep <= 0 {
		return fmt.Errorf("%w: -replay-sweep must be positive", ErrInvalidConfig)
	}
	if c.DependencyCache {
		if err := c.DependencyCacheBounds.Validate(); err != nil {
			return fmt.Errorf("%w: -dependency-cache-*: %w", ErrInvalidConfig, err)
		}
	}
	if c.KymaApplications && c.ApplicationCheckInterval <= 0 {
		return fmt.Errorf("%w: -application-check-interval must be positive", ErrInvalidConfig)
	}
	return nil
}
