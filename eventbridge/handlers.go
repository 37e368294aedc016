package eventbridge

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/depcache"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/internal/auth"
)

// Handlers are the event bridge's HTTP handlers, with the access rules of
// their listeners; a host serves each on a listener of its own (Run) or
// mounts them on one (kfn dev). A handler is nil when its part does not
// run.
type Handlers struct {
	// Publisher serves publisher.Routes, and the dependency cache's
	// routes under depcache.PathPrefix (404 when it is off), which
	// authenticate their callers by their ServiceAccount tokens, whether
	// or not a token is set (WithToken).
	Publisher http.Handler
	// Gateway serves requests to Functions; until it knows the Functions
	// (the cluster's EndpointSlices synced), it holds them.
	Gateway http.Handler
	// Exposed serves the hosts of the APIRules (Config.ServeAPIRules), by
	// their rules, whose access strategy decides who may call; 404 for
	// any other host. Nil when the APIRules are not served.
	Exposed http.Handler
	// DeadLetters serves the dead-letter admin API (also under
	// deadletter.PathPrefix); with Access.Admin, to the callers Kubernetes
	// authenticates, each as far as RBAC lets them.
	DeadLetters http.Handler
}

// Handlers returns the parts' handlers. The publisher's and the gateway's
// require the token when set (WithToken), but for their health checks.
func (b *Bridge) Handlers() Handlers {
	var h Handlers
	if b.Publisher != nil {
		var dependencies http.Handler = b.DependencyCache
		if b.DependencyCache == nil {
			dependencies = depcache.Off(b.dependenciesOff)
		}
		h.Publisher = withDependencies(dependencies, auth.RequireToken(b.opts.token, b.Publisher, "/healthz", "/readyz"))
	}
	if b.Gateway != nil && b.cfg.ServeAPIRules {
		h.Exposed = waitFor(b.gatewayReady, b.Gateway.Exposed(http.HandlerFunc(noAPIRule)))
	}
	if b.Gateway != nil {
		h.Gateway = waitFor(b.gatewayReady, b.Gateway)
		if b.opts.access.Gateway != nil {
			h.Gateway = b.opts.access.Gateway.Authenticate(h.Gateway, "/healthz", "/readyz")
		} else {
			h.Gateway = auth.RequireToken(b.opts.token, h.Gateway, "/healthz", "/readyz")
		}
	}
	if b.DeadLetters != nil {
		h.DeadLetters = b.DeadLetters.Handler()
		if b.EventPaths != nil {
			var access eventpath.Access // none asked without the admin's (a nil *auth.Kubernetes is not nil here)
			if b.opts.access.Admin != nil {
				access = b.opts.access.Admin
			}
			var read eventpath.Reader = b.EventPaths
			if b.pathReplicas != nil {
				read = b.pathReplicas
			}
			h.DeadLetters = withEventPaths(eventpath.Handler(read, b.cfg.EventPaths, access, eventpath.Limits{}), h.DeadLetters)
		}
		if b.opts.access.Admin != nil {
			h.DeadLetters = b.opts.access.Admin.Authenticate(h.DeadLetters)
		}
	}
	return h
}

// noAPIRule answers a request whose host no APIRule has: 404, as Kyma's
// gateway does.
func noAPIRule(w http.ResponseWriter, r *http.Request) {
	http.Error(w, fmt.Sprintf("no APIRule has host %.256q", r.Host), http.StatusNotFound)
}

// withDependencies serves the paths under depcache.PathPrefix with
// dependencies, the others with h. The path is matched as sent, not
// cleaned (a ServeMux would redirect a path with "..": the cache refuses
// it).
func withDependencies(dependencies, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, depcache.PathPrefix) || strings.HasPrefix(r.URL.EscapedPath(), depcache.PathPrefix) {
			dependencies.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// waitFor holds each request to h until ready is closed, or its client
// leaves. A nil ready serves at once.
func waitFor(ready <-chan struct{}, h http.Handler) http.Handler {
	if ready == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-ready:
			h.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	})
}

// withEventPaths serves GET /events and /events/{id} (also under
// deadletter.PathPrefix, as kfn trace asks kfn dev) with h, and the rest
// of the admin API with admin.
func withEventPaths(h, admin http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /events", h)
	mux.Handle("GET /events/{id}", h)
	mux.Handle("GET "+deadletter.PathPrefix+"/events", http.StripPrefix(deadletter.PathPrefix, h))
	mux.Handle("GET "+deadletter.PathPrefix+"/events/{id}", http.StripPrefix(deadletter.PathPrefix, h))
	mux.Handle("/", admin)
	return mux
}
