package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/pull"
	"github.com/kfn-dev/kfn/eventbridge/reply"
	"github.com/kfn-dev/kfn/internal/egress"
)

// worker serves one Subscription: it has the dispatcher's puller pull
// from the Subscription's consumer while the sink is ready, and delivers
// each event the puller hands it on a goroutine of the dispatcher's.
type worker struct {
	d      *Dispatcher
	target target
	// ctx is the worker's life, canceled by stop.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// pl is the worker's share of the dispatcher's puller, added when the
	// worker starts and removed when run returns.
	pl    *pull.Pull
	log   *slog.Logger
	count *counters
	tally *tally
	names spanNames
	// ackWait is the consumer's ack wait (nanoseconds), read when bound.
	ackWait atomic.Int64
	// heartbeat keeps the events the worker holds in progress.
	heartbeat pull.Heartbeat
	// excess is how many events the budget still gives up: how far the
	// backlog was over maxBacklog at the last check, less what was given
	// up since (budget.go).
	excess atomic.Int64
	// overBudget is set while the backlog was over maxBacklog at the last
	// check: the worker then asks for no events to deliver, so that the
	// oldest waiting can be reached and given up (budget.go).
	overBudget atomic.Bool
	// overBytes says the last check found the backlog over its bytes,
	// bytesWaiting what it estimated; sampledSize is the mean event size
	// it estimated with, sinceSample the checks since it was read
	// (budget.go; only the one running check uses these two).
	overBytes    atomic.Bool
	bytesWaiting atomic.Int64
	sampledSize  int64
	sinceSample  int
	// seenEvents and seenBytes are what the last check found waiting,
	// less what it gave up (bytes estimated), and oldest the stream
	// sequence from which the Subscription's events wait; zero while its
	// deliveries keep up (seenSized: the bytes estimated from a sample,
	// else counted at the largest event size); oldest is valid while
	// oldestKnown, and was found from acknowledgement floor oldestFrom,
	// with the size of that event oldestSize, in budgetStream (only the
	// running check uses these three). While nsLimited, nsKeep is how
	// many events the namespace's total lets the worker keep (nsLevel,
	// when not 0, is the stream's level that cut it); nsPressed
	// says the namespace is near its totals; overNamespace says the last
	// check gave up for the namespace's total (namespace.go).
	seenEvents, seenBytes               atomic.Int64
	oldest                              atomic.Uint64
	oldestKnown, seenSized              atomic.Bool
	oldestFrom                          uint64
	oldestSize                          int64
	budgetStream                        jetstream.Stream
	nsKeep, nsLevel                     atomic.Int64
	nsLimited, nsPressed, overNamespace atomic.Bool
	// budget is told when overBudget changes.
	budget chan struct{}
	// retries are the events waiting for their next attempt (retry.go).
	retries retries
	// space is the worker's namespace's part of the delivery slots
	// (share.go), joined when the worker starts and left when it ends.
	space *space
	// inFlight counts the events in handle: waiting for the sink, or in
	// delivery.
	inFlight atomic.Int64
	// fullTicks counts the budget loop's ticks in a row at which all of
	// the worker's maxInFlightMessages were in flight; only that loop
	// uses it.
	fullTicks int
	// failed is set when an attempt fails; the budget reads the backlog
	// only after one did, while the sink is not ready, or while over
	// budget, so that healthy Subscriptions cost the broker nothing.
	failed atomic.Bool
	// checking is set while a budget check of the worker runs.
	checking atomic.Bool
	// budgetCons is the consumer the budget checks read; only the one
	// running check uses it.
	budgetCons jetstream.Consumer

	// mu guards closing and the start of work counted by busy: deliveries
	// and budget checks, which run waits for before it returns.
	mu      sync.Mutex
	closing bool
	busy    sync.WaitGroup
}

// stop asks the worker to stop; it does not wait.
func (w *worker) stop() {
	if w.cancel != nil {
		w.cancel()
	}
}

// goBusy runs f on a goroutine of the dispatcher's (goroutines) that run
// waits for, unless the worker is closing; it reports whether f runs.
func (w *worker) goBusy(f func()) bool {
	if !w.startBusy() {
		return false
	}
	w.d.goroutines.Go(pull.TaskFunc(func() {
		defer w.busy.Done()
		f()
	}))
	return true
}

// Take delivers m on a goroutine of the dispatcher's that run waits for
// (m.Run calls Handle), in a turn of its namespace's (share.go), unless
// the worker is closing: then the event is left to come again after its
// ack wait. The worker is its pull's pull.Handler.
func (w *worker) Take(m *pull.Msg) bool {
	if !w.startBusy() {
		return false
	}
	w.d.shares.submit(w, m)
	return true
}

// Handle delivers an event Take took, or one retried (retryLater),
// outside the delivery slots: what pull.Handler asks for (Msg.Run). The
// worker's own events go in turns (handleTurn).
func (w *worker) Handle(m *pull.Msg) {
	defer w.busy.Done()
	w.handle(w.ctx, m)
}

// handleTurn delivers an event Take took, or one retried, in its turn of
// the delivery slots (share.go).
func (w *worker) handleTurn(t *turn) {
	defer w.busy.Done()
	w.handleIn(w.ctx, t.m, t)
}

var _ pull.Handler = (*worker)(nil)

// startBusy counts work that run waits for, unless the worker is closing;
// it reports whether the work may start.
func (w *worker) startBusy() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return false
	}
	w.busy.Add(1)
	return true
}

const (
	minRebind = 50 * time.Millisecond
	maxRebind = 5 * time.Second
)

// init sets what the worker's goroutines read, before any starts.
func (w *worker) init() {
	t := w.target
	w.log = w.d.log.With("namespace", t.sub.Namespace, "subscription", t.sub.Name, "function", t.sink.Service, "consumer", t.consumer)
	w.count = w.d.metrics.forSubscription(t.sub.Namespace, t.sub.Name)
	w.tally = w.d.tallyOf(key{t.sub.Namespace, t.sub.Name})
	w.names = newSpanNames(t.sub.Namespace, t.sub.Name)
	w.ackWait.Store(int64(stream.DefaultAckWait))
	w.budget = make(chan struct{}, 1)
}

// run binds to the consumer and has it pulled while the sink is ready,
// until ctx is done; then it waits for the deliveries in progress.
func (w *worker) run(ctx context.Context) {
	t := w.target
	defer func() {
		w.mu.Lock()
		w.closing = true
		w.mu.Unlock()
		for e, left := range w.retries.close() {
			w.handBack(e, left)
		}
		w.d.shares.drop(w) // its waiting turns end now, without a slot
		w.busy.Wait()
		w.d.shares.leave(w.space)
	}()
	pl := w.pl
	defer pl.Remove() // before the wait above: no delivery starts after it
	wait := minRebind
	for ctx.Err() == nil {
		ready, changed := w.sinkReady()
		if !ready || w.overBudget.Load() {
			if !ready {
				w.log.Debug("sink has no ready endpoint, not pulling", "service", t.sink.Service)
			}
			select {
			case <-changed:
			case <-w.budget:
			case <-ctx.Done():
			}
			continue
		}
		cons, err := w.d.js.Consumer(ctx, w.d.cfg.Streams.EventStream, t.consumer)
		if err == nil {
			if info := cons.CachedInfo(); info != nil && info.Config.AckWait > 0 {
				w.ackWait.Store(int64(info.Config.AckWait))
			}
			err = w.pullWhileReady(ctx, pl, changed)
		}
		if err == nil {
			wait = minRebind
			continue
		}
		if ctx.Err() != nil {
			return
		}
		level := slog.LevelWarn
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, pull.ErrConsumerGone) {
			level = slog.LevelDebug // the reconciler has not created it (again) yet
		}
		w.log.Log(ctx, level, "consumer unavailable, retrying", "error", err, "retryIn", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		wait = min(wait*2, maxRebind)
	}
}

// pullWhileReady has the consumer pulled until ctx is done or the sink stops being
// ready (nil), or the consumer goes away (the error). A notification that
// leaves the sink ready (for another Service, or a change of endpoints
// that keeps one ready) changes nothing. When the sink is no longer ready
// the pull pauses: events already asked for still come to handle, which
// waits for readiness without spending attempts, and no more are asked
// for.
func (w *worker) pullWhileReady(ctx context.Context, pl *pull.Pull, changed <-chan struct{}) error {
	pl.Start()
	defer pl.Pause()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-pl.Lost():
			return err
		case <-w.budget:
			if w.overBudget.Load() {
				return nil // over budget: ask for nothing more until within it
			}
		case <-changed:
			ready, next := w.sinkReady()
			if !ready {
				return nil
			}
			changed = next
		}
	}
}

// handle delivers one event and settles it, outside the delivery slots.
func (w *worker) handle(ctx context.Context, msg jetstream.Msg) {
	w.handleIn(ctx, msg, nil)
}

// handleIn delivers one event and settles it, in turn t (nil: outside the
// delivery slots), whose slot it gives back while it waits for the sink.
func (w *worker) handleIn(ctx context.Context, msg jetstream.Msg, t *turn) {
	w.inFlight.Add(1)
	defer w.inFlight.Add(-1)
	// Whatever becomes of the event, it leaves the worker's hands here,
	// unless it is kept for its next attempt (retryLater).
	kept := false
	defer func() {
		if !kept {
			w.heartbeat.Release(msg)
			if e, ok := msg.(*pull.Msg); ok {
				e.Release()
			}
		}
	}()
	target := w.target
	meta, err := msg.Metadata()
	if err != nil {
		w.log.Error("event without metadata, terminating it", "error", err)
		_ = msg.Term()
		return
	}
	h := msg.Headers()
	attempts := int(meta.NumDelivered)
	log := w.eventLog(h, meta)
	replay := strings.HasPrefix(msg.Subject(), stream.ReplaySubjectPrefix+".")
	if !replay && !target.sub.Matches(eventstore.RouteSource(h), eventstore.Attribute(h, "type")) {
		// Cleaning mapped another type onto one of our subjects.
		w.settle(log, msg.Ack())
		return
	}
	if attempts > target.delivery.MaxDeliver {
		w.giveUp(ctx, log, msg, meta, 0, "delivery attempts used up before the last attempt was settled")
		return
	}

	// Keep the event ours while we wait for the sink and while it works,
	// and while it waits for its next attempt (retryLater).
	w.heartbeat.Hold(msg, max(time.Duration(w.ackWait.Load())/2, 10*time.Millisecond))
	readiness := ready
	if ok, _ := w.sinkReady(); !ok {
		t.pause() // a turn waiting for its sink holds no slot
		readiness = w.waitReady(ctx)
		t.resume()
	}
	switch readiness {
	case stopping:
		return // JetStream redelivers it after the ack wait
	case overBudget:
		w.giveUp(ctx, log, msg, meta, 0, w.budgetReason(w.notReadyReason()))
		return
	}
	ctx, at := w.startAttempt(ctx, msg, meta, attempts)
	defer at.end(w.giveUpOutcome()) // unless delivered or retried
	res := w.post(ctx, log, msg, &at, t)
	if res.verdict == Done && res.reply != nil {
		err := w.publishReply(ctx, log, h, res.reply, res.replyBody)
		res.replyHeld.release()
		if err != nil {
			at.failed(err)
			res = result{verdict: Retry, err: err}
		}
	}
	w.observeAttempt(msg, meta, res, at.start)
	switch res.verdict {
	case Done:
		w.count.delivered.Inc()
		at.delivered(meta.Timestamp)
		w.settle(log, msg.Ack())
	case Retry:
		w.count.failed.Inc()
		w.failed.Store(true)
		if attempts >= target.delivery.MaxDeliver {
			w.giveUp(ctx, log, msg, meta, res.status, res.reason())
			return
		}
		if w.takeExcess() {
			w.giveUp(ctx, log, msg, meta, res.status, w.budgetReason("the attempt failed: "+res.reason()))
			return
		}
		delay := RedeliveryDelay(target.delivery, attempts, w.d.cfg.Jitter, res.retryAfter)
		log.Debug("delivery failed, will retry", "status", res.status, "error", res.reason(), "retryIn", delay)
		at.retry(delay)
		kept = w.retryLater(msg, delay)
		if !kept {
			w.settle(log, msg.NakWithDelay(delay))
		}
	case GiveUp:
		w.count.failed.Inc()
		w.giveUp(ctx, log, msg, meta, res.status, res.reason())
	}
}

// retryLater keeps msg, which the puller delivered, for its next attempt
// after delay (retry.go), and reports whether it does: an event fetched
// otherwise, or one that fails while the worker stops, is handed back to
// JetStream with its delay instead.
func (w *worker) retryLater(msg jetstream.Msg, delay time.Duration) bool {
	e, ok := msg.(*pull.Msg)
	if !ok {
		return false
	}
	return w.retries.add(e, delay, func(e *pull.Msg) {
		e.Redelivered() // the attempt's number, as JetStream's count would be
		if !w.startBusy() {
			w.handBack(e, 0)
			return
		}
		w.d.shares.submit(w, e)
	})
}

// handBack returns an event the worker held for its next attempt to
// JetStream, which delivers it again after delay.
func (w *worker) handBack(e *pull.Msg, delay time.Duration) {
	defer e.Release()
	defer w.heartbeat.Release(e)
	if err := e.NakWithDelay(delay); err != nil {
		w.log.Warn("handing an event back failed; it comes back after the ack wait", "error", err)
	}
}

func (w *worker) settle(log eventLog, err error) {
	if err != nil {
		// The event comes back after the ack wait: at least once still holds.
		log.Warn("settling event failed", "error", err)
	}
}

// sinkReady reports whether the worker's sink has a ready endpoint; the
// channel closes when that may have changed. The sink of a Subscription
// that cannot be served is never ready (and the channel never closes).
func (w *worker) sinkReady() (bool, <-chan struct{}) {
	if w.target.invalid != nil {
		return false, nil
	}
	return w.d.endpoints.Ready(w.target.sink.Namespace, w.target.sink.Service)
}

// overReason says why the worker's events are over budget.
func (w *worker) overReason() string {
	if ready, _ := w.sinkReady(); ready {
		return "the sink does not keep up"
	}
	return w.notReadyReason()
}

// notReadyReason says why the worker's sink is not ready.
func (w *worker) notReadyReason() string {
	if w.target.invalid != nil {
		return "the Subscription's spec has errors (" + w.target.invalid.Error() + ")"
	}
	return "the sink has no ready endpoint"
}

// readiness is why waitReady returned.
type readiness int

const (
	ready readiness = iota
	stopping
	overBudget
)

// waitReady waits until the sink is ready, ctx is done (stopping), or the
// Subscription is over its backlog budget while the sink is not ready.
func (w *worker) waitReady(ctx context.Context) readiness {
	var poll <-chan time.Time
	for {
		ok, changed := w.sinkReady()
		if ok {
			return ready
		}
		if w.takeExcess() {
			return overBudget
		}
		if poll == nil {
			t := time.NewTicker(w.d.cfg.BudgetInterval)
			defer t.Stop()
			poll = t.C
		}
		select {
		case <-changed:
		case <-poll:
		case <-ctx.Done():
			return stopping
		}
	}
}

// result is the outcome of one attempt.
type result struct {
	verdict    Verdict
	status     int
	err        error
	retryAfter time.Duration
	reply      http.Header // headers of a 2xx CloudEvent reply, nil if none
	replyBody  []byte
	// replyHeld counts the reply against the event's held bytes until
	// it is stored or dropped; nil without a reply.
	replyHeld *replyBytes
}

func (r result) reason() string {
	if r.err != nil {
		return r.err.Error()
	}
	return fmt.Sprintf("sink answered %d %s", r.status, http.StatusText(r.status))
}

// eventLog logs about one event's delivery: with the worker's keys
// (namespace, subscription, function, consumer), the event's id and
// attempt. It formats nothing for a level that is not enabled: most
// events log nothing at all.
type eventLog struct {
	log     *slog.Logger
	h       nats.Header
	attempt int
}

func (w *worker) eventLog(h nats.Header, meta *jetstream.MsgMetadata) eventLog {
	return eventLog{log: w.log, h: h, attempt: int(meta.NumDelivered)}
}

func (l eventLog) emit(level slog.Level, msg string, args []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, msg, append([]any{"eventID", eventstore.Attribute(l.h, "id"), "attempt", l.attempt}, args...)...)
}

func (l eventLog) Debug(msg string, args ...any) { l.emit(slog.LevelDebug, msg, args) }
func (l eventLog) Info(msg string, args ...any)  { l.emit(slog.LevelInfo, msg, args) }
func (l eventLog) Warn(msg string, args ...any)  { l.emit(slog.LevelWarn, msg, args) }
func (l eventLog) Error(msg string, args ...any) { l.emit(slog.LevelError, msg, args) }

// post makes one delivery attempt, recorded by at, in turn t, whose slot
// it takes again if it was taken back while the sink worked.
func (w *worker) post(ctx context.Context, log eventLog, msg jetstream.Msg, at *attempt, t *turn) result {
	url, err := w.d.resolver.Resolve(w.target.sink)
	if err != nil {
		res := result{verdict: Retry, err: fmt.Errorf("resolve sink: %w", err)}
		at.answered(res)
		return res
	}
	res := w.send(ctx, log, msg, url)
	t.renew()
	at.answered(res)
	return res
}

// send POSTs the event to url and reads the answer.
func (w *worker) send(ctx context.Context, log eventLog, msg jetstream.Msg, url string) result {
	req, err := http.NewRequestWithContext(w.d.deadlines.Context(ctx), http.MethodPost, url, bytes.NewReader(msg.Data()))
	if err != nil {
		return result{verdict: GiveUp, err: fmt.Errorf("build request to %s: %w", url, err)}
	}
	eventstore.CopyToWire(req.Header, msg.Headers())
	w.inject(ctx, req.Header)
	resp, err := w.d.do(req)
	if err != nil {
		verdict := Retry
		if errors.Is(err, egress.ErrRefused) {
			verdict = GiveUp // where the sink points is no place for events
		}
		return result{verdict: verdict, err: fmt.Errorf("post to %s: %w", url, err)}
	}
	defer resp.Body.Close()
	r := result{verdict: Judge(resp.StatusCode), status: resp.StatusCode}
	if loc := resp.Header.Get("Location"); loc != "" && resp.StatusCode >= 300 && resp.StatusCode < 400 {
		r.err = fmt.Errorf("sink answered %d %s with a redirect to %.256q, which is not followed: deliveries follow 307 and 308 to the same scheme, host and port only, at most %d times",
			resp.StatusCode, http.StatusText(resp.StatusCode), loc, maxRedirects)
	}
	if r.verdict == Retry {
		r.retryAfter = RetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	if r.verdict == Done && reply.IsCloudEvent(resp.Header) {
		held := newReplyBytes(msg)
		err := held.grow(headerBytes(resp.Header))
		var body []byte
		if err == nil {
			body, err = reply.Read(countedBody{r: resp.Body, bytes: held}, w.d.cfg.MaxReplyBytes)
		}
		switch {
		case errors.Is(err, reply.ErrInvalid):
			held.release()
			w.count.replies[string(reply.Invalid)].Inc()
			log.Warn("reply too large, dropped", "limit", w.d.cfg.MaxReplyBytes)
		case err != nil:
			held.release()
			return result{verdict: Retry, err: fmt.Errorf("read reply from %s: %w", url, err)}
		default:
			r.reply, r.replyBody, r.replyHeld = resp.Header, body, held
		}
		return r
	}
	if resp.ContentLength != 0 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	}
	return r
}

// publishReply stores a sink's CloudEvent reply as a new event, one hop
// further, sent by the Subscription's namespace (package reply). An invalid reply or one over the hop limit is
// dropped (logged and counted) and is no error: the delivery itself
// succeeded. The error is a failure to store a valid reply.
func (w *worker) publishReply(ctx context.Context, log eventLog, h nats.Header, header http.Header, body []byte) error {
	r, err := reply.Decode(ctx, header, body, h)
	if err != nil {
		w.count.replies[string(reply.Invalid)].Inc()
		log.Warn("sink replied with an invalid CloudEvent, dropped", "error", err)
		return nil
	}
	ctx, tp, ts, end := w.replyContext(ctx, h, r.Event.ID(), r.Event.Type(), r.Hops)
	res, err := w.d.replies.Publish(ctx, r, w.target.sub.Namespace, tp, ts)
	if res == reply.Failed {
		end(string(res), err)
		return err
	}
	w.count.replies[string(res)].Inc()
	end(string(res), nil)
	switch res {
	case reply.HopLimit:
		log.Warn("reply over the hop limit, dropped", "replyID", r.Event.ID(), "hops", r.Hops, "maxHops", w.d.replies.MaxHops())
	case reply.Invalid:
		log.Warn("sink replied with an event that cannot be stored, dropped", "error", err)
	}
	return nil
}
