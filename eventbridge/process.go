package eventbridge

import (
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/kfn-dev/kfn/eventbridge/extauth"
	"github.com/kfn-dev/kfn/eventbridge/httproute"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/internal/connlimit"
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
	// each as far as RBAC lets them (Access.Admin); AdminAuthNone to
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
	// ExposeListen serves the hosts of the cluster's APIRules (Kyma's
	// gateway.kyma-project.io/v2), by their rules: whoever reaches it, as
	// far as a rule's access strategy lets them (component gateway; plain
	// HTTP, or TLS with ExposeTLSCertFile and ExposeTLSKeyFile). Empty
	// (the default; the chart sets :8083): APIRules are not served, nor
	// their status written.
	ExposeListen string
	// ExposeTLSCertFile and ExposeTLSKeyFile, both or neither, make
	// ExposeListen serve TLS only, with that certificate (the APIRules'
	// hosts'), read again when the files change (package certfiles).
	ExposeTLSCertFile, ExposeTLSKeyFile string
	// GatewayAuth is who may call Functions through the gateway:
	// GatewayAuthKubernetes (the default) the callers the cluster
	// authenticates (a bearer token, a client certificate over TLS), each
	// the Functions RBAC grants them functions/invoke on
	// (Access.Gateway); GatewayAuthNone whoever reaches the listener
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
	// MaxConnections bounds the connections each listener (publisher,
	// gateway, APIRules' hosts, admin API, metrics) holds at once: past it
	// the connection idle the longest is closed for a new one, and new
	// ones wait to be accepted until one closes (package connlimit).
	// Default connlimit.DefaultMost(): a quarter of the file limit, at
	// most 4,096.
	MaxConnections int
	// MaxConnectionsPerSource bounds the connections one source address
	// holds at once on each listener but the APIRules' hosts (which the
	// cluster's ingress reaches from few addresses: theirs is
	// MaxConnections): a connection past it is closed at once, and when a
	// listener is full, connections still sending their first headers
	// are closed oldest first for new ones (connlimit.PerSource). 0: an
	// eighth of MaxConnections.
	MaxConnectionsPerSource int
	// NewTokensPerSecond bounds the TokenReviews of bearer tokens not seen
	// before, on each listener (admin API, gateway, publisher, metrics;
	// bursts of five times as many), a quarter of it for the tokens of one
	// namespace and a tenth for one caller address (auth.KubernetesConfig);
	// more are answered 429. Default 100.
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
		MaxConnections:     connlimit.DefaultMost(),
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
	fs.StringVar(&c.MetricsAuth, "metrics-auth", c.MetricsAuth, "who may read -metrics-listen: kubernetes (over TLS, callers authenticated by the cluster whom RBAC lets get /metrics) or none (whoever reaches it, plain HTTP; only choice with -subscriptions)")
	fs.StringVar(&c.GatewayAuth, "gateway-auth", c.GatewayAuth, "who may call Functions through the gateway: kubernetes (callers authenticated by the cluster with a bearer token, or a client certificate over TLS on the same port, each allowed the Functions RBAC grants functions/invoke on) or none (whoever reaches -gateway-listen; with -token-file, whoever sends its token)")
	fs.StringVar(&c.PublisherSenders, "publisher-senders", c.PublisherSenders, "how the publisher learns who sends an event: kubernetes (the bearer token a publish carries, which a Function's host sends, is reviewed, and its ServiceAccount's namespace recorded in the extension kfnsendernamespace; an unknown token is refused 401) or none")
	fs.Float64Var(&c.NewTokensPerSecond, "new-tokens-per-second", c.NewTokensPerSecond, "TokenReviews of bearer tokens not seen before, a second, on each of the admin API, the gateway, the publisher and the metrics (bursts of five times as many), a quarter of it for the tokens of one namespace while others send new tokens too (those the cluster signed for kfn: their signature is checked against its ServiceAccount issuer's keys before a review) and a tenth for one caller address (the others, which together have at most half); more are answered 429, so that made-up tokens cannot flood the API server nor one namespace or caller spend the others' reviews (a token the cluster refused is answered 401 without another review)")
	fs.IntVar(&c.MaxConnections, "max-connections", c.MaxConnections, "most connections each listener (publisher, gateway, APIRules' hosts, admin API, metrics) holds at once; past it the connection idle the longest is closed for a new one, and new ones wait to be accepted until one closes (default: a quarter of the file limit, at most 4,096)")
	fs.IntVar(&c.MaxConnectionsPerSource, "max-connections-per-source", c.MaxConnectionsPerSource, "most connections one source address holds at once on each listener but the APIRules' hosts (whose callers come through the cluster's ingress: theirs is -max-connections); past it a connection is closed at once (0: an eighth of -max-connections)")
	fs.StringVar(&c.GatewayListen, "gateway-listen", c.GatewayListen, "address of the gateway to Functions (component gateway): /{namespace}/{function}/path, or Host <function>.<namespace>.svc[.cluster.local]")
	fs.StringVar(&c.ExposeListen, "expose-listen", c.ExposeListen, "address of the hosts of the cluster's APIRules (gateway.kyma-project.io/v2), served by their rules to whoever reaches it as far as a rule's access strategy lets them, plain HTTP; empty: APIRules are not served nor their status written")
	fs.Func("apirule-gateway", "namespace/name[/listener] of a Gateway (Gateway API) to write an HTTPRoute per APIRule for, instead of serving APIRules on -expose-listen (rules an HTTPRoute cannot enforce, jwt and extAuth among them, are left out and named in the APIRule's status)", func(v string) error {
		parts := strings.Split(v, "/")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
			return fmt.Errorf("want namespace/name[/listener], not %q", v)
		}
		p := &httproute.Parent{Namespace: parts[0], Name: parts[1]}
		if len(parts) == 3 {
			p.SectionName = parts[2]
		}
		c.APIRoutes = p
		return nil
	})
	fs.StringVar(&c.ExposeTLSCertFile, "expose-tls-cert-file", c.ExposeTLSCertFile, "certificate (PEM) of -expose-listen, which then serves TLS only; read again when it changes")
	fs.StringVar(&c.ExposeTLSKeyFile, "expose-tls-key-file", c.ExposeTLSKeyFile, "key (PEM) of -expose-tls-cert-file")
	fs.StringVar(&c.Gateway.APIRuleDomain, "apirule-domain", c.Gateway.APIRuleDomain, "domain of an APIRule's short hosts: my-function is my-function.<domain>; empty: short hosts are refused (status Error)")
	fs.Func("apirule-authorizers", `the external authorizers an APIRule's extAuth may name: a JSON list of {"name", "url" (http(s); its path comes before the request's), "timeout" ("5s"), "includeRequestHeaders" (default authorization, cookie), "headersToUpstream", "headersToDownstreamOnDeny" (default location, set-cookie, www-authenticate, content-type)}; each is asked about a request of such a rule (200 allows)`, func(v string) error {
		as, err := extauth.ParseAuthorizers(v)
		if err != nil {
			return err
		}
		c.Gateway.Authorizers = as
		return nil
	})
	fs.StringVar(&c.TokenFile, "token-file", c.TokenFile, "file with a bearer token (at least 16 characters) the publisher and the gateway require, as the bearer token or in the Kfn-Publisher-Token header beside a ServiceAccount token (both are then checked); functions send it from PUBLISHER_TOKEN beside their identity. Empty: no token")
	fs.Func("subscriptions", "manifest file of Subscriptions to serve without Kubernetes (repeatable); the reconciler then does not run", func(v string) error {
		c.Subscriptions = append(c.Subscriptions, v)
		return nil
	})
	fs.BoolVar(&c.LeaderElection, "leader-election", c.LeaderElection, "run the reconciler in one replica at a time")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", c.LeaderElectionNamespace, "namespace of the leader lease")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: "+logging.Levels)
	fs.StringVar(&c.TraceEndpoint, "trace-endpoint", c.TraceEndpoint, "OTLP/HTTP traces URL to export spans to, e.g. http://otel-collector:4318/v1/traces; empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT if set, else no tracing")
	c.Config.registerFlags(fs)
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
	if c.APIRoutes != nil && c.ExposeListen != "" {
		return fmt.Errorf("%w: -apirule-gateway writes the APIRules' routes for a Gateway: -expose-listen, which would serve them too, must be empty", ErrInvalidConfig)
	}
	if (c.ExposeTLSCertFile == "") != (c.ExposeTLSKeyFile == "") {
		return fmt.Errorf("%w: -expose-tls-cert-file and -expose-tls-key-file go together", ErrInvalidConfig)
	}
	switch {
	case c.MaxConnections < 1:
		return fmt.Errorf("%w: -max-connections must be at least 1", ErrInvalidConfig)
	case c.MaxConnectionsPerSource < 0:
		return fmt.Errorf("%w: -max-connections-per-source must be at least 0", ErrInvalidConfig)
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
