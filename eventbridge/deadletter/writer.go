package deadletter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// WriteTimeout bounds the wait for the dead-letter stream to store one
// letter.
const WriteTimeout = 10 * time.Second

// CountAgain is how long the Writer trusts its count of a namespace's
// dead-letter bytes: past it, the next letter of the namespace counts
// them again from the stream (letters other replicas stored, replayed,
// deleted or aged out meanwhile).
const CountAgain = 10 * time.Second

// ErrNoRoom is wrapped, with eventstore.ErrStorageFull, when a dead letter
// cannot be stored: it is larger than its namespace's bytes, or the
// dead-letter stream is full, the namespace has no letter of its own left
// to give up for it, and no namespace holds more than it does.
var ErrNoRoom = errors.New("no room for the dead letter")

// Writer stores dead letters in the dead-letter stream, through one
// event store made with it: an event given up costs one publish, nothing
// set up for it. It keeps each namespace's letters within
// stream.Config.DeadLetterNamespaceBytes (JetStream bounds bytes per
// stream only) by dropping the namespace's oldest for its newest, and
// makes room in a full stream with the oldest of the namespace holding
// the most (the writing namespace's own unless another holds more than
// it), so that however many namespaces fill the stream, each keeps an
// equal share of it. Its methods are safe for concurrent use.
type Writer struct {
	js      jetstream.JetStream
	streams stream.Config
	store   *eventstore.Store

	countAgain atomic.Int64 // nanoseconds: CountAgain, but in tests

	mu         sync.Mutex
	namespaces map[string]*usage
	swept      time.Time
	turn       string           // the last namespace a full stream weighed in turn
	stream     jetstream.Stream // looked up once, again after an error
}

// usage is what the Writer knows of one namespace's dead letters: bytes
// of them stored or on their way to the stream, of which inFlight on
// their way (settled is told when one arrives or fails); mu guards them
// and serializes the counting and dropping of the namespace's letters,
// not their storing.
type usage struct {
	mu       sync.Mutex
	settled  *sync.Cond
	bytes    int64
	inFlight int64
	// onTheirWay are the letters on their way, by message id; gone is
	// the bytes of those of them already dropped from the stream (stored,
	// then dropped as the oldest before their writer heard of it): their
	// bytes are in inFlight and no longer in bytes.
	onTheirWay map[string]*onItsWay
	gone       int64
	counted    time.Time // zero: count from the stream
	used       time.Time
}

// onItsWay is a letter on its way to the stream since then; seen when a
// count found it stored (so its bytes stay counted whatever its writer
// hears), dropped when it was then dropped as the oldest.
type onItsWay struct {
	id      string
	size    int64
	since   time.Time
	seen    bool
	dropped bool
}

// NewWriter returns a Writer to the dead-letter stream of streams.
func NewWriter(js jetstream.JetStream, streams stream.Config) *Writer {
	w := &Writer{js: js, streams: streams, store: eventstore.New(js, streams.DeadLetterStream), namespaces: map[string]*usage{}}
	w.countAgain.Store(int64(CountAgain))
	return w
}

// Dropped counts the older dead letters a Write dropped to make room for
// its letter.
type Dropped struct {
	// Own are the writing namespace's, Others those of namespaces that
	// held more of a full stream.
	Own, Others int
}

// Write stores the dead letter of the event with headers h and data
// (NewMsg), once per event and Subscription (MsgID), and returns the older
// letters it dropped to make room for it. It waits at most WriteTimeout, also when ctx is done (a give-up is
// finished when the worker stops). The error wraps eventstore's sentinels:
// eventstore.ErrStorageFull with ErrNoRoom when the letter cannot be
// stored for want of room (it never will: the caller should not keep the
// event for it), eventstore.ErrUnavailable for a failure that may pass.
func (w *Writer) Write(ctx context.Context, h nats.Header, data []byte, f Failure) (Dropped, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), WriteTimeout)
	defer cancel()
	if f.Stream == w.streams.EventStream {
		f.Stream = "" // partition 0's letters are named as before partitions
	}
	msg := NewMsg(h, data, f)
	size := letterSize(msg.Subject, msg.Header, len(data))
	limit := w.streams.DeadLetterNamespaceBytes()
	fail := func(err error) (Dropped, error) {
		return Dropped{}, fmt.Errorf("store dead letter of %s/%s event %d: %w", f.Namespace, f.Subscription, f.Sequence, err)
	}
	if size > limit {
		return fail(fmt.Errorf("%w: %w: %d bytes, and namespace %s may keep %d", ErrNoRoom, eventstore.ErrStorageFull, size, f.Namespace, limit))
	}
	u := w.usage(f.Namespace)
	letter := &onItsWay{id: MsgID(f), size: size, since: time.Now()}
	own, err := w.reserve(ctx, f.Namespace, u, letter)
	if err != nil {
		return fail(err)
	}
	dropped := Dropped{Own: own}
	empty := map[string]bool{} // namespaces found without letters, while making room
	for {
		// Stored without the namespace's lock, so that its letters are
		// stored side by side (a budget giving up many events at once):
		// their bytes are reserved until then.
		res, err := w.store.Put(ctx, eventstore.Restore(msg, letter.id))
		if err == nil {
			w.settle(u, letter, !res.Duplicate)
			return dropped, nil
		}
		if !errors.Is(err, eventstore.ErrStorageFull) {
			w.settle(u, letter, false)
			return fail(err)
		}
		// The stream is full: make room with the oldest letter of the
		// namespace that holds the most.
		from, n, derr := w.makeRoom(ctx, f.Namespace, u, empty)
		if derr != nil {
			w.settle(u, letter, false)
			return fail(derr)
		}
		switch from {
		case "":
			w.settle(u, letter, false)
			return fail(fmt.Errorf("%w: namespace %s has no older dead letter to give up for it, and none holds more: %w", ErrNoRoom, f.Namespace, err))
		case f.Namespace:
			dropped.Own += n
		default:
			dropped.Others += n
		}
	}
}

// reserve makes room within the namespace's bound for a new letter,
// dropping its oldest stored letters, and reserves its bytes until
// settle; it returns how many it dropped. When the room is held by
// letters on their way to the stream, it waits for them (each is stored
// or fails within WriteTimeout).
func (w *Writer) reserve(ctx context.Context, ns string, u *usage, letter *onItsWay) (int, error) {
	size := letter.size
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := w.count(ctx, ns, u); err != nil {
		return 0, err
	}
	dropped := 0
	for u.bytes+size > w.streams.DeadLetterNamespaceBytes() {
		n, err := w.dropOldest(ctx, ns, u)
		if err != nil {
			return dropped, err
		}
		if n > 0 {
			dropped++
			continue
		}
		if u.inFlight == 0 {
			break // the count was off: none left
		}
		u.settled.Wait()
	}
	u.bytes += size
	u.inFlight += size
	if _, twice := u.onTheirWay[letter.id]; !twice { // the same letter written twice at once is stored once
		u.onTheirWay[letter.id] = letter
	}
	return dropped, nil
}

// settle ends the reservation that reserve made of the letter, counting
// its bytes as stored when it was, unless it was dropped meanwhile.
func (w *Writer) settle(u *usage, letter *onItsWay, stored bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.inFlight -= letter.size
	if u.onTheirWay[letter.id] == letter {
		delete(u.onTheirWay, letter.id)
	}
	switch {
	case letter.dropped:
		u.gone -= letter.size // its bytes left bytes when it was dropped
	case !stored && !letter.seen: // a duplicate or a failure, unless a count found it stored
		u.bytes = max(u.bytes-letter.size, 0)
	}
	u.settled.Broadcast()
}

// dropOldestLocked is dropOldest under the namespace's lock.
func (w *Writer) dropOldestLocked(ctx context.Context, ns string, u *usage) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return w.dropOldest(ctx, ns, u)
}

// forgetAfter is how long the Writer keeps what it knows of a namespace
// that writes no letter: past its count's time, and past the time its
// last letter may still be on its way.
const forgetAfter = CountAgain + WriteTimeout

// usage returns the namespace's usage, forgetting those of namespaces
// that wrote nothing for forgetAfter (they are counted again when they
// write), so that the Writer holds only namespaces that dead-letter now.
func (w *Writer) usage(ns string) *usage {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if now.Sub(w.swept) > forgetAfter {
		for k, u := range w.namespaces {
			if now.Sub(u.used) > forgetAfter {
				delete(w.namespaces, k)
			}
		}
		w.swept = now
	}
	u, ok := w.namespaces[ns]
	if !ok {
		u = &usage{onTheirWay: map[string]*onItsWay{}}
		u.settled = sync.NewCond(&u.mu)
		w.namespaces[ns] = u
	}
	u.used = now
	return u
}

// countReadAhead is how many letters' headers a count reads ahead (the
// client library's default batch).
const countReadAhead = 500

// count counts the namespace's dead-letter bytes from the stream (their
// headers only) unless it did within CountAgain. A letter stored whose
// writer has not heard of it yet is counted once, as on its way (its
// bytes are in inFlight), not as stored too. u.mu is held.
func (w *Writer) count(ctx context.Context, ns string, u *usage) error {
	if !u.counted.IsZero() && time.Since(u.counted) < time.Duration(w.countAgain.Load()) {
		return nil
	}
	c, err := w.js.OrderedConsumer(ctx, w.streams.DeadLetterStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{stream.DeadLetterSubject(ns)}, DeliverPolicy: jetstream.DeliverAllPolicy, HeadersOnly: true,
	})
	if err != nil {
		return fmt.Errorf("%w: count the dead letters of namespace %s: %w", eventstore.ErrUnavailable, ns, err)
	}
	defer deleteOrdered(w.js, w.streams.DeadLetterStream, c)
	var total int64
	err = readOrdered(ctx, c, jetstream.PullMaxMessages(countReadAhead), func(m jetstream.Msg, _ *jetstream.MsgMetadata) (bool, error) {
		if l, ok := u.onTheirWay[m.Headers().Get(jetstream.MsgIDHeader)]; ok && w.storedSince(m, l) {
			l.seen = true // its bytes are in inFlight; one dropped would not be here
			return true, nil
		}
		n, err := strconv.Atoi(m.Headers().Get(nats.MsgSize)) // the data left out
		if err != nil {
			n = len(m.Data())
		}
		total += letterSize(m.Subject(), m.Headers(), n)
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w: count the dead letters of namespace %s: %w", eventstore.ErrUnavailable, ns, err)
	}
	u.bytes, u.counted = total+u.inFlight-u.gone, time.Now()
	return nil
}

// storedSince says whether m, a letter of the same id as l, is l's own
// copy rather than an older one: one stored after l went on its way, give
// or take half the de-duplication window for the clocks (an older copy of
// the id is older than the window, or l would be its duplicate).
func (w *Writer) storedSince(m jetstream.Msg, l *onItsWay) bool {
	meta, err := m.Metadata()
	if err != nil {
		return true
	}
	return meta.Timestamp.After(l.since.Add(-w.streams.Duplicates / 2))
}

// dropOldest deletes the namespace's oldest dead letter and returns how
// many it deleted: 0 when the namespace has none. u.mu is held.
func (w *Writer) dropOldest(ctx context.Context, ns string, u *usage) (int, error) {
	s, err := w.deadLetterStream(ctx)
	if err != nil {
		return 0, fmt.Errorf("%w: find the oldest dead letter of namespace %s: %w", eventstore.ErrUnavailable, ns, err)
	}
	for {
		m, err := s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(stream.DeadLetterSubject(ns)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			u.bytes = u.inFlight - u.gone // none stored: those on their way, not those dropped already
			return 0, nil
		}
		if err != nil {
			w.forgetStream()
			return 0, fmt.Errorf("%w: find the oldest dead letter of namespace %s: %w", eventstore.ErrUnavailable, ns, err)
		}
		err = s.DeleteMsg(ctx, m.Sequence)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted meanwhile (replayed, another replica)
		}
		if err != nil {
			w.forgetStream()
			return 0, fmt.Errorf("%w: drop the oldest dead letter of namespace %s: %w", eventstore.ErrUnavailable, ns, err)
		}
		u.bytes = max(u.bytes-letterSize(m.Subject, m.Header, len(m.Data)), 0)
		if l, ok := u.onTheirWay[m.Header.Get(jetstream.MsgIDHeader)]; ok && !l.dropped {
			l.dropped = true // stored, its writer not told yet
			u.gone += l.size
		}
		return 1, nil
	}
}

// deadLetterStream returns the dead-letter stream, looked up once.
func (w *Writer) deadLetterStream(ctx context.Context) (jetstream.Stream, error) {
	w.mu.Lock()
	s := w.stream
	w.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s, err := w.js.Stream(ctx, w.streams.DeadLetterStream)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.stream = s
	w.mu.Unlock()
	return s, nil
}

// forgetStream has the next look-up ask again (the stream may have been
// made anew).
func (w *Writer) forgetStream() {
	w.mu.Lock()
	w.stream = nil
	w.mu.Unlock()
}

// letterSize is what a dead letter counts against its namespace's bytes:
// its subject, headers (but JetStream's own) and data.
func letterSize(subject string, h nats.Header, data int) int64 {
	n := int64(len(subject) + data)
	for k, vs := range h {
		if strings.HasPrefix(k, "Nats-") {
			continue
		}
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n
}
