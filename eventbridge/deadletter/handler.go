package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/kfn-dev/kfn/internal/auth"
)

// Handler serves the admin API:
//
//	GET    /deadletters?namespace=&subscription=&after=&limit=&preview=   list (JSON array of Letter; preview=true: only the start of each one's data, Filter.Preview)
//	GET    /deadletters/{sequence}                               one Letter
//	POST   /deadletters/{sequence}/replay                        replay one (200 with the Letter)
//	POST   /deadletters/replay?namespace=&subscription=          replay a Subscription's (up to MaxLimit; {"replayed": n})
//	DELETE /deadletters/{sequence}                               delete one (204)
//
// Errors are JSON {"error": "..."} with 400, 404, 409 or 503. The same routes
// are served under [PathPrefix] too, where kfn dev serves them, so that
// `kfn dlq --addr` reaches either.
func (a *Admin) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /deadletters", a.serveList)
	mux.HandleFunc("GET /deadletters/{seq}", a.serveOne("get", func(ctx context.Context, seq uint64) (any, int, error) {
		l, err := a.Get(ctx, seq)
		return l, http.StatusOK, err
	}))
	mux.HandleFunc("POST /deadletters/{seq}/replay", a.serveOne("update", func(ctx context.Context, seq uint64) (any, int, error) {
		l, err := a.Replay(ctx, seq)
		return l, http.StatusOK, err
	}))
	mux.HandleFunc("DELETE /deadletters/{seq}", a.serveOne("delete", func(ctx context.Context, seq uint64) (any, int, error) {
		return nil, http.StatusNoContent, a.Delete(ctx, seq)
	}))
	mux.HandleFunc("POST /deadletters/replay", a.serveReplayAll)
	outer := http.NewServeMux()
	outer.Handle("/", mux)
	outer.Handle(PathPrefix+"/", http.StripPrefix(PathPrefix, mux))
	return outer
}

// PathPrefix is the path prefix of kfn's own HTTP APIs in kfn dev, which
// the kfn command puts before every admin path.
const PathPrefix = "/_kfn"

// allow asks Access whether the caller of r may do verb with the dead
// letters of namespace.
func (a *Admin) allow(r *http.Request, verb, namespace string) error {
	if a.access == nil {
		return nil
	}
	attrs := Resource
	attrs.Verb, attrs.Namespace = verb, namespace
	return a.access.Allow(r, attrs)
}

// allowLetter asks Access whether the caller of r may do verb with the
// dead letter seq, reading it for its namespace.
func (a *Admin) allowLetter(r *http.Request, verb string, seq uint64) error {
	if a.access == nil {
		return nil
	}
	l, err := a.Get(r.Context(), seq)
	if err != nil {
		return err
	}
	return a.allow(r, verb, l.Namespace)
}

// serveList writes the letters as a JSON array, each as it is read, so
// that a page of large letters is never held whole; when more are left,
// the trailer Kfn-Next-After is the "after" of the next page (a trailer:
// it is known only once the page is written). An error before the first
// letter is answered with its status; one after it ends the array
// unclosed (invalid JSON), the status being sent.
func (a *Admin) serveList(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r)
	if err == nil {
		err = a.allow(r, "list", f.Namespace)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	enc := json.NewEncoder(w)
	started := false
	start := func() {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Trailer", HeaderNextAfter)
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "[")
		started = true
	}
	next, err := a.Each(r.Context(), f, func(l Letter) error {
		if !started {
			start()
		} else {
			_, _ = io.WriteString(w, ",")
		}
		return enc.Encode(l)
	})
	if err != nil {
		if !started {
			writeError(w, err)
		}
		return
	}
	if !started {
		start()
	}
	_, _ = io.WriteString(w, "]")
	if next > 0 {
		w.Header().Set(HeaderNextAfter, strconv.FormatUint(next, 10))
	}
}

// HeaderNextAfter is the trailer of a listing that has more letters: the
// "after" of the next page.
const HeaderNextAfter = "Kfn-Next-After"

func (a *Admin) serveReplayAll(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r)
	if err == nil && f.Subscription == "" {
		err = fmt.Errorf("%w: replaying needs namespace and subscription", ErrInvalidFilter)
	}
	if err == nil {
		err = a.allow(r, "update", f.Namespace)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	f.Limit = MaxLimit
	n := 0
	_, err = a.Each(r.Context(), f, func(l Letter) error {
		if _, err := a.Replay(r.Context(), l.Sequence); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"replayed": n})
}

func (a *Admin) serveOne(verb string, f func(context.Context, uint64) (any, int, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
		if err != nil || seq == 0 {
			writeError(w, fmt.Errorf("%w: sequence must be a positive integer, not %q", ErrInvalidFilter, r.PathValue("seq")))
			return
		}
		if err := a.allowLetter(r, verb, seq); err != nil {
			writeError(w, err)
			return
		}
		v, code, err := f(r.Context(), seq)
		if err != nil {
			writeError(w, err)
			return
		}
		if v == nil {
			w.WriteHeader(code)
			return
		}
		writeJSON(w, code, v)
	}
}

func parseFilter(r *http.Request) (Filter, error) {
	q := r.URL.Query()
	f := Filter{Namespace: q.Get("namespace"), Subscription: q.Get("subscription")}
	var err error
	if v := q.Get("after"); v != "" {
		if f.After, err = strconv.ParseUint(v, 10, 64); err != nil {
			return Filter{}, fmt.Errorf("%w: after must be a sequence number, not %q", ErrInvalidFilter, v)
		}
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 {
			return Filter{}, fmt.Errorf("%w: limit must be between 1 and %d, not %q", ErrInvalidFilter, MaxLimit, v)
		}
	}
	if v := q.Get("preview"); v != "" {
		if f.Preview, err = strconv.ParseBool(v); err != nil {
			return Filter{}, fmt.Errorf("%w: preview must be true or false, not %.20q", ErrInvalidFilter, v)
		}
	}
	return f, nil
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusServiceUnavailable
	switch {
	case errors.Is(err, ErrInvalidFilter):
		code = http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrNoSubscription):
		code = http.StatusConflict
	case errors.Is(err, auth.ErrUnauthenticated):
		code = http.StatusUnauthorized
	case errors.Is(err, auth.ErrForbidden):
		code = http.StatusForbidden
	case errors.Is(err, auth.ErrTooManyChecks):
		w.Header().Set("Retry-After", "1")
		code = http.StatusTooManyRequests
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}
