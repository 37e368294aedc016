package webview

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"time"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/local/devstatus"
)

//go:embed static
var static embed.FS

// Source is what the view reads of a running kfn dev; *dev.Platform
// implements it.
type Source interface {
	// Status returns the functions and Subscriptions now.
	Status() devstatus.Status
}

// DeadLetters lists dead letters; *deadletter.Admin implements it.
type DeadLetters interface {
	List(ctx context.Context, f deadletter.Filter) ([]deadletter.Letter, error)
}

// Events are the recent events' chains the page shows: kfn dev's Recorder
// (Recorded), or a cluster's event bridge, read through its admin API.
type Events interface {
	// Recent returns the most recently active chains, at most limit.
	Recent(ctx context.Context, limit int) ([]eventpath.Chain, error)
	// Changes receives a value after Recent's answer may have changed;
	// nil when nothing tells (the view then reads them every Interval).
	Changes() <-chan struct{}
}

// Recorded is the Events of a Recorder in this process.
func Recorded(rec *eventpath.Recorder) Events { return recorded{rec} }

type recorded struct{ rec *eventpath.Recorder }

func (r recorded) Recent(_ context.Context, limit int) ([]eventpath.Chain, error) {
	return r.rec.Chains(limit), nil
}

func (r recorded) Changes() <-chan struct{} { return r.rec.Changes() }

// Defaults of Config.
const (
	DefaultInterval       = time.Second
	DefaultMinInterval    = 250 * time.Millisecond
	DefaultMaxChains      = 50
	DefaultMaxDeadLetters = 100
	DefaultReadTimeout    = 5 * time.Second
	// keepAlive is how often an idle event stream gets a comment, so that
	// proxies keep it open.
	keepAlive = 15 * time.Second
)

// ErrInvalidConfig is wrapped by New's errors.
var ErrInvalidConfig = errors.New("invalid web view config")

// Config tunes a View. Zero values mean the defaults.
type Config struct {
	// Interval is how often the state is read again while a page is open,
	// for what changes without an event (replicas, backlog). Default 1s.
	Interval time.Duration
	// MinInterval is the least time between two updates sent to the pages,
	// however fast events come. Default 250ms.
	MinInterval time.Duration
	// MaxChains bounds the event chains shown. Default 50.
	MaxChains int
	// MaxDeadLetters bounds the dead letters shown (the oldest first, as
	// `kfn dlq list` lists them). Default 100.
	MaxDeadLetters int
	// ReadTimeout bounds each read of a part of the state, the events
	// and the dead letters: a part that does not answer within it (a
	// cluster's event bridge behind a port-forward that hangs) is a
	// problem on the page, and the pages still get the rest. Default 5s.
	ReadTimeout time.Duration
	// Title is what the page is of, after "kfn" in its header and title.
	// Default "dev".
	Title string
}

func (o *Config) defaults() error {
	if min(o.Interval, o.MinInterval, o.ReadTimeout) < 0 || min(o.MaxChains, o.MaxDeadLetters) < 0 {
		return fmt.Errorf("%w: intervals and bounds must not be negative", ErrInvalidConfig)
	}
	if o.MaxDeadLetters > deadletter.MaxLimit {
		return fmt.Errorf("%w: at most %d dead letters can be shown", ErrInvalidConfig, deadletter.MaxLimit)
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.MinInterval == 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.MaxChains == 0 {
		o.MaxChains = DefaultMaxChains
	}
	if o.MaxDeadLetters == 0 {
		o.MaxDeadLetters = DefaultMaxDeadLetters
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.Title == "" {
		o.Title = "dev"
	}
	return nil
}

// View serves the page and keeps the pages that show it current. Create it
// with New, serve Handler, and run Run.
type View struct {
	src     Source
	letters DeadLetters
	events  Events
	o       Config

	join  chan chan []byte
	leave chan chan []byte
	done  chan struct{} // closed when Run returns
}

// New returns a View of src, letters and events.
func New(src Source, letters DeadLetters, events Events, o Config) (*View, error) {
	if src == nil || letters == nil || events == nil {
		return nil, fmt.Errorf("%w: a source, dead letters and events are required", ErrInvalidConfig)
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	return &View{
		src: src, letters: letters, events: events, o: o,
		join: make(chan chan []byte), leave: make(chan chan []byte), done: make(chan struct{}),
	}, nil
}

// State reads the state the page shows now, each of its parts within
// ReadTimeout.
func (v *View) State(ctx context.Context) State {
	p := v.src.Status()
	st := State{
		Title: v.o.Title, Addr: p.Addr, Functions: make([]Function, 0, len(p.Functions)), Subscriptions: p.Subscriptions, Problems: p.Errors,
		DeadLetters: []DeadLetter{},
	}
	rctx, cancel := context.WithTimeout(ctx, v.o.ReadTimeout)
	chains, err := v.events.Recent(rctx, v.o.MaxChains)
	cancel()
	if err != nil {
		st.Problems = append(st.Problems, fmt.Sprintf("events: %v", err))
	}
	st.Chains = chains
	for _, f := range p.Functions {
		st.Functions = append(st.Functions, Function{Function: f, State: Classify(f)})
	}
	// Previews only: the page shows the start of each letter's data, and
	// reading the whole of every one was 1 MB a letter each time.
	lctx, cancel := context.WithTimeout(ctx, v.o.ReadTimeout)
	letters, err := v.letters.List(lctx, deadletter.Filter{Limit: v.o.MaxDeadLetters + 1, Preview: true})
	cancel()
	if err != nil {
		st.Problems = append(st.Problems, fmt.Sprintf("dead letters: %v", err))
	}
	if len(letters) > v.o.MaxDeadLetters {
		letters, st.MoreDeadLetters = letters[:v.o.MaxDeadLetters], true
	}
	for _, l := range letters {
		st.DeadLetters = append(st.DeadLetters, deadLetterOf(l))
	}
	if st.Subscriptions == nil {
		st.Subscriptions = []devstatus.Subscription{}
	}
	if st.Chains == nil {
		st.Chains = []eventpath.Chain{}
	}
	return st
}

// Handler serves, relative to where it is mounted (the path must end in
// a slash, as the page's links are relative):
//
//	GET /           the page (index.html, app.js, style.css)
//	GET /state      the State as JSON
//	GET /events     the State as a Server-Sent Events stream: an event
//	                "state" now and after every change
func (v *View) Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded folder is part of the binary
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(files))
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v.State(r.Context())) // the client went away
	})
	mux.HandleFunc("GET /events", v.serveEvents)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		// The page loads nothing from elsewhere, and may not.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		h.Set("X-Content-Type-Config", "nosniff")
		mux.ServeHTTP(w, r)
	})
}

// serveEvents streams the state to one page until it leaves or the view
// stops.
func (v *View) serveEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	updates := make(chan []byte, 1)
	select {
	case v.join <- updates:
	case <-v.done:
		http.Error(w, "kfn dev is stopping", http.StatusServiceUnavailable)
		return
	case <-r.Context().Done():
		return
	}
	defer func() {
		select {
		case v.leave <- updates:
		case <-v.done:
		}
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	// A page whose stream broke reconnects after 1s.
	fmt.Fprint(w, "retry: 1000\n\n")
	flusher.Flush()
	idle := time.NewTicker(keepAlive)
	defer idle.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-v.done:
			return
		case state := <-updates:
			if _, err := fmt.Fprintf(w, "event: state\ndata: %s\n\n", state); err != nil {
				return
			}
		case <-idle.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		}
		flusher.Flush()
	}
}

// Run keeps the pages current until ctx ends: while at least one is open,
// it reads the state when the recorded events change and every Interval,
// at most every MinInterval, and sends it to every page when it differs
// from the last one sent. A page that joins gets the last state at once.
// It returns nil when ctx ends, after which every stream ends.
func (v *View) Run(ctx context.Context) error {
	defer close(v.done)
	pages := map[chan []byte]struct{}{}
	var last []byte
	var lastRead time.Time
	dirty := false
	tick := time.NewTicker(v.o.Interval)
	defer tick.Stop()
	soon := time.NewTimer(0)
	<-soon.C
	armed := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case p := <-v.join:
			pages[p] = struct{}{}
			if last != nil {
				p <- last
			}
			dirty = true
		case p := <-v.leave:
			delete(pages, p)
		case <-v.events.Changes(): // a nil channel never receives
			dirty = true
		case <-tick.C:
			dirty = true
		case <-soon.C:
			armed = false
		}
		if !dirty || len(pages) == 0 || armed {
			continue
		}
		if wait := v.o.MinInterval - time.Since(lastRead); wait > 0 {
			soon.Reset(wait)
			armed = true
			continue
		}
		dirty, lastRead = false, time.Now()
		state, err := json.Marshal(v.State(ctx))
		if err != nil || bytes.Equal(state, last) {
			continue // State has nothing json cannot encode; unchanged: nothing to send
		}
		last = state
		for p := range pages {
			select { // a page that has not taken the last state gets the newer one instead
			case <-p:
			default:
			}
			p <- state
		}
	}
}
