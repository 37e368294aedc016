package budget

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// budgetSamples is how many waiting events a byte estimate reads, and
// sampleEvery how many checks reuse one.
const (
	budgetSamples = 8
	sampleEvery   = 4
)

// bytesOver estimates the bytes of the backlog events waiting for the
// Subscription (JetStream counts them, not their bytes) and returns how
// many events are over maxBacklogBytes, and the mean event size it
// estimated with (0 when it made no estimate). The estimate is the backlog times
// the mean size of budgetSamples events read at sequences spread over it
// (renewed every sampleEvery checks); it is not made while the backlog,
// were every event of the largest size the stream takes, would be within
// the budget.
func (b *Backlog) bytesOver(ctx context.Context, info *jetstream.ConsumerInfo, backlog int) (int, int64) {
	limit := b.maxBacklogBytes()
	largest := int64(b.cfg.Streams.MaxMsgSize)
	if backlog == 0 || limit <= 0 || largest > 0 && int64(backlog)*largest <= limit {
		b.bytesWaiting.Store(0)
		return 0, 0
	}
	if b.sampledSize == 0 || b.sinceSample >= sampleEvery {
		if size := b.sampleEventSize(ctx, info); size > 0 {
			b.sampledSize, b.sinceSample = size, 0
		}
	}
	b.sinceSample++
	size := b.sampledSize
	if size == 0 {
		return 0, 0
	}
	waiting := int64(backlog) * size
	b.bytesWaiting.Store(waiting)
	if waiting <= limit {
		return 0, size
	}
	return int((waiting - limit + size - 1) / size), size
}

// sampleEventSize returns the mean size, data and headers, of up to
// budgetSamples events of the consumer's subjects at sequences spread from
// its acknowledgement floor to the end of the stream; 0 when it could read
// none.
func (b *Backlog) sampleEventSize(ctx context.Context, info *jetstream.ConsumerInfo) int64 {
	s, err := b.js.Stream(ctx, b.stream)
	if err != nil {
		return 0
	}
	subjects := filterSubjects(info)
	if len(subjects) == 0 {
		return 0
	}
	lo, hi := info.AckFloor.Stream+1, s.CachedInfo().State.LastSeq
	if i, err := s.Info(ctx); err == nil {
		hi = i.State.LastSeq
	}
	if hi < lo {
		return 0
	}
	var total, n int64
	for i := range budgetSamples {
		seq := lo + (hi-lo)*uint64(i)/uint64(budgetSamples-1)
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subjects[i%len(subjects)]))
		if err != nil {
			continue
		}
		total += rawSize(m)
		n++
	}
	if n == 0 {
		return 0
	}
	return total / n
}

// filterSubjects are the subjects of the consumer of info.
func filterSubjects(info *jetstream.ConsumerInfo) []string {
	subjects := info.Config.FilterSubjects
	if len(subjects) == 0 && info.Config.FilterSubject != "" {
		subjects = []string{info.Config.FilterSubject}
	}
	return subjects
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
