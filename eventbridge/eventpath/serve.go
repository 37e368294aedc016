package eventpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/internal/seats"
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

// Limits bound the reads a Handler serves at once. A read of Replicas asks
// every other replica for its record of the namespace, which each encodes
// on the one goroutine that answers all questions: without a bound, one
// namespace's callers could keep every replica encoding and slow every
// other namespace's kfn trace. Zero values mean the defaults.
type Limits struct {
	// PerNamespace bounds one namespace's reads at once. Default 2.
	PerNamespace int
	// Total bounds all namespaces' reads at once; a read that frees goes
	// to the waiting namespace that holds the fewest. Default 8.
	Total int
	// Wait is how long a read past the bounds waits for its turn before
	// it is answered 429 with Retry-After. Default 2s.
	Wait time.Duration
}

// Defaults of Limits.
const (
	DefaultReadsPerNamespace = 2
	DefaultReadsAtOnce       = 8
	DefaultReadWait          = 2 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.PerNamespace <= 0 {
		l.PerNamespace = DefaultReadsPerNamespace
	}
	if l.Total <= 0 {
		l.Total = DefaultReadsAtOnce
	}
	if l.Wait <= 0 {
		l.Wait = DefaultReadWait
	}
	return l
}

// Handler serves, from the records read reads, to the callers access
// allows (none asked when access is nil; else get on subscriptions/events
// in the namespace), at most limits' reads at once:
//
//	GET /events?namespace=&limit=             the namespace's most recently active chains (Found, JSON; DefaultRecent, at most MaxRecent)
//	GET /events/{id}?namespace=&source=       the chains that hold the event (Found, JSON); 404 when the record holds none
//
// A namespace is required; 400 for an id, source or limit beyond what an
// event or the listing may have, 429 (Retry-After) for a read that waited
// Limits.Wait for its turn. bound, the events each namespace's record
// keeps, is named in the 404. Errors are JSON {"error": "..."}, as the
// rest of the admin API's.
func Handler(read Reader, bound int, access Access, limits Limits) http.Handler {
	limits = limits.withDefaults()
	gate := seats.New(limits.PerNamespace, seats.WithTotal(limits.Total))
	// turn waits for a seat of the namespace's, answering 429 when none
	// came; done gives it back.
	turn := func(w http.ResponseWriter, r *http.Request, namespace string) (done func(), ok bool) {
		ctx, cancel := context.WithTimeout(r.Context(), limits.Wait)
		defer cancel()
		if err := gate.Enter(ctx, namespace); err != nil {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, fmt.Errorf("too many reads of events' paths at once (%d a namespace, %d in all): %w", limits.PerNamespace, limits.Total, err))
			return nil, false
		}
		return func() { gate.Leave(namespace) }, true
	}
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
		done, ok := turn(w, r, namespace)
		if !ok {
			return
		}
		defer done()
		writeFound(w, namespace, read.Recent(r.Context(), namespace, limit))
	})
	mux.HandleFunc("GET /events/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, source := r.PathValue("id"), r.URL.Query().Get("source")
		namespace, ok := allowed(w, r, access, id)
		if !ok {
			return
		}
		done, ok := turn(w, r, namespace)
		if !ok {
			return
		}
		defer done()
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
			code := auth.Status(err)
			if code == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "1")
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
