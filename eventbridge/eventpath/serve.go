package eventpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

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

// Reader reads a namespace's record: Namespaces reads one replica's,
// Replicas every replica's.
type Reader interface {
	// Find returns the chains that hold an event of id (and source,
	// unless empty).
	Find(ctx context.Context, namespace, id, source string) []Chain
	// Recent returns the most recently active chains, at most limit.
	Recent(ctx context.Context, namespace string, limit int) []Chain
}

// Limits of a listing of the recent chains.
const (
	// DefaultRecent is how many chains GET /events answers without a limit.
	DefaultRecent = 20
	// MaxRecent is the most it answers.
	MaxRecent = 100
)

// Handler serves, from the records read reads, to the callers access
// allows (none asked when access is nil; else get on subscriptions/events
// in the namespace):
//
//	GET /events?namespace=&limit=             the namespace's most recently active chains (Found, JSON; DefaultRecent, at most MaxRecent)
//	GET /events/{id}?namespace=&source=       the chains that hold the event (Found, JSON); 404 when the record holds none
//
// A namespace is required; 400 for an id, source or limit beyond what an
// event or the listing may have. bound, the events each namespace's record
// keeps, is named in the 404. Errors are JSON {"error": "..."}, as the
// rest of the admin API's.
func Handler(read Reader, bound int, access Access) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		namespace, ok := allowed(w, r, access, "")
		if !ok {
			return
		}
		limit := DefaultRecent
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxRecent {
				writeError(w, http.StatusBadRequest, fmt.Errorf("limit %.20q: want 1 to %d chains", v, MaxRecent))
				return
			}
			limit = n
		}
		writeFound(w, namespace, read.Recent(r.Context(), namespace, limit))
	})
	mux.HandleFunc("GET /events/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, source := r.PathValue("id"), r.URL.Query().Get("source")
		namespace, ok := allowed(w, r, access, id)
		if !ok {
			return
		}
		chains := read.Find(r.Context(), namespace, id, source)
		if len(chains) == 0 {
			what := fmt.Sprintf("%q", id)
			if source != "" {
				what += fmt.Sprintf(" of source %q", source)
			}
			writeError(w, http.StatusNotFound, fmt.Errorf("no event %s in namespace %s among the %d most recent events this event bridge keeps of it", what, namespace, bound))
			return
		}
		writeFound(w, namespace, chains)
	})
	return mux
}

// allowed checks the request's namespace, id and source and asks access
// whether its caller may read the namespace's paths, answering the
// request when not; it returns the namespace.
func allowed(w http.ResponseWriter, r *http.Request, access Access, id string) (string, bool) {
	q := r.URL.Query()
	namespace, source := q.Get("namespace"), q.Get("source")
	switch {
	case namespace == "":
		writeError(w, http.StatusBadRequest, errors.New("name the namespace whose events to read (?namespace=)"))
		return "", false
	case len(id) > eventstore.MaxIDLength || len(source) > v1alpha2.MaxEventSourceLength || len(namespace) > 63:
		writeError(w, http.StatusBadRequest, fmt.Errorf("an event id is at most %d bytes, a source %d and a namespace 63", eventstore.MaxIDLength, v1alpha2.MaxEventSourceLength))
		return "", false
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
			return "", false
		}
	}
	return namespace, true
}

func writeFound(w http.ResponseWriter, namespace string, chains []Chain) {
	if chains == nil {
		chains = []Chain{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(Found{Namespace: namespace, Chains: chains})
}

func writeError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
