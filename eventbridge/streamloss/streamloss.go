package streamloss

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Reasons of a Loss, the values of the metric's reason label.
const (
	// ReasonMissing: the stream is gone.
	ReasonMissing = "missing"
	// ReasonRecreated: a stream of that name is there, but not the one
	// seen before (another creation time, or a lower last sequence).
	ReasonRecreated = "recreated"
)

// Loss is one stream NATS lost.
type Loss struct {
	// Stream is the stream's name.
	Stream string
	// Reason is ReasonMissing or ReasonRecreated.
	Reason string
	// LastSeq is the highest last sequence seen before the loss: about
	// how many events the stream had taken in.
	LastSeq uint64
}

// seen is what the Guard knows of one stream.
type seen struct {
	created time.Time
	lastSeq uint64
}

// Guard watches streams for losses. It is safe for concurrent use.
type Guard struct {
	js      jetstream.JetStream
	streams []string
	log     *slog.Logger
	lost    *prometheus.CounterVec
	// takenAway, when set, tells a stream deleted on purpose (WithTakenAway).
	takenAway func(ctx context.Context, stream string) (bool, error)

	mu    sync.Mutex
	known map[string]seen
}

// Option configures a Guard.
type Option func(*Guard) error

// WithMetrics registers kfn_eventbridge_streams_lost_total with reg; nil
// registers nothing.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(g *Guard) error {
		if reg == nil {
			return nil
		}
		g.lost = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_streams_lost_total",
			Help: "Streams NATS lost (reason missing: gone; recreated: there again, but empty or made anew), with the events they held, by stream.",
		}, []string{"stream", "reason"})
		if err := reg.Register(g.lost); err != nil {
			return fmt.Errorf("register stream loss metric: %w", err)
		}
		return nil
	}
}

// WithTakenAway has the Guard ask takenAway of a stream it finds
// missing, and count no loss when it says true: the stream was deleted on
// purpose (a partition of the event stream taken away once drained,
// jsstream.TakenAway). An error of takenAway leaves the stream known, for
// the next check to ask again.
func WithTakenAway(takenAway func(ctx context.Context, stream string) (bool, error)) Option {
	return func(g *Guard) error {
		g.takenAway = takenAway
		return nil
	}
}

// WithLogger logs each loss as an error to log.
func WithLogger(log *slog.Logger) Option {
	return func(g *Guard) error {
		if log != nil {
			g.log = log
		}
		return nil
	}
}

// New returns a Guard of the named streams in js. It knows nothing of them
// until its first Check.
func New(js jetstream.JetStream, streams []string, opts ...Option) (*Guard, error) {
	g := &Guard{js: js, streams: streams, log: slog.New(slog.DiscardHandler), known: map[string]seen{}}
	for _, o := range opts {
		if err := o(g); err != nil {
			return nil, err
		}
	}
	for _, s := range streams {
		if g.lost != nil {
			// Every stream's series exists from the start, so that an
			// increase from 0 to 1 is an increase.
			g.lost.WithLabelValues(s, ReasonMissing)
			g.lost.WithLabelValues(s, ReasonRecreated)
		}
	}
	return g, nil
}

// Check looks at every stream once and returns the losses found since the
// last look, each counted and logged. A stream it could not look at (NATS
// unreachable) is left as it was known, and the error says which.
func (g *Guard) Check(ctx context.Context) ([]Loss, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var losses []Loss
	var errs []error
	for _, name := range g.streams {
		loss, err := g.check(ctx, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if loss != nil {
			losses = append(losses, *loss)
			if g.lost != nil {
				g.lost.WithLabelValues(loss.Stream, loss.Reason).Inc()
			}
			g.log.Error("NATS lost a stream and the events it held; nothing brings them back",
				"stream", loss.Stream, "reason", loss.Reason, "lastSequenceSeen", loss.LastSeq)
		}
	}
	return losses, errors.Join(errs...)
}

// check compares one stream with what is known of it and updates that.
func (g *Guard) check(ctx context.Context, name string) (*Loss, error) {
	s, err := g.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		before, known := g.known[name]
		if !known {
			return nil, nil
		}
		if g.takenAway != nil {
			away, err := g.takenAway(ctx, name)
			if err != nil {
				return nil, fmt.Errorf("ask whether stream %s was taken away: %w", name, err)
			}
			if away {
				delete(g.known, name)
				g.log.Info("a stream was deleted on purpose, once every event it held was delivered", "stream", name)
				return nil, nil
			}
		}
		delete(g.known, name)
		return &Loss{Stream: name, Reason: ReasonMissing, LastSeq: before.lastSeq}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look at stream %s: %w", name, err)
	}
	info := s.CachedInfo()
	now := seen{created: info.Created, lastSeq: info.State.LastSeq}
	before, known := g.known[name]
	g.known[name] = now
	if known && (!now.created.Equal(before.created) || now.lastSeq < before.lastSeq) {
		return &Loss{Stream: name, Reason: ReasonRecreated, LastSeq: before.lastSeq}, nil
	}
	return nil, nil
}

// Run checks every interval until ctx ends, first at once; an error is
// logged and the next check tries again.
func (g *Guard) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := g.Check(ctx); err != nil && ctx.Err() == nil {
			g.log.Warn("looking for lost streams failed; the next check retries", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
