package dispatcher

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// holdNamespaces holds each namespace's Subscriptions together to the
// namespace's totals (Config.NamespaceMaxBacklog, NamespaceMaxBacklogBytes),
// from what each worker's last budget check found waiting (a worker whose
// deliveries keep up counts nothing): it asks nothing of the broker. For a
// namespace over a total, the workers whose events have waited longest
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
	for _, ws := range byNamespace {
		share := d.cfg.NamespaceMaxBacklogBytes / int64(len(ws))
		var events, bytes int64
		for _, w := range ws {
			w.nsShare.Store(share)
			events += w.seenEvents.Load()
			bytes += w.seenBytes.Load()
		}
		overEvents := events - int64(d.cfg.NamespaceMaxBacklog)
		overBytes := bytes - d.cfg.NamespaceMaxBacklogBytes
		// Past half a total, the checks find where each worker's events
		// start (firstWaiting), so that the oldest can be told apart.
		pressed := 2*events > int64(d.cfg.NamespaceMaxBacklog) || 2*bytes > d.cfg.NamespaceMaxBacklogBytes
		known := true
		for _, w := range ws {
			w.nsPressed.Store(pressed)
			known = known && (w.seenEvents.Load() == 0 || w.oldestKnown.Load())
		}
		if overEvents <= 0 && overBytes <= 0 || !known {
			// Within the totals; or over, but where some worker's events
			// start is not known yet: its next check finds it.
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
			w.nsLimited.Store(true)
		}
	}
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
	if size <= 0 {
		size = max(int64(w.d.cfg.Streams.MaxMsgSize), 0) // at most the largest
	}
	if backlog > 0 && w.nsPressed.Load() {
		if seq, ok := w.firstWaiting(ctx, info); ok {
			w.oldest.Store(seq)
			w.oldestKnown.Store(true)
		}
	} else {
		w.oldestKnown.Store(false)
	}
	w.seenEvents.Store(left)
	w.seenBytes.Store(left * size)
}

// maxOldestSubjects bounds the subjects firstWaiting reads: a
// Subscription of more types is placed by the first of them.
const maxOldestSubjects = 8

// firstWaiting returns the stream sequence of the first event waiting for
// the worker's consumer: the first of its subjects after its
// acknowledgement floor (one direct read per subject, none while the
// floor is where the last look found it).
func (w *worker) firstWaiting(ctx context.Context, info *jetstream.ConsumerInfo) (uint64, bool) {
	lo := info.AckFloor.Stream + 1
	if w.oldestKnown.Load() && w.oldestFrom == lo {
		return w.oldest.Load(), true
	}
	s, err := w.d.js.Stream(ctx, w.d.cfg.Streams.EventStream)
	if err != nil {
		return 0, false
	}
	subjects := info.Config.FilterSubjects
	if len(subjects) == 0 && info.Config.FilterSubject != "" {
		subjects = []string{info.Config.FilterSubject}
	}
	first, found := uint64(0), false
	for _, subject := range subjects[:min(len(subjects), maxOldestSubjects)] {
		m, err := s.GetMsg(ctx, lo, jetstream.WithGetMsgSubject(subject))
		if err != nil {
			continue
		}
		if !found || m.Sequence < first {
			first, found = m.Sequence, true
		}
	}
	if found {
		w.oldestFrom = lo
	}
	return first, found
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
	return fmt.Sprintf("namespace %s's backlog over its total (%d events, %d bytes, of all its Subscriptions together) and %s: its oldest events given up",
		w.target.sub.Namespace, w.d.cfg.NamespaceMaxBacklog, w.d.cfg.NamespaceMaxBacklogBytes, why)
}
