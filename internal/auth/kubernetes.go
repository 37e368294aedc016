package auth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
)

// Audience is the token audience of kfn's own: a ServiceAccount token
// made for it (a projected token with this audience, which the API server
// refuses) is accepted on every listener; the tokens the API server itself
// accepts (a user's kubeconfig token, Prometheus's) only over TLS, so that
// no token the API server takes crosses the network in the clear to kfn.
const Audience = "kfn"

// Errors of Kubernetes.Allow, which a handler answers with 401 and 403.
var (
	// ErrUnauthenticated: the request carries no credential Kubernetes
	// accepts.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: the caller is known, and RBAC does not let them.
	ErrForbidden = errors.New("forbidden")
)

// Attributes are what a caller asks to do, as RBAC names it: a verb on a
// resource (and subresource) of an API group in a namespace ("" for every
// namespace), and on one object of it when Name is set (which an RBAC rule
// can grant alone with resourceNames); or, with Path, a verb on a
// non-resource URL (an RBAC rule's nonResourceURLs).
type Attributes struct {
	Verb, Group, Resource, Subresource, Namespace, Name string
	// Path, when set, makes the attributes a non-resource request: the
	// resource fields are ignored.
	Path string
}

// Metrics is what a Prometheus scrape asks: get on the non-resource URL
// /metrics, which the chart's ClusterRole <release>-metrics-reader grants.
var Metrics = Attributes{Verb: "get", Path: "/metrics"}

// String names the permission, as an RBAC rule would grant it.
func (a Attributes) String() string {
	if a.Path != "" {
		return a.Verb + " " + a.Path
	}
	r := a.Resource
	if a.Subresource != "" {
		r += "/" + a.Subresource
	}
	where := "in every namespace"
	if a.Namespace != "" {
		where = "in namespace " + a.Namespace
	}
	r += "." + a.Group
	if a.Name != "" {
		r += " " + a.Name
	}
	return fmt.Sprintf("%s %s %s", a.Verb, r, where)
}

// KubernetesConfig tunes Kubernetes; the zero value works.
type KubernetesConfig struct {
	// CacheTTL is how long a token's review and an allowed decision are
	// kept (default 2 minutes); one used in the second half of it is
	// asked again in the background, so that a caller that keeps calling
	// waits for no review after its first, and none served is older than
	// CacheTTL. A denial is kept a tenth of it, not renewed.
	CacheTTL time.Duration
	// Timeout bounds one TokenReview or SubjectAccessReview (default 10s).
	Timeout time.Duration
	// NewTokensPerSecond bounds the TokenReviews of bearer tokens not
	// reviewed within CacheTTL, per listener (each Listener has its own
	// budget; default 100 a second, bursts of five times as many: a
	// scale-out of hundreds of pods, each with its own token, passes); a
	// quarter of it for the tokens of one namespace while the total holds
	// less than half (an equal part of half of it each while more than two
	// namespaces send new tokens), when the cluster signed them for kfn (their
	// signature checked against the API server's ServiceAccount issuer
	// keys, /openid/v1/jwks, before a review), and a
	// tenth of it for one caller address for any other token, which
	// together have at most half: more are answered 429
	// (ErrTooManyReviews), so that made-up tokens cannot flood the API
	// server, nor one namespace or caller spend the others' budget. Tokens accepted
	// before are not limited; a token refused before is answered 401
	// without a review. The SubjectAccessReviews of decisions not kept
	// (Allow) have a budget of the same size of their own, shared the same
	// way (a ServiceAccount's namespace, a user by name in place of an
	// address): past it ErrTooManyChecks, answered 429.
	NewTokensPerSecond float64
	// Logger is where Kubernetes says what it cannot do (read the
	// issuer's keys); default none.
	Logger *slog.Logger
}

// Kubernetes authenticates a listener's callers as the API server does and
// authorizes them with its RBAC: a bearer token through TokenReview (of
// kfn's Audience, or over TLS also the API server's own), a client
// certificate against
// the cluster's client CA (the ConfigMap kube-system/
// extension-apiserver-authentication, which it follows); a decision through
// SubjectAccessReview. Reviews and decisions are kept, and renewed while
// used (KubernetesConfig.CacheTTL). Its identity
// needs the ClusterRole system:auth-delegator, for the client CA the Role
// kube-system/extension-apiserver-authentication-reader, and, to meter new
// tokens per namespace, get on /openid/v1/jwks (ClusterRole
// system:service-account-issuer-discovery; without it new tokens are
// metered per caller address only).
type Kubernetes struct {
	reviews  *reviews
	budget   *budget // this listener's, of new tokens
	checks   *budget // this listener's, of decisions not kept
	cfg      KubernetesConfig
	authz    renewedDecisions
	ca       *dynamiccertificates.ConfigMapCAController
	caLoaded chan struct{} // closed once Run read the client CA
	loaded   *sync.Once
	running  *atomic.Bool // whether a Run follows the CA
}

// NewKubernetes makes a Kubernetes that asks the API server of client.
// Run must run for client certificates to be accepted.
func NewKubernetes(client kubernetes.Interface, cfg KubernetesConfig) (*Kubernetes, error) {
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = 2 * time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.NewTokensPerSecond <= 0 {
		cfg.NewTokensPerSecond = 100
	}
	backoff := &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca", "kube-system", "extension-apiserver-authentication", "client-ca-file", client)
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	verdicts := newVerdicts(cfg.CacheTTL, 10000)
	tokens, err := newTokenReviews(client.AuthenticationV1(), verdicts, *backoff, cfg.Timeout, cfg.CacheTTL)
	if err != nil {
		return nil, err
	}
	// The delegating authorizer keeps no decision (a nanosecond): the
	// renewal in front of it keeps and renews them.
	reviewer, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(), AllowCacheTTL: time.Nanosecond, DenyCacheTTL: time.Nanosecond,
		WebhookRetryBackoff: backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	authz := renewedDecisions{next: reviewer, allowed: cfg.CacheTTL, denied: cfg.CacheTTL / 10, answers: newRenewal[decision](maxKept, cfg.Timeout)}
	k := &Kubernetes{cfg: cfg, authz: authz, ca: ca, caLoaded: make(chan struct{}), loaded: &sync.Once{}, running: &atomic.Bool{},
		reviews: &reviews{
			certificates: group.NewAuthenticatedGroupAdder(x509.NewDynamic(ca.VerifyOptions, x509.CommonNameUserConversion)),
			tokens:       tokens, verdicts: verdicts,
			issuer: newIssuerKeys(restKeys(restClient(client)), cfg.Timeout, cfg.Logger),
		}}
	return k.Listener(), nil
}

// Listener returns a Kubernetes for another listener: it shares k's
// reviews, decisions and client CA (Run of either serves both), and has
// budgets of new tokens and of decisions not kept of its own, so that one
// listener's callers cannot spend another's.
func (k *Kubernetes) Listener() *Kubernetes {
	l := *k
	l.budget = newBudget(k.cfg.NewTokensPerSecond, max(1, int(5*k.cfg.NewTokensPerSecond)))
	l.checks = newBudget(k.cfg.NewTokensPerSecond, max(1, int(5*k.cfg.NewTokensPerSecond)))
	return &l
}

// Run follows the cluster's client CA until ctx ends, then returns nil.
// Client certificates are accepted once it has read the CA (the informer
// of its ConfigMap synced); a request with one waits for that, at most
// caWait. The Kubernetes of every Listener share the CA: a Run of any of
// them serves all, and a second Run only waits for ctx to end.
func (k *Kubernetes) Run(ctx context.Context) error {
	if !k.running.CompareAndSwap(false, true) {
		<-ctx.Done()
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.ca.Run(ctx, 1)
	}()
	keysDone := make(chan struct{})
	go func() {
		defer close(keysDone)
		k.reviews.issuer.follow(ctx)
	}()
	defer func() { <-keysDone }()
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		_, ok := k.ca.VerifyOptions()
		return ok, nil
	})
	if err == nil {
		k.loaded.Do(func() { close(k.caLoaded) })
	}
	<-done
	return nil
}

// restClient is the client of client's API server's own paths, nil when
// it has none (a fake's).
func restClient(client kubernetes.Interface) rest.Interface {
	d := client.Discovery()
	if d == nil {
		return nil
	}
	return d.RESTClient()
}

// plainHTTPTokens says which bearer tokens a listener takes over plain
// HTTP.
const plainHTTPTokens = "over plain HTTP only a ServiceAccount token of audience " + Audience + " is taken"

// caWait bounds how long a request with a client certificate waits for
// the client CA.
const caWait = 10 * time.Second

type callerKey struct{}

// Authenticate serves h the requests whose caller Kubernetes knows (Allow
// then reads the caller from the request) and answers 401 to the others,
// but for the paths of open, served to anyone. The credential is removed
// from the request h gets. A request with a client certificate waits
// until Run has read the cluster's client CA (at most caWait), so that a
// listener that starts before it refuses no good certificate.
func (k *Kubernetes) Authenticate(h http.Handler, open ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range open {
			if r.URL.Path == p {
				h.ServeHTTP(w, r)
				return
			}
		}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			t := time.NewTimer(caWait)
			select {
			case <-k.caLoaded:
			case <-t.C: // not read yet: the certificate is refused below
			case <-r.Context().Done():
				t.Stop()
				return
			}
			t.Stop()
		}
		resp, ok, err := k.reviews.authenticate(r, k.budget)
		if errors.Is(err, ErrTooManyReviews) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return
		}
		if err != nil || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kfn"`)
			reason := "send a Kubernetes bearer token or client certificate (kfn's CLI sends the kubeconfig's)"
			if err != nil {
				reason = err.Error()
			}
			if _, ok := bearer(r); ok && r.TLS == nil {
				reason += "; " + plainHTTPTokens
			}
			http.Error(w, "unauthenticated: "+reason, http.StatusUnauthorized)
			return
		}
		r.Header.Del("Authorization")
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, resp.User)))
	})
}

// SenderNamespace returns the namespace of the ServiceAccount whose bearer
// token r carries (of kfn's audience; over TLS also the API server's): "" for a
// request without one or for a caller that is no ServiceAccount (a user),
// an error wrapping ErrUnauthenticated for a token the cluster does not
// know, ErrTooManyReviews past the rate of new tokens. It implements
// publisher.Senders. The token is taken out of r.
func (k *Kubernetes) SenderNamespace(r *http.Request) (string, error) {
	if _, ok := bearer(r); !ok {
		return "", nil
	}
	resp, ok, err := k.reviews.authenticate(r, k.budget)
	if errors.Is(err, ErrTooManyReviews) {
		return "", err
	}
	if err != nil || !ok {
		if err == nil {
			err = errors.New("the cluster does not know the bearer token")
		}
		if r.TLS == nil {
			return "", fmt.Errorf("%w: %w; %s", ErrUnauthenticated, err, plainHTTPTokens)
		}
		return "", fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	r.Header.Del("Authorization")
	namespace, _, err := serviceaccount.SplitUsername(resp.User.GetName())
	if err != nil {
		return "", nil // a user, not a ServiceAccount
	}
	return namespace, nil
}

// checker is who asks for a decision, as budget meters them: a
// ServiceAccount by its namespace, a user by its name (in place of an
// address: a user's requests may come from anywhere).
func checker(u user.Info) caller {
	if namespace, _, err := serviceaccount.SplitUsername(u.GetName()); err == nil {
		return caller{namespace: namespace}
	}
	return caller{address: "user " + u.GetName()}
}

// bearer is r's bearer token, if it has one.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
		return "", false
	}
	return token, true
}

// Allow returns nil when the caller of r (as Authenticate found them) may
// do what a asks, an error wrapping ErrForbidden that names the missing
// permission when not, one wrapping ErrUnauthenticated for a request
// Authenticate did not see, and one wrapping ErrTooManyChecks when the
// decision is not kept and the caller spent its share of the listener's
// SubjectAccessReviews (a ServiceAccount its namespace's, as new tokens
// are metered; a user its own, with the other users at most half).
func (k *Kubernetes) Allow(r *http.Request, a Attributes) error {
	u, ok := r.Context().Value(callerKey{}).(user.Info)
	if !ok {
		return ErrUnauthenticated
	}
	attrs := authorizer.AttributesRecord{
		User: u, Verb: a.Verb, Namespace: a.Namespace, APIGroup: a.Group, Resource: a.Resource, Subresource: a.Subresource,
		Name: a.Name, ResourceRequest: true,
	}
	if a.Path != "" {
		attrs = authorizer.AttributesRecord{User: u, Verb: a.Verb, Path: a.Path}
	}
	verdict, reason, err := k.authz.decide(r.Context(), attrs, func() error {
		if k.checks != nil && !k.checks.allow(checker(u), true, time.Now()) {
			return fmt.Errorf("%w: %s asked for too many decisions not kept", ErrTooManyChecks, u.GetName())
		}
		return nil
	})
	if errors.Is(err, ErrTooManyChecks) {
		return err
	}
	if err != nil && verdict != authorizer.DecisionAllow {
		return fmt.Errorf("%w: cannot check whether %s may %s: %w", ErrForbidden, u.GetName(), a, err)
	}
	if verdict != authorizer.DecisionAllow {
		if reason = strings.TrimSpace(reason); reason != "" {
			reason = " (" + reason + ")"
		}
		return fmt.Errorf("%w: %s may not %s%s", ErrForbidden, u.GetName(), a, reason)
	}
	return nil
}

// Require serves h the requests of callers the cluster knows and RBAC lets
// do a; it answers 401 to unknown callers, 429 past the rate of new tokens
// or of decisions not kept, and 403, naming the missing permission, to the
// others.
func (k *Kubernetes) Require(a Attributes, h http.Handler) http.Handler {
	return k.Authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := k.Allow(r, a); err != nil {
			code := Status(err)
			if code == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "1")
			}
			http.Error(w, err.Error(), code)
			return
		}
		h.ServeHTTP(w, r)
	}))
}

// SelfSignedTLS is the TLS of a listener that Kubernetes guards: a
// certificate for host made at start and signed by itself. Its callers
// authenticate with Kubernetes credentials, not by checking the
// certificate (Prometheus scrapes with insecureSkipVerify, kfn's commands
// come through a port-forward the API server authenticated); TLS keeps
// those credentials off the wire.
func SelfSignedTLS(host string) (*tls.Config, error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("self-signed certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("self-signed certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// ClientTransport is how a kfn command reaches a listener that
// Kubernetes guards, as the user of cfg (a kubeconfig's): it sends cfg's
// credentials, whichever kind they are (bearer token, client certificate,
// exec plugin), over TLS without checking the listener's certificate,
// which its process made for itself. Use it only through a tunnel the API
// server authenticated to the pod it chose (a port-forward), which is what
// tells the command it reaches kfn's pod.
func ClientTransport(cfg *rest.Config) (http.RoundTripper, error) {
	c := rest.CopyConfig(cfg)
	c.TLSClientConfig.Insecure = true
	c.TLSClientConfig.CAData, c.TLSClientConfig.CAFile, c.TLSClientConfig.ServerName = nil, "", ""
	rt, err := rest.TransportFor(c)
	if err != nil {
		return nil, fmt.Errorf("transport with the kubeconfig's credentials: %w", err)
	}
	return rt, nil
}

// Status is the HTTP status code that answers an error of Allow: 401 for
// ErrUnauthenticated, 429 for ErrTooManyChecks (answer Retry-After too),
// 403 for any other.
func Status(err error) int {
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, ErrTooManyChecks):
		return http.StatusTooManyRequests
	}
	return http.StatusForbidden
}
