package eventbridge

import (
	"flag"
	"fmt"
	"strings"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/internal/egress"
)

// registerFlags binds every setting of the parts to a flag of fs, with
// the current values as defaults (Process.RegisterFlags).
func (c *Config) registerFlags(fs *flag.FlagSet) {
	c.registerPartFlags(fs)
	c.registerStreamFlags(fs)
	c.registerDependencyCacheFlags(fs)
	c.registerPublisherFlags(fs)
	c.registerDispatcherFlags(fs)
}

// registerPartFlags binds which parts run, the gateway's settings, where
// sinks are, and the periods of the Subscriptions' upkeep.
func (c *Config) registerPartFlags(fs *flag.FlagSet) {
	fs.Func("components", "comma-separated components to run: publisher, dispatcher, reconciler, gateway (default publisher,dispatcher,reconciler)", func(v string) error {
		c.Components = splitList(v)
		return nil
	})
	fs.DurationVar(&c.Gateway.HoldTimeout, "gateway-hold-timeout", c.Gateway.HoldTimeout, "how long the gateway holds a request for a Function without a ready endpoint before answering 503")
	fs.IntVar(&c.Gateway.MaxHeld, "gateway-max-held", c.Gateway.MaxHeld, "most requests the gateway holds at once; more are answered 503 at once")
	fs.IntVar(&c.Gateway.MaxHeldPerNamespace, "gateway-max-held-per-namespace", c.Gateway.MaxHeldPerNamespace, "most requests the gateway holds at once for one namespace's Functions; more are answered 503 at once, and when -gateway-max-held are held, a namespace holding fewer takes the newest slot of the namespace holding the most")
	fs.IntVar(&c.Gateway.MaxInFlightPerNamespace, "gateway-max-in-flight-per-namespace", c.Gateway.MaxInFlightPerNamespace, "most requests the gateway passes on at once to one namespace's Functions and Services (its routes and APIRules); more are answered 429 with Retry-After at once")
	fs.StringVar(&c.RatesSubject, "rates-subject", c.RatesSubject, "core NATS subject on which the replicas tell each other what each namespace took of its events and bytes a second, so that they hold it to one bound together (\"\": each replica holds it alone)")
	fs.StringVar(&c.GatewayInFlightSubject, "gateway-inflight-subject", c.GatewayInFlightSubject, "core NATS subject of the gateway's in-flight reports to the scalers (the scaler's -inflight-subject)")
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
	fs.DurationVar(&c.AckWait, "ack-wait", c.AckWait, "consumers' ack wait: how soon another replica retries the events of a dispatcher that died")
	fs.BoolVar(&c.KymaApplications, "kyma-applications", c.KymaApplications, "route the events of Kyma Applications (applicationconnector.kyma-project.io) by their application-type label, as Kyma's publisher does, once that CRD is served")
	fs.DurationVar(&c.ApplicationCheckInterval, "application-check-interval", c.ApplicationCheckInterval, "how often the Application CRD is looked for until it is served")
	fs.DurationVar(&c.Resync, "resync", c.Resync, "period of reconciling each Subscription without change (recreates lost consumers)")
	fs.DurationVar(&c.WakeProbeInterval, "wake-probe-interval", c.WakeProbeInterval, "how often the dispatcher and the gateway ask a pod of a Function woken from zero whether its handler is loaded (its host's ready path), so as to reach it before the kubelet's readiness probe marks it ready; 0: wait for the EndpointSlice")
	fs.StringVar(&c.Claims.Controller, "claim-controller", c.Claims.Controller, "DNS name of the controller's headless claims Service: a request or first event for a Function at zero claims a standby pod of the warm pool there and is delivered to it at once; empty: none")
	fs.IntVar(&c.Claims.Port, "claim-port", c.Claims.Port, "the controller's claim port (its -claim-bind-address)")
	fs.StringVar(&c.Claims.TokenFile, "claim-token-file", c.Claims.TokenFile, "file holding this ServiceAccount's token for audience kfn (a projected token), sent with each claim")
	fs.StringVar(&c.Claims.ActivationSubject, "claim-activation-subject", c.Claims.ActivationSubject, "core NATS subject of the scalers' activations (the scaler's -activation-subject), each of which claims a standby pod; empty: only the gateway's requests claim")
	fs.StringVar(&c.Claims.ClaimedSubject, "claimed-subject", c.Claims.ClaimedSubject, "core NATS subject on which the end of each claim an activation started is said, for the scalers to tell KEDA then (the scaler's -claimed-subject); empty: not said")
	fs.DurationVar(&c.Claims.Hold, "claim-hold", c.Claims.Hold, "how long a claimed pod's address is taken as a ready endpoint before its EndpointSlice lists it")
	fs.DurationVar(&c.ReplaySweep, "replay-sweep", c.ReplaySweep, "how often consumers whose dead-letter replays settled stop filtering on their replay subject")
}

// registerStreamFlags binds the streams' settings and the bounds of one
// namespace's consumers and dead letters.
func (c *Config) registerStreamFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Streams.EventStream, "event-stream", c.Streams.EventStream, "name of the event stream")
	fs.StringVar(&c.Streams.DeadLetterStream, "dead-letter-stream", c.Streams.DeadLetterStream, "name of the dead-letter stream")
	fs.StringVar(&c.Streams.Storage, "storage", c.Streams.Storage, "stream storage: file or memory")
	fs.IntVar(&c.Streams.Partitions, "partitions", c.Streams.PartitionCount(), fmt.Sprintf("streams the events are spread over (1..%d), each led by a NATS server of its own: an event's partition is the hash of its partitionkey extension, else of its source and type; lowered, the partitions taken away are drained, then deleted", stream.MaxPartitions))
	fs.IntVar(&c.Streams.Replicas, "stream-replicas", c.Streams.Replicas, "JetStream replicas of the streams (1..5)")
	fs.Int64Var(&c.Streams.MaxBytes, "stream-max-bytes", c.Streams.MaxBytes, "size limit of the event stream; when full, publishing answers 507 (-1 unlimited)")
	fs.Func("stream-max-msg-size", fmt.Sprintf("size limit of one stored event, headers included (-1 unlimited) (default %d)", c.Streams.MaxMsgSize), func(v string) error {
		var n int32
		_, err := fmt.Sscan(v, &n)
		c.Streams.MaxMsgSize = n
		return err
	})
	fs.IntVar(&c.Streams.MaxConsumers, "stream-max-consumers", c.Streams.MaxConsumers, "most consumers of the event stream, one per Subscription (NATS gives a stream without one 1,000)")
	fs.IntVar(&c.SubscriptionLimits.MaxConsumersPerNamespace, "max-consumers-per-namespace", c.SubscriptionLimits.MaxConsumersPerNamespace, fmt.Sprintf("most Subscriptions of one namespace that get a consumer, in the order they were made; the next are not active, with the reason, so that no namespace takes every consumer of the event stream; a namespace holding a %dth of it gets a new consumer only while the stream holds fewer than all but its last %dth (0: a %dth of -stream-max-consumers)", subscription.ReserveShare, subscription.ReserveShare, subscription.ConsumerShareOfStream))
	fs.IntVar(&c.SubscriptionLimits.MaxSubscriptionsPerType, "max-subscriptions-per-type", c.SubscriptionLimits.MaxSubscriptionsPerType, fmt.Sprintf("most Subscriptions of one namespace on one event type (source and type) that get a consumer, so that one publish becomes at most this many deliveries for a namespace (0: %d)", subscription.DefaultMaxSubscriptionsPerType))
	fs.DurationVar(&c.Streams.Duplicates, "dedup-window", c.Streams.Duplicates, "de-duplication window: a re-published source+id inside it is stored once")
	fs.DurationVar(&c.Streams.DeadLetterMaxAge, "dead-letter-max-age", c.Streams.DeadLetterMaxAge, "how long dead letters are kept (0 forever)")
	fs.Int64Var(&c.Streams.DeadLetterMaxBytes, "dead-letter-max-bytes", c.Streams.DeadLetterMaxBytes, "size limit of the dead-letter stream; when full, a namespace's new dead letter takes the place of its own oldest, never another namespace's, and one of a namespace with none is dropped with its event (counted, logged) (-1 unlimited)")
	fs.Int64Var(&c.Streams.DeadLetterMaxPerNamespace, "dead-letter-max-per-namespace", c.Streams.DeadLetterMaxPerNamespace, "most dead letters of one namespace; past it, that namespace's oldest are dropped")
	fs.Int64Var(&c.Streams.DeadLetterMaxBytesPerNamespace, "dead-letter-max-bytes-per-namespace", c.Streams.DeadLetterMaxBytesPerNamespace, fmt.Sprintf("most bytes of one namespace's dead letters; past it, that namespace's oldest are dropped; at most -dead-letter-max-bytes (0: a %dth of -dead-letter-max-bytes, at least -stream-max-msg-size; past %d namespaces at their bound, a full stream makes room with the oldest of the namespace holding the most)", stream.DeadLetterShareOfStream, stream.DeadLetterShareOfStream))
}

// registerDependencyCacheFlags binds the dependency cache's bucket and
// bounds.
func (c *Config) registerDependencyCacheFlags(fs *flag.FlagSet) {
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
	fs.IntVar(&c.DependencyCacheBounds.MaxDownloads, "dependency-cache-max-downloads", c.DependencyCacheBounds.MaxDownloads, "dependency downloads one event bridge serves at once (each may hold up to an object of chunks NATS sent ahead of a slow client); more answer 429")
	fs.IntVar(&c.DependencyCacheBounds.MaxNamespaceDownloads, "dependency-cache-max-namespace-downloads", c.DependencyCacheBounds.MaxNamespaceDownloads, "of -dependency-cache-max-downloads, those one namespace may have under way at once; more answer 429 (a pod asks again after Retry-After)")
	fs.DurationVar(&c.DependencyCacheBounds.DownloadWriteTimeout, "dependency-cache-download-write-timeout", c.DependencyCacheBounds.DownloadWriteTimeout, "a dependency download whose client takes nothing for this long is ended, its slot freed")
	fs.DurationVar(&c.DependencyCacheBounds.DownloadTimeout, "dependency-cache-download-timeout", c.DependencyCacheBounds.DownloadTimeout, "longest dependency download; a slower one is ended")
}

// registerPublisherFlags binds the publisher's bounds and Kyma's legacy
// events and Applications.
func (c *Config) registerPublisherFlags(fs *flag.FlagSet) {
	fs.Float64Var(&c.Publisher.SenderRate, "publish-rate-per-namespace", c.Publisher.SenderRate, "events one sender namespace (-publisher-senders=kubernetes) may store a second on average, its sinks' replies included; past it (and its burst) a request is refused 429 and a reply waits for its turn (0: no bound)")
	fs.IntVar(&c.Publisher.SenderBurst, "publish-burst-per-namespace", c.Publisher.SenderBurst, "burst of -publish-rate-per-namespace, at least 100 (a batch); 0: the larger of the rate and 100")
	fs.Float64Var(&c.Publisher.AnonymousRate, "publish-rate-anonymous", c.Publisher.AnonymousRate, "events every publisher without a namespace (no token, a user's) may store a second together; past it a request is refused 429 (0: no bound, Kyma's model)")
	fs.IntVar(&c.Publisher.AnonymousBurst, "publish-burst-anonymous", c.Publisher.AnonymousBurst, "burst of -publish-rate-anonymous, at least 100; 0: the larger of the rate and 100")
	fs.Float64Var(&c.Publisher.SenderBytesRate, "publish-bytes-per-namespace", c.Publisher.SenderBytesRate, "bytes one sender namespace may store a second on average, its sinks' replies included, in bursts of the larger of the rate and -max-request-bytes; past it a request is refused 429 (before its body is read when its length is told) and a reply waits for its turn (0: no bound)")
	fs.Float64Var(&c.Publisher.AnonymousBytesRate, "publish-bytes-anonymous", c.Publisher.AnonymousBytesRate, "bytes every publisher without a namespace may store a second together (0: no bound, Kyma's model)")
	fs.Int64Var(&c.Publisher.MaxRequestBytes, "max-request-bytes", c.Publisher.MaxRequestBytes, "largest publish request body; larger get 413")
	fs.IntVar(&c.Publisher.MaxPublishing, "max-publishing", c.Publisher.MaxPublishing, "publish requests worked on at once before they are shared among sender namespaces (requests without one count as one sender): past it, a sender that has its share of those in progress gets 429 with Retry-After while another has requests in progress (-1: no bound)")
	fs.IntVar(&c.Publisher.PublishingPerNamespace, "publishing-per-namespace", c.Publisher.PublishingPerNamespace, "publish requests of one sender namespace worked on at once once their body is read (decoded, checked, stored): its next wait their turn, in order, at most -store-timeout (then 503 with Retry-After), so that a namespace's burst does not stand in front of another's event in the stream's queue of stores; publishes without a namespace are not held to it (0: 4; negative: no bound)")
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
}

// registerDispatcherFlags binds the dispatcher's delivery settings, its
// bounds and the Subscriptions' delivery defaults.
func (c *Config) registerDispatcherFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.Dispatcher.RequestTimeout, "request-timeout", c.Dispatcher.RequestTimeout, "timeout of one delivery to a sink")
	fs.Func("sink-networks", "comma-separated CIDRs (the cluster's pod and Service networks): the only networks deliveries, the gateway's requests and the wake probes may reach; empty: any address but loopback, link-local, multicast and the API server's", func(v string) error {
		n, err := egress.ParseNetworks(v)
		c.Dispatcher.Egress.Networks = n
		return err
	})
	fs.Int64Var(&c.Dispatcher.MaxHeldBytes, "max-held-bytes", c.Dispatcher.MaxHeldBytes, "bytes of events the dispatcher holds at once (arrived, not settled, retries included), and of their sinks' replies while they are read and stored; past it, it asks for no more until some are settled (-1: no bound)")
	fs.Int64Var(&c.Dispatcher.MaxHeldBytesPerSubscription, "max-held-bytes-per-subscription", c.Dispatcher.MaxHeldBytesPerSubscription, "the share of -max-held-bytes one Subscription may hold, its sink's replies included (a reply that does not fit fails its attempt; a Subscription holding nothing may take one event of any size; -1: no bound)")
	fs.IntVar(&c.Dispatcher.DeliverySlots, "delivery-slots", c.Dispatcher.DeliverySlots, "deliveries (with their settling and replies) the dispatcher works on at once, shared fairly among namespaces: when they are all taken, each that frees goes to the namespace running the fewest, and a quarter is kept for namespaces running few (0: 16 per CPU; -1: no bound)")
	fs.IntVar(&c.Dispatcher.DeliverySlotsPerNamespace, "delivery-slots-per-namespace", c.Dispatcher.DeliverySlotsPerNamespace, "delivery slots one namespace holds at once while another namespace is active (has deliveries waiting or had a slot in the last 4 slot times); a namespace alone takes what -delivery-slots allows, so a fan-out or a reply storm runs a few deliveries at a time beside another namespace's, not all at once; deliveries to sinks slower than two slot times give their slot back and are not held to it (0: 4; negative: no bound)")
	fs.DurationVar(&c.Dispatcher.SlotTime, "delivery-slot-time", c.Dispatcher.SlotTime, "how long a delivery holds its slot at most (one to two of it), so that a slow sink keeps none from other namespaces")
	fs.Float64Var(&c.Dispatcher.RetryRatePerNamespace, "retry-rate-per-namespace", c.Dispatcher.RetryRatePerNamespace, "retries all of one namespace's Subscriptions make a second on average; past it (and its burst) a failed delivery's next attempt waits for the namespace's turn beyond its backoff (0: 500; negative: no bound)")
	fs.IntVar(&c.Dispatcher.RetryBurstPerNamespace, "retry-burst-per-namespace", c.Dispatcher.RetryBurstPerNamespace, "burst of -retry-rate-per-namespace (0: 1000)")
	fs.IntVar(&c.Dispatcher.StreamingConsumersPerNamespace, "streaming-consumers-per-namespace", c.Dispatcher.StreamingConsumersPerNamespace, "how many of one namespace's Subscriptions are pulled for their whole maxInFlightMessages at once while another namespace has Subscriptions here; the others are asked for one event and wait for their turn (NATS's work grows with the consumers handed events, on the server every namespace shares); the only namespace with Subscriptions has each busy one pulled whole, for a turn at a time (0: 8, -1: no bound)")
	fs.IntVar(&c.Dispatcher.MaxInFlight, "max-in-flight", c.Dispatcher.MaxInFlight, "deliveries in flight (sent, the sink's answer not yet read) of all Subscriptions; past it an attempt waits within its request timeout, and each that ends goes to the namespace waiting with the fewest in flight (0: 4096; -1: no bound)")
	fs.IntVar(&c.Dispatcher.MaxInFlightPerNamespace, "max-in-flight-per-namespace", c.Dispatcher.MaxInFlightPerNamespace, "deliveries in flight of one namespace's Subscriptions; past it its attempts wait within their request timeout (0: 1000)")
	fs.Float64Var(&c.Dispatcher.LogLinesPerNamespace, "log-lines-per-namespace", c.Dispatcher.LogLinesPerNamespace, "log lines the events of one namespace may make a second (failing sinks, dropped replies), in bursts of ten seconds' worth; past it they are dropped and the next line says how many (0: 10; negative: no bound)")
	fs.DurationVar(&c.Dispatcher.ConsumerTurn, "consumer-turn", c.Dispatcher.ConsumerTurn, "how long a Subscription keeps its turn of -streaming-consumers-per-namespace while others of its namespace wait; shorter (down to 10ms) when more than 16 x -streaming-consumers-per-namespace wait, so that a round of turns lasts about 16 turns (0: 250ms)")
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
	fs.IntVar(&c.EventPaths, "event-paths", c.EventPaths, "how many recent events of each namespace the admin API keeps the paths of, for kfn trace (publish, each Subscription's attempts and outcome; about 750 bytes an event); 0 keeps none")
	fs.IntVar(&c.EventPathsNamespaces, "event-paths-namespaces", c.EventPathsNamespaces, "how many namespaces' paths -event-paths keeps at once, the least recently active forgotten first")
	fs.StringVar(&c.EventPathsSubject, "event-paths-subject", c.EventPathsSubject, "core NATS subject on which a replica asks the others for their record of a namespace's paths (-event-paths), answering kfn trace with every replica's; empty: each answers with its own")
	fs.DurationVar(&c.Dispatcher.BudgetInterval, "budget-interval", c.Dispatcher.BudgetInterval, "how often each Subscription's backlog is checked against its maxBacklog")
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
