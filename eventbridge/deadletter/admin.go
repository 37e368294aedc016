package deadletter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/replay"
	"github.com/kfn-dev/kfn/internal/auth"
)

// Errors of Admin.
var (
	// ErrNotFound: no dead letter has that sequence.
	ErrNotFound = errors.New("dead letter not found")
	// ErrInvalidFilter: the filter cannot select dead letters.
	ErrInvalidFilter = errors.New("invalid dead-letter filter")
	// ErrNoSubscription: the dead letter's Subscription has no consumer to
	// replay it to.
	ErrNoSubscription = errors.New("the dead letter's Subscription has no consumer")
)

// Limits of List.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Letter is one dead letter as the admin API shows it.
type Letter struct {
	// Sequence identifies the dead letter in the dead-letter stream.
	Sequence     uint64    `json:"sequence"`
	Namespace    string    `json:"namespace"`
	Subscription string    `json:"subscription"`
	Status       int       `json:"status"`
	Error        string    `json:"error"`
	Attempts     int       `json:"attempts"`
	FailedAt     time.Time `json:"failedAt"`
	// Subject is the event's subject in the event stream.
	Subject string `json:"subject"`
	// ID, Source and Type are the event's CloudEvent attributes.
	ID     string `json:"id"`
	Source string `json:"source"`
	Type   string `json:"type"`
	// ContentType and Data are the event's data; with Filter.Preview,
	// Data is only its start (at most MaxPreview bytes).
	ContentType string `json:"contentType,omitempty"`
	Data        []byte `json:"data,omitempty"`
	// DataSize is the size of the whole data in bytes.
	DataSize int `json:"dataSize"`
}

// Filter selects dead letters.
type Filter struct {
	// Namespace and Subscription select one Subscription's dead letters;
	// both empty select all. Subscription needs Namespace.
	Namespace, Subscription string
	// After skips dead letters up to this sequence (for paging).
	After uint64
	// Limit is the most returned; DefaultLimit when 0, at most MaxLimit.
	Limit int
	// Preview lists each letter with only the start of its data (the
	// MaxPreview bytes kept in its header HeaderDataPreview when it was
	// dead-lettered) and the size of the whole: the data itself is not
	// read, so a page of large letters costs what their headers do.
	// Letters stored before previews were kept have no data then.
	Preview bool
}

// Admin lists, replays and deletes dead letters. It is safe for concurrent
// use.
type Admin struct {
	js      jetstream.JetStream
	streams stream.Config
	events  *eventstore.Store
	filters replay.Filters
	access  Access
}

// Access decides what the caller of a request to Handler may do with dead
// letters (auth.Kubernetes, behind its Authenticate): a nil error allows;
// an error wrapping auth.ErrUnauthenticated is answered 401, any other
// 403 with its message. The attributes are a verb on the subresource
// deadletters of Subscriptions (Resource) in the letters' namespace, ""
// for a listing of every namespace: "list" to list, "get" to read one,
// "update" to replay, "delete" to delete.
type Access interface {
	Allow(r *http.Request, a auth.Attributes) error
}

// Resource is what Access is asked about: the subresource deadletters of
// eventing.kyma-project.io's subscriptions, which an RBAC rule grants as
// "subscriptions/deadletters".
var Resource = auth.Attributes{Group: "eventing.kyma-project.io", Resource: "subscriptions", Subresource: "deadletters"}

// AdminOption configures an Admin.
type AdminOption func(*Admin)

// WithAccess makes Handler ask access before it lists, reads, replays or
// deletes; without it, the handler serves whoever reaches it (kfn dev,
// whose listener is the user's own).
func WithAccess(access Access) AdminOption { return func(a *Admin) { a.access = access } }

// NewAdmin returns an Admin over the given streams.
func NewAdmin(js jetstream.JetStream, streams stream.Config, opts ...AdminOption) (*Admin, error) {
	if err := streams.Validate(); err != nil {
		return nil, err
	}
	a := &Admin{js: js, streams: streams, events: eventstore.New(js, streams.EventStream),
		filters: replay.Filters{JetStream: js, Streams: streams}}
	for _, o := range opts {
		o(a)
	}
	return a, nil
}

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

// listBufferBytes bounds the bytes of dead letters a listing reads ahead:
// a listing holds at most this and the letter it writes, however many it
// lists.
const listBufferBytes = 4 << 20

// previewReadAhead is how many letters a listing with Filter.Preview reads
// ahead: their headers, each at most the event's and the failure's.
const previewReadAhead = 64

// List returns the dead letters the filter selects, oldest first. It holds
// them all: for many, use Each.
func (a *Admin) List(ctx context.Context, f Filter) ([]Letter, error) {
	out := []Letter{}
	_, err := a.Each(ctx, f, func(l Letter) error {
		out = append(out, l)
		return nil
	})
	return out, err
}

// Each calls fn with each dead letter the filter selects, oldest first, up
// to its Limit, reading ahead at most listBufferBytes; an error of fn
// stops it and is returned. next is the sequence to pass as Filter.After
// for the next page, 0 when no letter is left after the last one given.
// The error wraps ErrInvalidFilter for a filter that cannot select.
func (a *Admin) Each(ctx context.Context, f Filter, fn func(Letter) error) (next uint64, err error) {
	subjects, err := f.subjects()
	if err != nil {
		return 0, err
	}
	if f.Limit == 0 {
		f.Limit = DefaultLimit
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverAllPolicy, HeadersOnly: f.Preview}
	if f.After > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = f.After + 1
	}
	c, err := a.js.OrderedConsumer(ctx, a.streams.DeadLetterStream, cfg)
	if err != nil {
		return 0, fmt.Errorf("read dead letters: %w", err)
	}
	// The server would keep the consumer for minutes after the last read:
	// remove it, so that listing often (kfn dev's web view) leaves none.
	defer a.deleteConsumer(c)
	info, err := c.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("read dead letters: %w", err)
	}
	if info.NumPending == 0 {
		return 0, nil
	}
	// Headers only (Preview) are small: a batch of messages, where a bound
	// in bytes would make the client buffer a million of them.
	readAhead := jetstream.PullMessagesOpt(jetstream.PullMaxBytes(listBufferBytes))
	if f.Preview {
		readAhead = jetstream.PullMaxMessages(previewReadAhead)
	}
	it, err := c.Messages(readAhead)
	if err != nil {
		return 0, fmt.Errorf("read dead letters: %w", err)
	}
	defer it.Stop()
	given := 0
	for left := info.NumPending; left > 0; left-- {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return 0, fmt.Errorf("read dead letters: %w", err)
		}
		meta, err := m.Metadata()
		if err != nil {
			continue
		}
		var l Letter
		if f.Preview {
			l = preview(meta.Sequence.Stream, m.Headers())
		} else {
			l = letter(meta.Sequence.Stream, m.Headers(), m.Data())
		}
		if !f.selects(l) {
			continue
		}
		if given == f.Limit {
			return next, nil // more are left: the next page starts after the last given
		}
		if err := fn(l); err != nil {
			return 0, err
		}
		given++
		next = l.Sequence
	}
	return 0, nil
}

// subjects returns the subjects the filter's dead letters are on: their
// namespace's, and those of dead letters of releases before per-namespace
// bounds (one per consumer). The error wraps ErrInvalidFilter.
func (f Filter) subjects() ([]string, error) {
	switch {
	case f.Subscription != "" && f.Namespace == "":
		return nil, fmt.Errorf("%w: a subscription needs its namespace", ErrInvalidFilter)
	case f.Limit < 0 || f.Limit > MaxLimit:
		return nil, fmt.Errorf("%w: limit must be between 1 and %d", ErrInvalidFilter, MaxLimit)
	case f.Namespace == "":
		return []string{DeadLetterSubjectPrefixAll}, nil
	}
	if errs := validation.IsDNS1123Label(f.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("%w: namespace %q: %s", ErrInvalidFilter, f.Namespace, strings.Join(errs, "; "))
	}
	legacy := stream.DeadLetterSubjectPrefix + ".*"
	if f.Subscription != "" {
		if errs := validation.IsDNS1123Subdomain(f.Subscription); len(errs) > 0 {
			return nil, fmt.Errorf("%w: subscription %q: %s", ErrInvalidFilter, f.Subscription, strings.Join(errs, "; "))
		}
		legacy = stream.LegacyDeadLetterSubject(stream.ConsumerName(f.Namespace, f.Subscription))
	}
	return []string{stream.DeadLetterSubject(f.Namespace), legacy}, nil
}

// selects reports whether the filter selects l: its subjects select its
// namespace's letters, which are told apart by their headers.
func (f Filter) selects(l Letter) bool {
	return (f.Namespace == "" || l.Namespace == f.Namespace) && (f.Subscription == "" || l.Subscription == f.Subscription)
}

// deleteConsumer removes the server's consumer behind the ordered consumer
// c; a failure leaves it to expire on its own.
func (a *Admin) deleteConsumer(c jetstream.Consumer) {
	deleteOrdered(a.js, a.streams.DeadLetterStream, c)
}

// deleteOrdered removes the server's consumer behind the ordered consumer
// c of stream name; a failure leaves it to expire on its own.
func deleteOrdered(js jetstream.JetStream, name string, c jetstream.Consumer) {
	info := c.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = js.DeleteConsumer(ctx, name, info.Name)
}

// DeadLetterSubjectPrefixAll selects every dead letter.
const DeadLetterSubjectPrefixAll = stream.DeadLetterSubjectPrefix + ".>"

func letter(seq uint64, h nats.Header, data []byte) Letter {
	status, _ := strconv.Atoi(h.Get(HeaderStatus))
	attempts, _ := strconv.Atoi(h.Get(HeaderAttempts))
	at, _ := time.Parse(time.RFC3339Nano, h.Get(HeaderFailedAt))
	return Letter{
		Sequence: seq, Namespace: h.Get(HeaderNamespace), Subscription: h.Get(HeaderSubscription),
		Status: status, Error: h.Get(HeaderError), Attempts: attempts, FailedAt: at,
		Subject: h.Get(HeaderSubject),
		ID:      eventstore.Attribute(h, "id"), Source: eventstore.Attribute(h, "source"), Type: eventstore.Attribute(h, "type"),
		ContentType: h.Get(eventstore.HeaderContentType), Data: data, DataSize: len(data),
	}
}

// headerMsgSize is the header in which JetStream gives the size of a
// message's data when it sends the headers only.
const headerMsgSize = "Nats-Msg-Size"

// preview is the letter of a message sent without its data (a consumer
// with HeadersOnly): Data is the preview its header kept.
func preview(seq uint64, h nats.Header) Letter {
	data, err := base64.StdEncoding.DecodeString(h.Get(HeaderDataPreview))
	if err != nil {
		data = nil
	}
	l := letter(seq, h, data)
	l.DataSize, _ = strconv.Atoi(h.Get(headerMsgSize))
	return l
}

// Get returns one dead letter; the error wraps ErrNotFound when there is
// none with that sequence.
func (a *Admin) Get(ctx context.Context, seq uint64) (Letter, error) {
	m, err := a.get(ctx, seq)
	if err != nil {
		return Letter{}, err
	}
	return letter(seq, m.Header, m.Data), nil
}

func (a *Admin) get(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	s, err := a.js.Stream(ctx, a.streams.DeadLetterStream)
	if err != nil {
		return nil, fmt.Errorf("open dead-letter stream: %w", err)
	}
	m, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: sequence %d", ErrNotFound, seq)
	}
	if err != nil {
		return nil, fmt.Errorf("get dead letter %d: %w", seq, err)
	}
	return m, nil
}

// Replay publishes a dead letter again to the Subscription it came from,
// and only to it (on that Subscription's replay subject, which only its
// consumer filters on, see package replay), then deletes it from the
// dead-letter stream. The event gets a fresh set of delivery attempts. A
// replay repeated after a crash between the two steps is stored once (its
// message id is derived from the dead letter's sequence). The error wraps
// ErrNotFound when there is no dead letter with that sequence, and
// ErrNoSubscription (the dead letter is kept) when its Subscription has no
// consumer.
func (a *Admin) Replay(ctx context.Context, seq uint64) (Letter, error) {
	m, err := a.get(ctx, seq)
	if err != nil {
		return Letter{}, err
	}
	l := letter(seq, m.Header, m.Data)
	h := make(nats.Header, len(m.Header))
	for k, v := range m.Header {
		if !strings.HasPrefix(k, "Kfn-") && !strings.HasPrefix(k, "Nats-") {
			h[k] = v
		}
	}
	consumer := m.Header.Get(HeaderConsumer)
	if consumer == "" {
		consumer = stream.ConsumerName(l.Namespace, l.Subscription)
	}
	release, err := a.filters.Hold(ctx, consumer)
	if errors.Is(err, replay.ErrNoConsumer) {
		return Letter{}, fmt.Errorf("replay dead letter %d: %w: %s/%s (deleted, or its spec cannot be served)", seq, ErrNoSubscription, l.Namespace, l.Subscription)
	}
	if err != nil {
		return Letter{}, fmt.Errorf("replay dead letter %d: %w", seq, err)
	}
	msg := &nats.Msg{Subject: stream.ReplaySubject(consumer), Header: h, Data: m.Data}
	_, err = a.events.PublishMsg(ctx, msg, "replay:"+a.streams.DeadLetterStream+":"+strconv.FormatUint(seq, 10))
	release()
	if err != nil {
		return Letter{}, fmt.Errorf("replay dead letter %d: %w", seq, err)
	}
	if err := a.Delete(ctx, seq); err != nil && !errors.Is(err, ErrNotFound) {
		return Letter{}, err
	}
	return l, nil
}

// Delete removes a dead letter; the error wraps ErrNotFound when there is
// none with that sequence.
func (a *Admin) Delete(ctx context.Context, seq uint64) error {
	s, err := a.js.Stream(ctx, a.streams.DeadLetterStream)
	if err != nil {
		return fmt.Errorf("open dead-letter stream: %w", err)
	}
	err = s.DeleteMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		return fmt.Errorf("%w: sequence %d", ErrNotFound, seq)
	}
	if err != nil {
		return fmt.Errorf("delete dead letter %d: %w", seq, err)
	}
	return nil
}

// Handler serves the admin API:
//
//	GET    /deadletters?namespace=&subscription=&after=&limit=   list (JSON array of Letter)
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
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}
