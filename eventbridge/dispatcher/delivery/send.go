package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/deadline"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/observe"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/reply"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/internal/seats"
)

// Config is what a Sender sends and settles with. Every field is needed.
type Config struct {
	// JetStream is the connection events are terminated over.
	JetStream jetstream.JetStream
	// Transport sends the requests; Resolver says where.
	Transport http.RoundTripper
	Resolver  Resolver
	// Deadlines give the requests their timeout.
	Deadlines *deadline.Windows
	// Replies stores sinks' replies, DeadLetters the events given up.
	Replies     *reply.Store
	DeadLetters *deadletter.Writer
	// Jitter is the random part of each backoff, in [0,1].
	Jitter float64
	// MaxReplyBytes bounds a sink's CloudEvent reply.
	MaxReplyBytes int64
	// LogLinesPerNamespace bounds the lines the events of one namespace
	// log a second (EventLog), in bursts of ten seconds' worth; past it
	// they are dropped, and the namespace's next line says how many were.
	// 0 or less: no bound.
	LogLinesPerNamespace float64
	// MaxInFlight bounds the requests in flight to sinks, and
	// MaxInFlightPerNamespace those of one namespace's Subscriptions:
	// past either an attempt waits, within its timeout, for one to end
	// (the next goes to the namespace waiting with the fewest in flight).
	// MaxInFlight 0 or less: no bound; MaxInFlightPerNamespace 0 or less:
	// MaxInFlight.
	MaxInFlight, MaxInFlightPerNamespace int
}

// Sender makes the delivery attempts of every Subscription of a
// dispatcher and settles their events. Safe for concurrent use.
type Sender struct {
	cfg      Config
	lines    *logging.Budget
	inFlight *seats.Gate
}

// NewSender returns a Sender of cfg.
func NewSender(cfg Config) *Sender {
	inFlight := seats.New(0) // no bound
	if cfg.MaxInFlight > 0 {
		inFlight = seats.New(cfg.MaxInFlightPerNamespace, seats.WithTotal(cfg.MaxInFlight))
	}
	return &Sender{cfg: cfg, lines: logging.NewBudget(cfg.LogLinesPerNamespace), inFlight: inFlight}
}

// enter takes one of the requests in flight for d's namespace (Config's
// MaxInFlight), waiting for one until ctx ends: then it takes none and
// returns an error that says which bound held it.
func (d *Deliverer) enter(ctx context.Context) error {
	err := d.s.inFlight.Enter(ctx, d.namespace)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, seats.ErrFlowFull):
		return fmt.Errorf("namespace %s has %d deliveries in flight, its bound, and none ended in time: %w", d.namespace, d.s.inFlight.PerFlow(), err)
	default:
		return fmt.Errorf("the dispatcher has %d deliveries in flight, its bound, and none was free for namespace %s in time: %w", d.s.inFlight.Total(), d.namespace, err)
	}
}

// EndRequests ends the requests in flight now (their attempts fail): at
// shutdown, once the dispatcher's grace is over, and after the last.
func (s *Sender) EndRequests() { s.cfg.Deadlines.Stop() }

// Deliverer delivers the events of one Subscription: made once per
// worker from what it needs of the Subscription.
type Deliverer struct {
	s         *Sender
	namespace string
	name      string
	sink      v1alpha2.Sink
	delivery  v1alpha2.Delivery
	rec       *observe.Record
	log       *slog.Logger
}

// For returns the Deliverer of Subscription namespace/name, whose events
// go to sink with the settings of delivery, recorded by rec and logged
// with log.
func (s *Sender) For(namespace, name string, sink v1alpha2.Sink, delivery v1alpha2.Delivery, rec *observe.Record, log *slog.Logger) *Deliverer {
	return &Deliverer{s: s, namespace: namespace, name: name, sink: sink, delivery: delivery, rec: rec, log: log}
}

// Result is the outcome of one attempt.
type Result struct {
	Verdict    Verdict
	Status     int
	Err        error
	RetryAfter time.Duration
	// Reply and ReplyBody are a 2xx CloudEvent reply, nil if none.
	Reply     http.Header
	ReplyBody []byte
	// ReplyHeld counts the reply against the event's held bytes until
	// it is stored or dropped; nil without a reply.
	ReplyHeld *ReplyBytes
}

// Reason says why the attempt failed.
func (r Result) Reason() string {
	if r.Err != nil {
		return r.Err.Error()
	}
	return fmt.Sprintf("sink answered %d %s", r.Status, http.StatusText(r.Status))
}

// Answer is the result as recorded (observe).
func (r Result) Answer() observe.Answer {
	a := observe.Answer{Status: r.Status, Delivered: r.Verdict == Done, Reply: r.Reply, ReplyBody: r.ReplyBody}
	if !a.Delivered {
		a.Reason = r.Reason()
	}
	return a
}

// Resolve returns the URL of the Subscription's sink; an error is a
// failed attempt (Retry).
func (d *Deliverer) Resolve() (string, Result) {
	url, err := d.s.cfg.Resolver.Resolve(d.sink)
	if err != nil {
		return "", Result{Verdict: Retry, Err: fmt.Errorf("resolve sink: %w", err)}
	}
	return url, Result{}
}

// Send POSTs the event to url and reads the answer.
func (d *Deliverer) Send(ctx context.Context, log EventLog, msg jetstream.Msg, url string) Result {
	req, err := http.NewRequestWithContext(d.s.cfg.Deadlines.Context(ctx), http.MethodPost, url, bytes.NewReader(msg.Data()))
	if err != nil {
		return Result{Verdict: GiveUp, Err: fmt.Errorf("build request to %s: %w", url, err)}
	}
	eventstore.CopyToWire(req.Header, msg.Headers())
	d.rec.Inject(ctx, req.Header)
	if err := d.enter(req.Context()); err != nil {
		return Result{Verdict: Retry, Err: fmt.Errorf("post to %s: %w", url, err)}
	}
	defer d.s.inFlight.Leave(d.namespace) // after the answer's body is read and closed (deferred below)
	resp, err := d.s.do(req)
	if err != nil {
		verdict := Retry
		if errors.Is(err, egress.ErrRefused) {
			verdict = GiveUp // where the sink points is no place for events
		}
		return Result{Verdict: verdict, Err: fmt.Errorf("post to %s: %w", url, err)}
	}
	defer resp.Body.Close()
	r := Result{Verdict: Judge(resp.StatusCode), Status: resp.StatusCode}
	if loc := resp.Header.Get("Location"); loc != "" && resp.StatusCode >= 300 && resp.StatusCode < 400 {
		r.Err = fmt.Errorf("sink answered %d %s with a redirect to %.256q, which is not followed: deliveries follow 307 and 308 to the same scheme, host and port only, at most %d times",
			resp.StatusCode, http.StatusText(resp.StatusCode), loc, maxRedirects)
	}
	if r.Verdict == Retry {
		r.RetryAfter = RetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	if r.Verdict == Done && reply.IsCloudEvent(resp.Header) {
		return d.readReply(log, msg, url, resp, r)
	}
	if resp.ContentLength != 0 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	}
	return r
}

// readReply reads the CloudEvent reply of a 2xx answer into r, its bytes
// counted against the event's held bytes: a reply too large is dropped
// (the delivery succeeded), one that cannot be read fails the attempt.
func (d *Deliverer) readReply(log EventLog, msg jetstream.Msg, url string, resp *http.Response, r Result) Result {
	held := newReplyBytes(msg)
	err := held.grow(headerBytes(resp.Header))
	var body []byte
	if err == nil {
		body, err = reply.Read(countedBody{r: resp.Body, bytes: held}, d.s.cfg.MaxReplyBytes)
	}
	switch {
	case errors.Is(err, reply.ErrInvalid):
		held.Release()
		d.rec.Count.Replies[string(reply.Invalid)].Inc()
		log.Warn("reply too large, dropped", "limit", d.s.cfg.MaxReplyBytes)
	case err != nil:
		held.Release()
		return Result{Verdict: Retry, Err: fmt.Errorf("read reply from %s: %w", url, err)}
	default:
		r.Reply, r.ReplyBody, r.ReplyHeld = resp.Header, body, held
	}
	return r
}

// Delay is the delay before the next attempt after failures failed
// attempts (RedeliveryDelay with the dispatcher's jitter), at least
// retryAfter.
func (d *Deliverer) Delay(failures int, retryAfter time.Duration) time.Duration {
	return RedeliveryDelay(d.delivery, failures, d.s.cfg.Jitter, retryAfter)
}
