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
// equal share of it. It returns the namespace it chose, "" for none (ns
// has no letter, and none holds more), and how many letters it dropped:
// 0 when the chosen namespace's letters were all gone (replayed, deleted
// or aged out since the look), whose room the letter may take now (the
// next look leaves it out: it is in found empty, which makeRoom fills).
func (w *Writer) makeRoom(ctx context.Context, ns string, u *usage, empty map[string]bool) (string, int, error) {
	other, ou, err := w.largest(ctx, ns, u, empty)
	if err != nil {
		return "", 0, err
	}
	if other != "" {
		n, err := w.dropOldestLocked(ctx, other, ou)
		if err != nil {
			return "", 0, err
		}
		if n == 0 {
			empty[other] = true
		}
		return other, n, nil
	}
	n, err := w.dropOldestLocked(ctx, ns, u)
	if err != nil || n == 0 {
		return "", 0, err
	}
	return ns, n, nil
}

// largest returns the namespace other than ns that holds the most bytes
// of dead letters, with its usage, if it holds more than ns (u) does; ""
// when none does. It weighs the namespaces with the most letters in the
// stream (candidates of them) and those the Writer knows, but those in
// empty, by their bytes as count counts them: a namespace never counted
// is counted now, and only the one found heaviest is counted again when
// its count is older than CountAgain, so that a full stream costs a count
// of the namespace chosen, not of every namespace weighed.
func (w *Writer) largest(ctx context.Context, ns string, u *usage, empty map[string]bool) (string, *usage, error) {
	names, err := w.holders(ctx)
	if err != nil {
		return "", nil, err
	}
	holders := len(names)
	w.mu.Lock()
	for k := range w.namespaces { // each once: a look through the few holders only
		if !slices.Contains(names[:holders], k) {
			names = append(names, k)
		}
	}
	w.mu.Unlock()
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

// holders returns the namespaces with the most dead letters in the
// stream, at most candidates of them, most first.
func (w *Writer) holders(ctx context.Context) ([]string, error) {
	s, err := w.deadLetterStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: find the namespaces holding the dead-letter stream: %w", eventstore.ErrUnavailable, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(stream.DeadLetterSubject("*")))
	if err != nil {
		w.forgetStream()
		return nil, fmt.Errorf("%w: find the namespaces holding the dead-letter stream: %w", eventstore.ErrUnavailable, err)
	}
	type held struct {
		ns      string
		letters uint64
	}
	all := make([]held, 0, len(info.State.Subjects))
	prefix := stream.DeadLetterSubject("")
	for subject, n := range info.State.Subjects {
		all = append(all, held{strings.TrimPrefix(subject, prefix), n})
	}
	slices.SortFunc(all, func(a, b held) int { return cmp.Or(cmp.Compare(b.letters, a.letters), cmp.Compare(a.ns, b.ns)) })
	names := make([]string, 0, candidates)
	for _, h := range all[:min(len(all), candidates)] {
		names = append(names, h.ns)
	}
	return names, nil
}
