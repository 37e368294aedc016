package deadletter

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// This file is how the Writer makes room in a full dead-letter stream:
// with the oldest letter of the namespace holding the most.

// candidates is how many of the namespaces with the most dead letters in
// the stream makeRoom weighs in bytes, besides those the Writer knows.
const candidates = 4

// makeRoom drops one dead letter for a letter of namespace ns (whose
// usage u counts it) that the full stream refused: the oldest of the
// namespace holding the most bytes of dead letters, if one holds more
// than ns with its new letter, else ns's own oldest. So that a namespace
// keeps its letters however many others fill the stream, down to an
// equal share of it. It weighs a few namespaces (largest); when ns has no
// letter to give up and none of those holds more, it weighs every
// namespace holding letters before refusing the letter (its event would
// be lost). It returns the namespace it chose, "" for none (ns has no
// letter, and none holds more), and how many letters it dropped: 0 when
// the chosen namespace's letters were all gone (replayed, deleted or aged
// out since the look), whose room the letter may take now (the next look
// leaves it out: it is in found empty, which makeRoom fills).
func (w *Writer) makeRoom(ctx context.Context, ns string, u *usage, empty map[string]bool) (string, int, error) {
	h, err := w.holders(ctx)
	if err != nil {
		return "", 0, err
	}
	few, turn := w.few(h, ns)
	if err := w.checkCount(ctx, turn); err != nil {
		return "", 0, err
	}
	other, ou, err := w.largest(ctx, ns, u, empty, few)
	if err != nil {
		return "", 0, err
	}
	if other == "" {
		n, err := w.dropOldestLocked(ctx, ns, u)
		if err != nil || n > 0 {
			return ns, n, err
		}
		if other, ou, err = w.largest(ctx, ns, u, empty, h.names()); err != nil || other == "" {
			return "", 0, err
		}
	}
	n, err := w.dropOldestLocked(ctx, other, ou)
	if err != nil {
		return "", 0, err
	}
	if n == 0 {
		empty[other] = true
	}
	return other, n, nil
}

// few returns the namespaces a full stream weighs for each letter: those
// with the most letters (candidates of them), the next in turn of the
// others (by name, so that every holder is weighed, and its count
// checked, within as many letters as namespaces hold letters, however
// few its letters), and those the Writer wrote for lately; and which is
// the one in turn ("" for none). ns, the writing namespace, is not one.
func (w *Writer) few(h holdings, ns string) ([]string, string) {
	names := h.names()
	few := make([]string, 0, candidates+1)
	for _, k := range h.top() {
		few = append(few, names[k])
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	turn := h.after(w.turn, ns)
	if turn != "" {
		few = append(few, turn)
		w.turn = turn
	}
	looked := len(few)
	for k := range w.namespaces { // each once: a look through the few only
		if !slices.Contains(few[:looked], k) {
			few = append(few, k)
		}
	}
	return few, turn
}

// checkCount counts namespace ns's letters from the stream when its count
// is older than CountAgain (or it has none); "" is no namespace.
func (w *Writer) checkCount(ctx context.Context, ns string) error {
	if ns == "" {
		return nil
	}
	u := w.usage(ns)
	u.mu.Lock()
	defer u.mu.Unlock()
	return w.count(ctx, ns, u)
}

// largest returns the namespace of names other than ns that holds the
// most bytes of dead letters, with its usage, if it holds more than ns
// (u) does; "" when none does. It leaves out those in empty and weighs
// the others by their bytes as count counts them: a namespace never
// counted is counted now, and only the one found heaviest is counted
// again when its count is older than CountAgain, so that a full stream
// costs a count of the namespace chosen, not of every namespace weighed.
func (w *Writer) largest(ctx context.Context, ns string, u *usage, empty map[string]bool, names []string) (string, *usage, error) {
	u.mu.Lock()
	mine := u.bytes
	u.mu.Unlock()
	weighed := map[string]bool{ns: true}
	for {
		best, bestU, most := "", (*usage)(nil), mine
		for _, name := range names {
			if weighed[name] || empty[name] {
				continue
			}
			ou := w.usage(name)
			ou.mu.Lock()
			var err error
			if ou.counted.IsZero() {
				err = w.count(ctx, name, ou)
			}
			held := ou.bytes
			ou.mu.Unlock()
			if err != nil {
				return "", nil, err
			}
			if held > most {
				best, bestU, most = name, ou, held
			}
		}
		if best == "" {
			return "", nil, nil
		}
		bestU.mu.Lock()
		err := w.count(ctx, best, bestU) // again, when its count is old
		held := bestU.bytes
		bestU.mu.Unlock()
		if err != nil {
			return "", nil, err
		}
		if held > mine {
			return best, bestU, nil
		}
		weighed[best] = true // counted now, and no heavier than ns
	}
}

// holdings are the namespaces holding dead letters in the stream, by
// name, with how many letters each holds (JetStream counts letters per
// subject, not bytes).
type holdings struct {
	held []held
}

// held is one namespace's count of letters.
type held struct {
	ns      string
	letters uint64
}

// names returns the namespaces, by name.
func (h holdings) names() []string {
	names := make([]string, len(h.held))
	for k, x := range h.held {
		names[k] = x.ns
	}
	return names
}

// top returns the places of the namespaces with the most letters, at most
// candidates of them, most first.
func (h holdings) top() []int {
	places := make([]int, len(h.held))
	for k := range places {
		places[k] = k
	}
	slices.SortStableFunc(places, func(a, b int) int { return cmp.Compare(h.held[b].letters, h.held[a].letters) })
	return places[:min(len(places), candidates)]
}

// after returns the namespace next by name after last, but ns and those
// of top, from the first again past the last; "" when there is none.
func (h holdings) after(last, ns string) string {
	top := h.top()
	first := ""
	for k, x := range h.held {
		if x.ns == ns || slices.Contains(top, k) {
			continue
		}
		if x.ns > last {
			return x.ns
		}
		if first == "" {
			first = x.ns
		}
	}
	return first
}

// holders returns the namespaces holding letters in the stream, from one
// look at its subjects.
func (w *Writer) holders(ctx context.Context) (holdings, error) {
	s, err := w.deadLetterStream(ctx)
	if err != nil {
		return holdings{}, fmt.Errorf("%w: find the namespaces holding the dead-letter stream: %w", eventstore.ErrUnavailable, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(stream.DeadLetterSubject("*")))
	if err != nil {
		w.forgetStream()
		return holdings{}, fmt.Errorf("%w: find the namespaces holding the dead-letter stream: %w", eventstore.ErrUnavailable, err)
	}
	h := holdings{held: make([]held, 0, len(info.State.Subjects))}
	prefix := stream.DeadLetterSubject("")
	for subject, n := range info.State.Subjects {
		h.held = append(h.held, held{strings.TrimPrefix(subject, prefix), n})
	}
	slices.SortFunc(h.held, func(a, b held) int { return cmp.Compare(a.ns, b.ns) })
	return h, nil
}
