package budget

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// namespaceState is what the namespace's totals know of one
// Subscription: seenEvents and seenBytes are what its last check found
// waiting, less what it gave up (bytes estimated), and oldest when the
// first of its events waiting was stored (Unix nanoseconds: the
// Subscriptions of a namespace wait in several partitions, whose
// sequences do not compare); zero while its deliveries keep up
// (seenSized: the bytes estimated from a sample, else counted at the
// largest event size); oldest is valid while oldestKnown, and was found
// from acknowledgement floor oldestFrom, with the size of that event
// oldestSize and when it was stored oldestAt, in stream (only the running
// check uses these four). While
// limited, keep is how many events the namespace's total lets the
// Subscription keep (level, when not 0, is the stream's level that cut
// it); pressed says the namespace is near its totals; over says the last
// check gave up for the namespace's total.
type namespaceState struct {
	seenEvents, seenBytes  atomic.Int64
	oldest                 atomic.Int64
	oldestKnown, seenSized atomic.Bool
	oldestFrom             uint64
	oldestSize, oldestAt   int64
	stream                 jetstream.Stream
	keep, level            atomic.Int64
	limited, pressed, over atomic.Bool
}

// HoldNamespaces holds each namespace's Subscriptions (their backlogs)
// together to the namespace's totals (Config.NamespaceMaxBacklog,
// NamespaceMaxBacklogBytes), from what each one's last check found
// waiting (one whose deliveries keep up counts nothing), and all
// namespaces together to a part of the event stream (streamLevel): it
// asks nothing of the broker. For a namespace over a total or the level,
// the Subscriptions whose events have waited longest (stored first) are
// told how many they keep, so that their next checks give
// up the namespace's oldest events, the excess and no more; every other
// namespace is left as it is. It runs on the budget loop, before the
// checks it asks for.
func HoldNamespaces(cfg *Config, backlogs []*Backlog) {
	byNamespace := map[string][]*Backlog{}
	for _, b := range backlogs {
		byNamespace[b.namespace] = append(byNamespace[b.namespace], b)
	}
	seen := make(map[string]int64, len(byNamespace))
	for ns, bs := range byNamespace {
		for _, b := range bs {
			seen[ns] += b.ns.seenBytes.Load()
		}
	}
	level, nearLevel := streamLevel(cfg, seen)
	for ns, bs := range byNamespace {
		holdNamespace(cfg, bs, seen[ns], min(cfg.NamespaceMaxBacklogBytes, level), nearLevel)
	}
}

// holdNamespace holds one namespace's backlogs bs, holding bytes
// together, to its totals, its bytes to limit (its own total, or the
// stream's level when lower; nearLevel: the namespaces near that level).
func holdNamespace(cfg *Config, bs []*Backlog, bytes, limit int64, nearLevel bool) {
	var events int64
	for _, b := range bs {
		events += b.ns.seenEvents.Load()
	}
	overEvents := events - int64(cfg.NamespaceMaxBacklog)
	overBytes := bytes - limit
	// Past half a total, the checks find where each one's events start
	// and their size (firstWaiting), so that the oldest can be told apart
	// and bytes counted at the largest size estimated.
	pressed := nearLevel && bytes > 0 || 2*events > int64(cfg.NamespaceMaxBacklog) || 2*bytes > limit
	known := true
	for _, b := range bs {
		b.ns.pressed.Store(pressed)
		waits := b.ns.seenEvents.Load() > 0
		known = known && (!waits || b.ns.oldestKnown.Load())
		if overEvents <= 0 && waits && !b.ns.seenSized.Load() {
			known = false // over in bytes counted at the largest size: estimate them first
		}
	}
	if overEvents <= 0 && overBytes <= 0 || !known {
		// Within the totals; or over, but where some backlog's events
		// start, or their bytes, are not known yet: its next check finds
		// them.
		for _, b := range bs {
			b.ns.limited.Store(false)
		}
		return
	}
	slices.SortFunc(bs, func(x, y *Backlog) int { return cmp.Compare(x.ns.oldest.Load(), y.ns.oldest.Load()) })
	for _, b := range bs {
		held := b.ns.seenEvents.Load()
		var give int64
		if held > 0 {
			size := b.ns.seenBytes.Load() / held
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
			b.ns.limited.Store(false)
			continue
		}
		b.ns.keep.Store(held - give)
		b.ns.level.Store(0)
		if limit < cfg.NamespaceMaxBacklogBytes && overEvents <= 0 {
			b.ns.level.Store(limit) // cut by the stream's level, not its own total
		}
		b.ns.limited.Store(true)
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
func streamLevel(cfg *Config, seen map[string]int64) (level int64, near bool) {
	const none = int64(1<<63 - 1)
	if cfg.Streams.MaxBytes <= 0 {
		return none, false
	}
	var total int64
	for _, b := range seen {
		total += b
	}
	shared := cfg.Streams.MaxBytes / sharedDen * sharedNum
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
// Subscription keep, and whether it bounds them at all.
func (b *Backlog) namespaceKeep() (int, bool) {
	if !b.ns.limited.Load() {
		return 0, false
	}
	return int(b.ns.keep.Load()), true
}

// saw records what a budget check found: backlog events waiting, of
// size bytes each (0: not estimated), of which it gives up gone; and,
// while the namespace is near its totals, where they start.
func (b *Backlog) saw(ctx context.Context, info *jetstream.ConsumerInfo, backlog, gone int, size int64) {
	left := int64(max(backlog-gone, 0))
	if backlog > 0 && b.ns.pressed.Load() {
		if stored, first, ok := b.firstWaiting(ctx, info); ok {
			b.ns.oldest.Store(stored)
			b.ns.oldestKnown.Store(true)
			if size <= 0 {
				size = first // one event's size, better than the largest
			}
		}
	} else {
		b.ns.oldestKnown.Store(false)
	}
	b.ns.seenSized.Store(size > 0)
	if size <= 0 {
		size = max(int64(b.cfg.Streams.MaxMsgSize), 0) // at most the largest
	}
	b.ns.seenEvents.Store(left)
	b.ns.seenBytes.Store(left * size)
}

// maxOldestSubjects bounds the subjects firstWaiting reads: a
// Subscription of more types is placed by the first of them.
const maxOldestSubjects = 8

// firstWaiting returns when the first event waiting for the
// Subscription's consumer was stored (Unix nanoseconds) and its size
// (data and headers): the
// first of its subjects after its acknowledgement floor (one direct read
// per subject, none while the floor is where the last look found it).
func (b *Backlog) firstWaiting(ctx context.Context, info *jetstream.ConsumerInfo) (int64, int64, bool) {
	lo := info.AckFloor.Stream + 1
	if b.ns.oldestKnown.Load() && b.ns.oldestFrom == lo {
		return b.ns.oldestAt, b.ns.oldestSize, true
	}
	if b.ns.stream == nil {
		s, err := b.js.Stream(ctx, b.stream)
		if err != nil {
			return 0, 0, false
		}
		b.ns.stream = s
	}
	subjects := filterSubjects(info)
	var first *jetstream.RawStreamMsg
	for _, subject := range subjects[:min(len(subjects), maxOldestSubjects)] {
		m, err := b.ns.stream.GetMsg(ctx, lo, jetstream.WithGetMsgSubject(subject))
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgNotFound) {
				b.ns.stream = nil // look it up again: it may have been made anew
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
	b.ns.oldestFrom, b.ns.oldestSize = lo, rawSize(first)
	b.ns.oldestAt = first.Time.UnixNano()
	return b.ns.oldestAt, b.ns.oldestSize, true
}

// keepingUp records that the Subscription's deliveries keep up: nothing
// of it waits for the namespace's totals.
func (b *Backlog) keepingUp() {
	b.ns.seenEvents.Store(0)
	b.ns.seenBytes.Store(0)
}

// namespaceReason is the dead-letter reason of an event given up over its
// namespace's totals.
func (b *Backlog) namespaceReason(why string) string {
	if level := b.ns.level.Load(); level > 0 {
		return fmt.Sprintf("the backlogs of all namespaces over three quarters of the event stream, namespace %s's among those holding the most (cut to %d bytes each) and %s: its oldest events given up",
			b.namespace, level, why)
	}
	return fmt.Sprintf("namespace %s's backlog over its total (%d events, %d bytes, of all its Subscriptions together) and %s: its oldest events given up",
		b.namespace, b.cfg.NamespaceMaxBacklog, b.cfg.NamespaceMaxBacklogBytes, why)
}
