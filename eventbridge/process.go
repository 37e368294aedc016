package eventbridge

import (
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/internal/natsconn"
)

// Process is the configuration of the event bridge as a process of its
// own (cmd/eventbridge, package Run): the parts' Config, and where the
// process connects, listens and reads its Subscriptions. DefaultProcess has
// working values for a cluster; RegisterFlags documents each one as a flag.
type Process struct {
	Config
	// NATSURL is the NATS server (comma-separated for a cluster).
	NATSURL string
	// NATS is the user, password and CA the bridge connects to NATS with
	// (flags -nats-user, -nats-password-file, -nats-creds-file,
	// -nats-ca-file); the zero value connects anonymously.
	NATS natsconn.Credentials
	// Listen is the publisher's address (/publish, /{app}/v1/events,
	// /{app}/v2/events, /healthz, /readyz).
	Listen string
	// AdminListen serves the dead-letter admin API (/deadletters...).
	// Empty disables it (and Config.Admin).
	AdminListen string
	// AdminAuth is who may use the admin API: AdminAuthKubernetes (the
	// default) serves it over TLS to callers the cluster authenticates,
	// each as far as RBAC lets them (Deps.Access); AdminAuthNone to
	// whoever reaches the listener (only with -subscriptions, without
	// Kubernetes, on an address no one else reaches).
	AdminAuth string
	// MetricsListen serves Prometheus metrics on /metrics. Empty disables it.
	MetricsListen string
	// MetricsAuth is who may read the metrics (which name every tenant's
	// namespaces and Subscriptions): MetricsAuthKubernetes (the default)
	// serves them over TLS to callers the cluster authenticates whom RBAC
	// lets get the non-resource URL /metrics; MetricsAuthNone to whoever
	// reaches the listener (plain HTTP).
	MetricsAuth string
	// GatewayListen is the gateway's address (component gateway). It
	// takes plain HTTP and, on the same port, TLS (with the admin API's
	// kind of certificate), over which a caller may authenticate with a
	// client certificate.
	GatewayListen string
	// GatewayAuth is who may call Functions through the gateway:
	// GatewayAuthKubernetes (the default) the callers the cluster
	// authenticates (a bearer token, a client certificate over TLS), each
	// the Functions RBAC grants them functions/invoke on
	// (Deps.GatewayAccess); GatewayAuthNone whoever reaches the listener
	// (with -token-file, whoever sends its token).
	GatewayAuth string
	// PublisherSenders is how the publisher learns who sends an event:
	// PublisherSendersKubernetes (the default) reviews the bearer token a
	// publish carries (a Function's host sends its pod's ServiceAccount
	// token of audience kfn) and records the ServiceAccount's namespace in
	// the extension publisher.SenderExtension, refusing (401) a token the
	// cluster does not know; a publish without one is taken as before,
	// without a sender. PublisherSendersNone records nothing.
	PublisherSenders string
	// NewTokensPerSecond bounds the TokenReviews of bearer tokens not seen
	// before, on each listener (admin API, gateway, publisher, metrics;
	// bursts of five times as many), and a tenth of it for one caller
	// address; more are answered 429. Default 100.
	NewTokensPerSecond float64
	// TokenFile, when set, names a file holding the bearer token that the
	// publisher and the gateway require (package auth); empty: none.
	TokenFile string
	// Subscriptions, when set, are manifest files whose Subscriptions are
	// served without Kubernetes (the reconciler does not run; consumers
	// are created at start).
	Subscriptions []string
	// LeaderElection makes one replica at a time run the reconciler.
	LeaderElection bool
	// LeaderElectionNamespace holds the leader lease; empty means the
	// namespace the process runs in.
	LeaderElectionNamespace string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// TraceEndpoint is the OTLP/HTTP traces URL spans are exported to
	// (http://collector:4318/v1/traces); empty: the standard
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, and
	// without them no tracing (package tracing/otlp).
	TraceEndpoint string
}

// DefaultProcess returns working defaults for a cluster.
func DefaultProcess() Process {
	return Process{
		Config:             DefaultConfig(),
		NATSURL:            "nats://127.0.0.1:4222",
		Listen:             ":8080",
		AdminListen:        ":8081",
		AdminAuth:          AdminAuthKubernetes,
		MetricsAuth:        MetricsAuthKubernetes,
		GatewayAuth:        GatewayAuthKubernetes,
		PublisherSenders:   PublisherSendersKubernetes,
		NewTokensPerSecond: 100,
		MetricsListen:      ":9090",
		GatewayListen:      ":8082",
		LeaderElection:     true,
		LogLevel:           "info",
	}
}

// RegisterFlags binds every setting to a flag of fs, with the current
// values as defaults.
func (c *Process) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.NATSURL, "nats-url", c.NATSURL, "NATS server URL(s), comma-separated")
	c.NATS.RegisterFlags(fs)
	fs.StringVar(&c.Listen, "listen", c.Listen, "address of the publisher (and /healthz, /readyz)")
	fs.StringVar(&c.AdminListen, "admin-listen", c.AdminListen, "address of the dead-letter admin API; empty disables it")
	fs.StringVar(&c.AdminAuth, "admin-auth", c.AdminAuth, "who may use the admin API: kubernetes (over TLS, callers authenticated by the cluster with a bearer token or client certificate, each allowed what RBAC grants on subscriptions/deadletters in a namespace) or none (whoever reaches -admin-listen; only with -subscriptions)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", c.MetricsListen, "address of /metrics; empty disables it")
	fs.Func("components", "comma-separated components to run: publisher, dispatcher, reconciler, gateway (default publisher,dispatcher,reconciler)", func(v string) error {
		c.Components = splitList(v)
		return nil
	})
	fs.StringVar(&c.MetricsAuth, "metrics-auth", c.MetricsAuth, "who may read -metrics-listen: kubernetes (over TLS, callers authenticated by the cluster whom RBAC lets get /metrics) or none (whoever reaches it, plain HTTP; only choice with -subscriptions)")
	fs.StringVar(&c.GatewayAuth, "gateway-auth", c.GatewayAuth, "who may call Functions through the gateway: kubernetes (callers authenticated by the cluster with a bearer token, or a client certificate over TLS on the same port, each allowed the Functions RBAC grants functions/invoke on) or none (whoever reaches -gateway-listen; with -token-file, whoever sends its token)")
	fs.StringVar(&c.PublisherSenders, "publisher-senders", c.PublisherSenders, "how the publisher learns who sends an event: kubernetes (the bearer token a publish carries, which a Function's host sends, is reviewed, and its ServiceAccount's namespace recorded in the extension kfnsendernamespace; an unknown token is refused 401) or none")
	fs.Float64Var(&c.NewTokensPerSecond, "new-tokens-per-second", c.NewTokensPerSecond, "TokenReviews of bearer tokens not seen before, a second, on each of the admin API, the gateway, the publisher and the metrics (bursts of five times as many), a tenth of it for one caller address; more are answered 429, so that made-up tokens cannot flood the API server nor one caller spend the others' reviews (a token the cluster refused is answered 401 without another review)")
	fs.StringVar(&c.GatewayListen, "gateway-listen", c.GatewayListen, "address of the gateway to Functions (component gateway): /{namespace}/{function}/path, or Host <function>.<namespace>.svc[.cluster.local]")
	fs.DurationVar(&c.Gateway.HoldTimeout, "gateway-hold-timeout", c.Gateway.HoldTimeout, "how long the gateway holds a request for a Function without a ready endpoint before answering 503")
	fs.IntVar(&c.Gateway.MaxHeld, "gateway-max-held", c.Gateway.MaxHeld, "most requests the gateway holds at once; more are answered 503 at once")
	fs.IntVar(&c.Gateway.MaxHeldPerNamespace, "gateway-max-held-per-namespace", c.Gateway.MaxHeldPerNamespace, "most requests the gateway holds at once for one namespace's Functions; more are answered 503 at once, and when -gateway-max-held are held, a namespace holding fewer takes the newest slot of the namespace holding the most")
	fs.StringVar(&c.GatewayInFlightSubject, "gateway-inflight-subject", c.GatewayInFlightSubject, "core NATS subject of the gateway's in-flight reports to the scalers (the scaler's -inflight-subject)")
	fs.StringVar(&c.TokenFile, "token-file", c.TokenFile, "file with a bearer token (at least 16 characters) the publisher and the gateway require, as the bearer token or in the Kfn-Publisher-Token header beside a ServiceAccount token (both are then checked); functions send it from PUBLISHER_TOKEN beside their identity. Empty: no token")
	fs.Func("subscriptions", "manifest file of Subscriptions to serve without Kubernetes (repeatable); the reconciler then does not run", func(v string) error {
		c.Subscriptions = append(c.Subscriptions, v)
		return nil
	})
	fs.Func("resolve", "deliver to a sink Service elsewhere: <service>.<namespace>=<base URL> (repeatable; for running outside a cluster)", func(v string) error {
		k, u, ok := strings.Cut(v, "=")
		if !ok || k == "" || u == "" {
			return fmt.Errorf("want <service>.<namespace>=<base URL>, not %q", v)
		}
		if c.Resolve == nil {
			c.Resolve = map[string]string{}
		}
		c.Resolve[k] = strings.TrimSuffix(u, "/")
		return nil
	})
	fs.StringVar(&c.Streams.EventStream, "event-stream", c.Streams.EventStream, "name of the event stream")
	fs.StringVar(&c.Streams.DeadLetterStream, "dead-letter-stream", c.Streams.DeadLetterStream, "name of the dead-letter stream")
	fs.StringVar(&c.Streams.Storage, "storage", c.Streams.Storage, "stream storage: file or memory")
	fs.IntVar(&c.Streams.Replicas, "stream-replicas", c.Streams.Replicas, "JetStream replicas of the streams (1..5)")
	fs.Int64Var(&c.Streams.MaxBytes, "stream-max-bytes", c.Streams.MaxBytes, "size limit of the event stream; when full, publishing answers 507 (-1 unlimited)")
	fs.Func("stream-max-msg-size", fmt.Sprintf("size limit of one stored event, headers included (-1 unlimited) (default %d)", c.Streams.MaxMsgSize), func(v string) error {
		var n int32
		_, err := fmt.Sscan(v, &n)
		c.Streams.MaxMsgSize = n
		return err
	})
	fs.IntVar(&c.Streams.MaxConsumers, "stream-max-consumers", c.Streams.MaxConsumers, "most consumers of the event stream, one per Subscription (NATS gives a stream without one 1,000)")
	fs.IntVar(&c.SubscriptionLimits.MaxConsumersPerNamespace, "max-consumers-per-namespace", c.SubscriptionLimits.MaxConsumersPerNamespace, fmt.Sprintf("most Subscriptions of one namespace that get a consumer, in the order they were made; the next are not active, with the reason, so that no namespace takes every consumer of the event stream (0: a %dth of -stream-max-consumers)", subscription.ConsumerShareOfStream))
	fs.IntVar(&c.SubscriptionLimits.MaxSubscriptionsPerType, "max-subscriptions-per-type", c.SubscriptionLimits.MaxSubscriptionsPerType, fmt.Sprintf("most Subscriptions of one namespace on one event type (source and type) that get a consumer, so that one publish becomes at most this many deliveries for a namespace (0: %d)", subscription.DefaultMaxSubscriptionsPerType))
	fs.DurationVar(&c.Streams.Duplicates, "dedup-window", c.Streams.Duplicates, "de-duplication window: a re-published source+id inside it is stored once")
	fs.DurationVar(&c.Streams.DeadLetterMaxAge, "dead-letter-max-age", c.Streams.DeadLetterMaxAge, "how long dead letters are kept (0 forever)")
	fs.Int64Var(&c.Streams.DeadLetterMaxBytes, "dead-letter-max-bytes", c.Streams.DeadLetterMaxBytes, "size limit of the dead-letter stream; when full, a namespace's new dead letter takes the place of its own oldest, never another namespace's, and one of a namespace with none is dropped with its event (counted, logged) (-1 unlimited)")
	fs.Int64Var(&c.Streams.DeadLetterMaxPerNamespace, "dead-letter-max-per-namespace", c.Streams.DeadLetterMaxPerNamespace, "most dead letters of one namespace; past it, that namespace's oldest are dropped, no other's")
	fs.Int64Var(&c.Streams.DeadLetterMaxBytesPerNamespace, "dead-letter-max-bytes-per-namespace", c.Streams.DeadLetterMaxBytesPerNamespace, fmt.Sprintf("most bytes of one namespace's dead letters; past it, that namespace's oldest are dropped, no other's; at most -dead-letter-max-bytes (0: a %dth of -dead-letter-max-bytes, at least -stream-max-msg-size, so that %d namespaces at their bound leave the rest to the others)", stream.DeadLetterShareOfStream, stream.DeadLetterShareOfStream-1))
	fs.StringVar(&c.Streams.DependencyBucket, "dependency-bucket", c.Streams.DependencyBucket, "name of the JetStream object store of the dependency cache (same storage and replicas as the streams)")
	fs.Int64Var(&c.Streams.DependencyMaxBytes, "dependency-bucket-max-bytes", c.Streams.DependencyMaxBytes, "size limit of the dependency bucket, every namespace's objects; when full, uploads answer 507 (-1 unlimited)")
	fs.DurationVar(&c.Streams.DependencyMaxAge, "dependency-max-age", c.Streams.DependencyMaxAge, "how long a cached dependency object is kept after it was stored, used or not (a pod that then misses it installs and stores it again); 0 keeps objects until deleted")
	fs.BoolVar(&c.DependencyCache, "dependency-cache", c.DependencyCache, "serve the dependency cache (PUT/GET /_kfn/dependencies/{runtime}/{hash}) on the publisher's listener to Function pods, each in its ServiceAccount's namespace; needs -publisher-senders=kubernetes, else its routes answer 404 and pods install their dependencies themselves")
	fs.Int64Var(&c.DependencyCacheBounds.MaxObjectBytes, "dependency-cache-max-object-bytes", c.DependencyCacheBounds.MaxObjectBytes, "largest cached dependency object (a gzip-compressed tar), counted as it streams in; larger uploads answer 413")
	fs.Int64Var(&c.DependencyCacheBounds.MaxNamespaceBytes, "dependency-cache-max-namespace-bytes", c.DependencyCacheBounds.MaxNamespaceBytes, "bytes of cached dependencies one namespace may store; an upload past it answers 507; 0: the bucket's size / -dependency-cache-namespace-shares")
	fs.IntVar(&c.DependencyCacheBounds.NamespaceShares, "dependency-cache-namespace-shares", c.DependencyCacheBounds.NamespaceShares, "with -dependency-cache-max-namespace-bytes=0, a namespace may store this fraction of the bucket (1/N): N namespaces at their quota fill it")
	fs.IntVar(&c.DependencyCacheBounds.MaxNamespaceUploads, "dependency-cache-max-namespace-uploads", c.DependencyCacheBounds.MaxNamespaceUploads, "dependency uploads one namespace may have under way at once on one event bridge (of -dependency-cache-max-uploads); more answer 429")
	fs.IntVar(&c.DependencyCacheBounds.MaxNamespaceObjects, "dependency-cache-max-namespace-objects", c.DependencyCacheBounds.MaxNamespaceObjects, "cached dependency objects one namespace may store; an upload past it answers 507")
	fs.DurationVar(&c.DependencyCacheBounds.MaxIdle, "dependency-cache-max-idle", c.DependencyCacheBounds.MaxIdle, "how long a cached dependency object no pod read is kept; then every replica removes it (within the bucket's -dependency-max-age)")
	fs.IntVar(&c.DependencyCacheBounds.MaxUploads, "dependency-cache-max-uploads", c.DependencyCacheBounds.MaxUploads, "dependency uploads one event bridge takes at once; more answer 429")
	fs.DurationVar(&c.DependencyCacheBounds.UploadTimeout, "dependency-cache-upload-timeout", c.DependencyCacheBounds.UploadTimeout, "longest dependency upload, its body included; a slower one is cut (408)")
	fs.DurationVar(&c.AckWait, "ack-wait", c.AckWait, "consumers' ack wait: how soon another replica retries the events of a dispatcher that died")
	fs.Float64Var(&c.Publisher.SenderRate, "publish-rate-per-namespace", c.Publisher.SenderRate, "events one sender namespace (-publisher-senders=kubernetes) may store a second on average; past it (and its burst) a request is refused 429 (0: no bound)")
	fs.IntVar(&c.Publisher.SenderBurst, "publish-burst-per-namespace", c.Publisher.SenderBurst, "burst of -publish-rate-per-namespace, at least 100 (a batch); 0: the larger of the rate and 100")
	fs.Float64Var(&c.Publisher.AnonymousRate, "publish-rate-anonymous", c.Publisher.AnonymousRate, "events every publisher without a namespace (no token, a user's) may store a second together; past it a request is refused 429 (0: no bound, Kyma's model)")
	fs.IntVar(&c.Publisher.AnonymousBurst, "publish-burst-anonymous", c.Publisher.AnonymousBurst, "burst of -publish-rate-anonymous, at least 100; 0: the larger of the rate and 100")
	fs.Int64Var(&c.Publisher.MaxRequestBytes, "max-request-bytes", c.Publisher.MaxRequestBytes, "largest publish request body; larger get 413")
	fs.IntVar(&c.Publisher.MaxPublishing, "max-publishing", c.Publisher.MaxPublishing, "publish requests worked on at once before they are shared among sender namespaces (requests without one count as one sender): past it, a sender that has its share of those in progress gets 429 with Retry-After while another has requests in progress (-1: no bound)")
	fs.DurationVar(&c.Publisher.StoreTimeout, "store-timeout", c.Publisher.StoreTimeout, "how long a publish waits for JetStream before answering 503")
	fs.StringVar(&c.Publisher.LegacyPrefix, "legacy-event-prefix", c.Publisher.LegacyPrefix, "prefix of Kyma legacy event types")
	fs.StringVar(&c.Publisher.LegacySource, "legacy-source", c.Publisher.LegacySource, "source of the exact-matching copy of legacy events")
	fs.Func("reserve-source", "SOURCE[:TYPEPREFIX]=NAMESPACE[,NAMESPACE...]: events routed by SOURCE (and of types starting with TYPEPREFIX) are taken only from ServiceAccounts of those namespaces (repeatable; needs -publisher-senders=kubernetes). Sources no reservation names are open to anyone, as in Kyma", func(v string) error {
		r, err := admission.ParseReservation(v)
		if err != nil {
			return err
		}
		c.Publisher.Reserved = append(c.Publisher.Reserved, r)
		return nil
	})
	fs.BoolVar(&c.KymaApplications, "kyma-applications", c.KymaApplications, "route the events of Kyma Applications (applicationconnector.kyma-project.io) by their application-type label, as Kyma's publisher does, once that CRD is served")
	fs.DurationVar(&c.ApplicationCheckInterval, "application-check-interval", c.ApplicationCheckInterval, "how often the Application CRD is looked for until it is served")
	fs.DurationVar(&c.Dispatcher.RequestTimeout, "request-timeout", c.Dispatcher.RequestTimeout, "timeout of one delivery to a sink")
	fs.Func("sink-networks", "comma-separated CIDRs (the cluster's pod and Service networks): the only networks deliveries, the gateway's requests and the wake probes may reach; empty: any address but loopback, link-local, multicast and the API server's", func(v string) error {
		n, err := egress.ParseNetworks(v)
		c.Dispatcher.Egress.Networks = n
		return err
	})
	fs.Int64Var(&c.Dispatcher.MaxHeldBytes, "max-held-bytes", c.Dispatcher.MaxHeldBytes, "bytes of events the dispatcher holds at once (arrived, not settled, retries included), and of their sinks' replies while they are read and stored; past it, it asks for no more until some are settled (-1: no bound)")
	fs.Int64Var(&c.Dispatcher.MaxHeldBytesPerSubscription, "max-held-bytes-per-subscription", c.Dispatcher.MaxHeldBytesPerSubscription, "the share of -max-held-bytes one Subscription may hold, its sink's replies included (a reply that does not fit fails its attempt; a Subscription holding nothing may take one event of any size; -1: no bound)")
	fs.IntVar(&c.Dispatcher.DeliverySlots, "delivery-slots", c.Dispatcher.DeliverySlots, "deliveries (with their settling and replies) the dispatcher works on at once, shared fairly among namespaces: when they are all taken, each that frees goes to the namespace running the fewest, and a quarter is kept for namespaces running few (0: 16 per CPU; -1: no bound)")
	fs.DurationVar(&c.Dispatcher.SlotTime, "delivery-slot-time", c.Dispatcher.SlotTime, "how long a delivery holds its slot at most (one to two of it), so that a slow sink keeps none from other namespaces")
	fs.BoolVar(&c.Dispatcher.Egress.AllowLoopback, "allow-loopback-sinks", c.Dispatcher.Egress.AllowLoopback, "let deliveries, the gateway and the wake probes reach loopback addresses, for -resolve targets on this machine (tests); never in a cluster, where it would open the pod's own ports to every tenant's sink")
	fs.IntVar(&c.Dispatcher.MaxHops, "max-hops", c.Dispatcher.MaxHops, "longest chain of events made by replies and by Functions' emitCloudEvent (kfnhops): a reply past it is dropped, a publish past it refused (400)")
	fs.Float64Var(&c.Dispatcher.Jitter, "backoff-jitter", c.Dispatcher.Jitter, "random fraction of each redelivery backoff (0..1)")
	fs.IntVar(&c.Dispatcher.Delivery.MaxInFlight, "default-max-in-flight", c.Dispatcher.Delivery.MaxInFlight, "maxInFlightMessages of Subscriptions whose spec.config does not set it")
	fs.IntVar(&c.Dispatcher.Delivery.MaxDeliver, "default-max-deliver", c.Dispatcher.Delivery.MaxDeliver, "maxDeliver (delivery attempts per event) of Subscriptions whose spec.config does not set it")
	fs.DurationVar(&c.Dispatcher.Delivery.BackoffInitial, "default-backoff-initial", c.Dispatcher.Delivery.BackoffInitial, "backoffInitial (first redelivery delay) of Subscriptions whose spec.config does not set it")
	fs.DurationVar(&c.Dispatcher.Delivery.BackoffMax, "default-backoff-max", c.Dispatcher.Delivery.BackoffMax, "backoffMax (longest redelivery delay) of Subscriptions whose spec.config does not set it")
	fs.BoolVar(&c.Dispatcher.Delivery.DeadLetter, "default-dead-letter", c.Dispatcher.Delivery.DeadLetter, "deadLetter (keep events that ran out of attempts) of Subscriptions whose spec.config does not set it")
	fs.IntVar(&c.Dispatcher.Delivery.MaxBacklog, "default-max-backlog", c.Dispatcher.Delivery.MaxBacklog, "maxBacklog (events that may wait for one Subscription; the oldest past it are dead-lettered) of Subscriptions whose spec.config does not set it")
	fs.Int64Var(&c.Dispatcher.Delivery.MaxBacklogBytes, "default-max-backlog-bytes", c.Dispatcher.Delivery.MaxBacklogBytes, "maxBacklogBytes (bytes of events that may wait for one Subscription, estimated from a sample; the oldest past it are dead-lettered) of Subscriptions whose spec.config does not set it")
	fs.IntVar(&c.Dispatcher.NamespaceMaxBacklog, "namespace-max-backlog", c.Dispatcher.NamespaceMaxBacklog, fmt.Sprintf("events that may wait for all of one namespace's Subscriptions together (each Subscription's counted); past it the namespace's oldest are dead-lettered, never another namespace's, and no Subscription's maxBacklog goes beyond it (0: %d)", dispatcher.DefaultNamespaceMaxBacklog))
	fs.Int64Var(&c.Dispatcher.NamespaceMaxBacklogBytes, "namespace-max-backlog-bytes", c.Dispatcher.NamespaceMaxBacklogBytes, fmt.Sprintf("bytes of events that may wait for all of one namespace's Subscriptions together, estimated as maxBacklogBytes is; past it the namespace's oldest are dead-lettered, never another namespace's, and no Subscription's maxBacklogBytes goes beyond it; at most -stream-max-bytes (0: a %dth of -stream-max-bytes, so that %d namespaces at their total leave the rest of the stream to the others)", dispatcher.NamespaceShareOfStream, dispatcher.NamespaceShareOfStream-1))
	fs.DurationVar(&c.Dispatcher.BudgetInterval, "budget-interval", c.Dispatcher.BudgetInterval, "how often each Subscription's backlog is checked against its maxBacklog")
	fs.DurationVar(&c.Resync, "resync", c.Resync, "period of reconciling each Subscription without change (recreates lost consumers)")
	fs.DurationVar(&c.WakeProbeInterval, "wake-probe-interval", c.WakeProbeInterval, "how often the dispatcher and the gateway ask a pod of a Function woken from zero whether its handler is loaded (its host's ready path), so as to reach it before the kubelet's readiness probe marks it ready; 0: wait for the EndpointSlice")
	fs.DurationVar(&c.ReplaySweep, "replay-sweep", c.ReplaySweep, "how often consumers whose dead-letter replays settled stop filtering on their replay subject")
	fs.BoolVar(&c.LeaderElection, "leader-election", c.LeaderElection, "run the reconciler in one replica at a time")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", c.LeaderElectionNamespace, "namespace of the leader lease")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: "+logging.Levels)
	fs.StringVar(&c.TraceEndpoint, "trace-endpoint", c.TraceEndpoint, "OTLP/HTTP traces URL to export spans to, e.g. http://otel-collector:4318/v1/traces; empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT if set, else no tracing")
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Validate returns an error wrapping ErrInvalidConfig that says what to fix.
func (c *Process) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if c.NATSURL == "" {
		return fmt.Errorf("%w: -nats-url is required", ErrInvalidConfig)
	}
	if err := c.NATS.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.Has(ComponentPublisher) && c.Listen == "" {
		return fmt.Errorf("%w: the publisher needs -listen", ErrInvalidConfig)
	}
	if c.Has(ComponentGateway) {
		switch {
		case c.GatewayListen == "":
			return fmt.Errorf("%w: the gateway needs -gateway-listen", ErrInvalidConfig)
		case len(c.Subscriptions) > 0:
			return fmt.Errorf("%w: the gateway needs Kubernetes (EndpointSlices); it cannot run with -subscriptions", ErrInvalidConfig)
		case c.GatewayInFlightSubject == "":
			return fmt.Errorf("%w: -gateway-inflight-subject is required", ErrInvalidConfig)
		case c.GatewayAuth != GatewayAuthKubernetes && c.GatewayAuth != GatewayAuthNone:
			return fmt.Errorf("%w: -gateway-auth must be kubernetes or none, not %q", ErrInvalidConfig, c.GatewayAuth)
		}
	}
	switch {
	case c.NewTokensPerSecond <= 0:
		return fmt.Errorf("%w: -new-tokens-per-second must be positive", ErrInvalidConfig)
	case c.PublisherSenders != PublisherSendersKubernetes && c.PublisherSenders != PublisherSendersNone:
		return fmt.Errorf("%w: -publisher-senders must be kubernetes or none, not %q", ErrInvalidConfig, c.PublisherSenders)
	case len(c.Publisher.Reserved) > 0 && (c.PublisherSenders != PublisherSendersKubernetes || len(c.Subscriptions) > 0):
		return fmt.Errorf("%w: -reserve-source needs senders: -publisher-senders=kubernetes, with Kubernetes (not -subscriptions)", ErrInvalidConfig)
	case c.AdminAuth != AdminAuthKubernetes && c.AdminAuth != AdminAuthNone:
		return fmt.Errorf("%w: -admin-auth must be kubernetes or none, not %q", ErrInvalidConfig, c.AdminAuth)
	case c.AdminAuth == AdminAuthKubernetes && c.AdminListen != "" && len(c.Subscriptions) > 0:
		return fmt.Errorf("%w: -admin-auth=kubernetes needs Kubernetes; with -subscriptions, set -admin-auth=none and an -admin-listen address no one else reaches, or -admin-listen= to disable the admin API", ErrInvalidConfig)
	case c.MetricsAuth != MetricsAuthKubernetes && c.MetricsAuth != MetricsAuthNone:
		return fmt.Errorf("%w: -metrics-auth must be kubernetes or none, not %q", ErrInvalidConfig, c.MetricsAuth)
	case c.MetricsAuth == MetricsAuthKubernetes && c.MetricsListen != "" && len(c.Subscriptions) > 0:
		return fmt.Errorf("%w: -metrics-auth=kubernetes needs Kubernetes; with -subscriptions, set -metrics-auth=none or -metrics-listen= to disable the metrics", ErrInvalidConfig)
	}
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		return fmt.Errorf("%w: -log-level: %w", ErrInvalidConfig, err)
	}
	if c.TraceEndpoint != "" {
		if u, err := url.Parse(c.TraceEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: -trace-endpoint must be an http(s) URL such as http://otel-collector:4318/v1/traces, not %q", ErrInvalidConfig, c.TraceEndpoint)
		}
	}
	return nil
}

// Values of Process.AdminAuth.
const (
	AdminAuthKubernetes = "kubernetes"
	AdminAuthNone       = "none"
)

// Values of Process.MetricsAuth.
const (
	MetricsAuthKubernetes = "kubernetes"
	MetricsAuthNone       = "none"
)

// Values of Process.PublisherSenders.
const (
	PublisherSendersKubernetes = "kubernetes"
	PublisherSendersNone       = "none"
)

// Values of Process.GatewayAuth.
const (
	GatewayAuthKubernetes = "kubernetes"
	GatewayAuthNone       = "none"
)

// maxHeaderBytes bounds every listener's request headers (package
// publisher's MaxHeaderBytes).
const maxHeaderBytes = publisher.MaxHeaderBytes
