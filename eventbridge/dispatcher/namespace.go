package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// holdNamespaces holds each namespace's Subscriptions together to the
// namespace's totals (Config.NamespaceMaxBacklog, NamespaceMaxBacklogBytes),
// from what each worker's last budget check found waiting (a worker whose
// deliveries keep up counts nothing), and all namespaces together to a
// part of the event stream (streamLevel): it asks nothing of the broker.
// For a namespace over a total or the level, the workers whose events have waited longest
// (the lowest stream sequence) are told how many they keep (nsKeep), so
// that their next checks give up the namespace's oldest events, the
// excess and no more; every other namespace is left as it is. It runs on
// the budget loop, before the checks it asks for.
func (d *Dispatcher) holdNamespaces(workers []*worker) {
	byNamespace := map[string][]*worker{}
	for _, w := range workers {
		ns := w.target.sub.Namespace
		byNamespace[ns] = append(byNamespace[ns], w)
	}
	seen := make(map[string]int64, len(byNamespace))
	for ns, ws := range byNamespace {
		for _, w := range ws {
			seen[ns] += w.seenBytes.Load()
		}
	}
	level, nearLevel := d.streamLevel(seen)
	for ns, ws := range byNamespace {
		limit := min(d.cfg.NamespaceMaxBacklogBytes, level)
		var events int64
		bytes := seen[ns]
		for _, w := range ws {
			events += w.seenEvents.Load()
		}
		overEvents := events - int64(d.cfg.NamespaceMaxBacklog)
		overBytes := bytes - limit
		// Past half a total, the checks find where each worker's events
		// start and their size (firstWaiting), so that the oldest can be
		// told apart and bytes counted at the largest size estimated.
		pressed := nearLevel && bytes > 0 || 2*events > int64(d.cfg.NamespaceMaxBacklog) || 2*bytes > limit
		known := true
		for _, w := range ws {
			w.nsPressed.Store(pressed)
			waits := w.seenEvents.Load() > 0
			known = known && (!waits || w.oldestKnown.Load())
			if overEvents <= 0 && waits && !w.seenSized.Load() {
				known = false // over in bytes counted at the largest size: estimate them first
			}
		}
		if overEvents <= 0 && overBytes <= 0 || !known {
			// Within the totals; or over, but where some worker's events
			// start, or their bytes, are not known yet: its next check
			// finds them.
			for _, w := range ws {
				w.nsLimited.Store(false)
			}
			continue
		}
		slices.SortFunc(ws, func(a, b *worker) int { return cmp.Compare(a.oldest.Load(), b.oldest.Load()) })
		for _, w := range ws {
			held := w.seenEvents.Load()
			var give int64
			if held > 0 {
				size := w.seenBytes.Load() / held
				if overEvents > 0 {
					give = min(held, overEvents)
				}
				if overBytes > 0 && size > 0 {
					give = max(give, min(held, (overBytes+size-1)/size))
				}
				overEvents -= give
				overBytes -= give * size
			}
			if give == 0 {
				w.nsLimited.Store(false)
				continue
			}
			w.nsKeep.Store(held - give)
			w.nsLevel.Store(0)
			if limit < d.cfg.NamespaceMaxBacklogBytes && overEvents <= 0 {
				w.nsLevel.Store(limit) // cut by the stream's level, not its own total
			}
			w.nsLimited.Store(true)
		}
	}
}

// sharedNum/sharedDen is the part of the event stream's MaxBytes that
// the namespaces' backlogs may hold together (streamLevel): the rest is
// for the events on their way to healthy sinks.
const sharedNum, sharedDen = 3, 4

// streamLevel returns the most bytes any namespace may keep waiting now,
// besides its own total: while what every namespace's workers saw waiting
// (seen) is more than three quarters of the event stream's MaxBytes
// together, the level at which, were every namespace holding more cut to
// it, they would hold three quarters (water filling); else no level. A
// namespace holding less than the level keeps all of it: however many
// namespaces are at their totals, those holding the most give way, never
// one holding less than its fair share, and the stream keeps room for
// everyone's publishing. near says they hold more than half of that: the
// checks then make ready to be cut (saw). It asks nothing of the broker.
func (d *Dispatcher) streamLevel(seen map[string]int64) (level int64, near bool) {
	const none = int64(1<<63 - 1)
	if d.cfg.Streams.MaxBytes <= 0 {
		return none, false
	}
	var total int64
	for _, b := range seen {
		total += b
	}
	shared := d.cfg.Streams.MaxBytes / sharedDen * sharedNum
	if total <= shared {
		return none, 2*total > shared
	}
	return waterLevel(seen, shared), true
}

// waterLevel returns the level L at which the sum over seen of min(b, L)
// is target (0 <= target <= the sum of seen).
func waterLevel(seen map[string]int64, target int64) int64 {
	bs := make([]int64, 0, len(seen))
	for _, b := range seen {
		bs = append(bs, b)
	}
	slices.Sort(bs)
	below := int64(0) // the sum of the values under the level
	for i, b := range bs {
		rest := int64(len(bs) - i)
		if below+b*rest >= target {
			return (target - below) / rest
		}
		below += b
	}
	return bs[len(bs)-1]
}

// namespaceKeep returns how many events the namespace's total lets the
// worker keep, and whether it bounds them at all.
func (w *worker) namespaceKeep() (int, bool) {
	if !w.nsLimited.Load() {
		return 0, false
	}
	return int(w.nsKeep.Load()), true
}

// saw records what a budget check found: backlog events waiting, of
// size bytes each (0: not estimated), of which it gives up gone; and,
// while the namespace is near its totals, where they start.
func (w *worker) saw(ctx context.Context, info *jetstream.ConsumerInfo, backlog, gone int, size int64) {
	left := int64(max(backlog-gone, 0))
	if backlog > 0 && w.nsPressed.Load() {
		if seq, first, ok := w.firstWaiting(ctx, info); ok {
			w.oldest.Store(seq)
			w.oldestKnown.Store(true)
			if size <= 0 {
				size = first // one event's size, better than the largest
			}
		}
	} else {
		w.oldestKnown.Store(false)
	}
	w.seenSized.Store(size > 0)
	if size <= 0 {
		size = max(int64(w.d.cfg.Streams.MaxMsgSize), 0) // at most the largest
	}
	w.seenEvents.Store(left)
	w.seenBytes.Store(left * size)
}

// maxOldestSubjects bounds the subjects firstWaiting reads: a
// Subscription of more types is placed by the first of them.
const maxOldestSubjects = 8

// firstWaiting returns the stream sequence and the size (data and
// headers) of the first event waiting for the worker's consumer: the
// first of its subjects after its acknowledgement floor (one direct read
// per subject, none while the floor is where the last look found it).
func (w *worker) firstWaiting(ctx context.Context, info *jetstream.ConsumerInfo) (uint64, int64, bool) {
	lo := info.AckFloor.Stream + 1
	if w.oldestKnown.Load() && w.oldestFrom == lo {
		return w.oldest.Load(), w.oldestSize, true
	}
	if w.budgetStream == nil {
		s, err := w.d.js.Stream(ctx, w.d.cfg.Streams.EventStream)
		if err != nil {
			return 0, 0, false
		}
		w.budgetStream = s
	}
	subjects := info.Config.FilterSubjects
	if len(subjects) == 0 && info.Config.FilterSubject != "" {
		subjects = []string{info.Config.FilterSubject}
	}
	var first *jetstream.RawStreamMsg
	for _, subject := range subjects[:min(len(subjects), maxOldestSubjects)] {
		m, err := w.budgetStream.GetMsg(ctx, lo, jetstream.WithGetMsgSubject(subject))
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgNotFound) {
				w.budgetStream = nil // look it up again: it may have been made anew
			}
			continue
		}
		if first == nil || m.Sequence < first.Sequence {
			first = m
		}
	}
	if first == nil {
		return 0, 0, false
	}
	w.oldestFrom, w.oldestSize = lo, rawSize(first)
	return first.Sequence, w.oldestSize, true
}

// rawSize is an event's size as the budget counts it: data and headers.
func rawSize(m *jetstream.RawStreamMsg) int64 {
	n := int64(len(m.Data))
	for k, vs := range m.Header {
		for _, v := range vs {
			n += int64(len(k) + len(v))
		}
	}
	return n
}

// keepingUp records that the worker's deliveries keep up: nothing of it
// waits for the namespace's totals.
func (w *worker) keepingUp() {
	w.seenEvents.Store(0)
	w.seenBytes.Store(0)
}

// maxBacklog is the Subscription's maxBacklog, held to its namespace's
// total.
func (w *worker) maxBacklog() int {
	return min(w.target.delivery.MaxBacklog, w.d.cfg.NamespaceMaxBacklog)
}

// maxBacklogBytes is the Subscription's maxBacklogBytes, held to its
// namespace's total.
func (w *worker) maxBacklogBytes() int64 {
	return min(w.target.delivery.MaxBacklogBytes, w.d.cfg.NamespaceMaxBacklogBytes)
}

// heldBy says, for a dead-letter reason, when the Subscription's own
// budget of want is held to the namespace's total of have.
func (w *worker) heldBy(want, have int64) string {
	if want <= have {
		return ""
	}
	return fmt.Sprintf(", held to namespace %s's total", w.target.sub.Namespace)
}

// namespaceReason is the dead-letter reason of an event given up over its
// namespace's totals.
func (w *worker) namespaceReason(why string) string {
	if level := w.nsLevel.Load(); level > 0 {
		return fmt.Sprintf("the backlogs of all namespaces over three quarters of the event stream, namespace %s's among those holding the most (cut to %d bytes each) and %s: its oldest events given up",
			w.target.sub.Namespace, level, why)
	}
	return fmt.Sprintf("namespace %s's backlog over its total (%d events, %d bytes, of all its Subscriptions together) and %s: its oldest events given up",
		w.target.sub.Namespace, w.d.cfg.NamespaceMaxBacklog, w.d.cfg.NamespaceMaxBacklogBytes, why)
}
