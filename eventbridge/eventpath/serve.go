package eventpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/auth"
)

// Found is the answer of GET /events/{id}: the chains that hold the events
// of that CloudEvents id (and source, when asked), as the record of
// Namespace keeps them (kfn dev: every namespace's, Namespace empty).
type Found struct {
	Namespace string  `json:"namespace,omitempty"`
	Chains    []Chain `json:"chains"`
}

// Access decides whether the caller of a request may read a namespace's
// event paths (auth.Kubernetes behind its Authenticate): a nil error
// allows; one wrapping auth.ErrUnauthenticated is answered 401, any other
// 403 with its message.
type Access interface {
	Allow(r *http.Request, a auth.Attributes) error
}

// Resource is what Access is asked about, with the verb get and the
// namespace asked for: the subresource events of eventing.kyma-project.io's
// subscriptions, which an RBAC rule grants as "subscriptions/events"
// (kfn's chart aggregates it into the view role, beside the dead letters).
var Resource = auth.Attributes{Group: "eventing.kyma-project.io", Resource: "subscriptions", Subresource: "events", Verb: "get"}

// Finder returns the chains of namespace's record that hold an event of
// id (and source, unless empty): Namespaces.Find of one replica's record,
// Replicas.Find of every replica's.
type Finder func(ctx context.Context, namespace, id, source string) []Chain

// Handler serves GET /events/{id}?namespace=&source= from the namespace's
// record (Found, JSON) as find finds it (nil: n's own), to the callers
// access allows (none asked when access is nil); 400 without a namespace
// or with an id or source longer than an event's may be, 404 when the
// record holds no such event. Errors are JSON {"error": "..."}, as the
// rest of the admin API's.
func (n *Namespaces) Handler(find Finder, access Access) http.Handler {
	if find == nil {
		find = func(_ context.Context, namespace, id, source string) []Chain { return n.Find(namespace, id, source) }
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, q := r.PathValue("id"), r.URL.Query()
		namespace, source := q.Get("namespace"), q.Get("source")
		switch {
		case namespace == "":
			writeError(w, http.StatusBadRequest, errors.New("name the namespace whose events to read (?namespace=)"))
			return
		case len(id) > eventstore.MaxIDLength || len(source) > v1alpha2.MaxEventSourceLength || len(namespace) > 63:
			writeError(w, http.StatusBadRequest, fmt.Errorf("an event id is at most %d bytes, a source %d and a namespace 63", eventstore.MaxIDLength, v1alpha2.MaxEventSourceLength))
			return
		}
		if access != nil {
			attrs := Resource
			attrs.Namespace = namespace
			if err := access.Allow(r, attrs); err != nil {
				code := http.StatusForbidden
				if errors.Is(err, auth.ErrUnauthenticated) {
					code = http.StatusUnauthorized
				}
				writeError(w, code, err)
				return
			}
		}
		chains := find(r.Context(), namespace, id, source)
		if len(chains) == 0 {
			what := fmt.Sprintf("%q", id)
			if source != "" {
				what += fmt.Sprintf(" of source %q", source)
			}
			writeError(w, http.StatusNotFound, fmt.Errorf("no event %s in namespace %s among the %d most recent events this event bridge keeps of it", what, namespace, n.perNamespace))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Found{Namespace: namespace, Chains: chains})
	})
}

func writeError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
