package deadletter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// settleWait is how long a reader waits for its next letter before it asks
// the server whether any is left: letters deleted (replayed, or dropped to
// make room) after the reader was told how many there were never come.
const settleWait = 100 * time.Millisecond

// readOrdered calls fn with the messages of the ordered consumer c, in
// order, until fn says it wants no more or none is left. It reads at most
// as many as c had when it began (letters stored meanwhile may be among
// them; a flood of new ones cannot keep it reading), and ends when a
// message says none is pending after it, or when the server says none is
// pending and every message it sent was read. opt bounds the read-ahead.
func readOrdered(ctx context.Context, c jetstream.Consumer, opt jetstream.PullMessagesOpt, fn func(jetstream.Msg, *jetstream.MsgMetadata) (more bool, err error)) error {
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	if info.NumPending == 0 {
		return nil
	}
	it, err := c.Messages(opt)
	if err != nil {
		return err
	}
	defer it.Stop()
	var last read
	failedLooks := 0
	for left := info.NumPending; left > 0; {
		m, err := nextWithin(ctx, it, settleWait)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			info, err := c.Info(ctx)
			switch {
			case err != nil && failedLooks < maxFailedLooks:
				failedLooks++ // one look that fails under load does not fail the read
			case err != nil:
				return err
			case info.NumPending == 0 && last.allOf(info):
				return nil // the rest went before they were read
			}
			continue
		}
		if err != nil {
			return err
		}
		left--
		meta, err := m.Metadata()
		if err != nil {
			continue // not a stream's message: nothing to read
		}
		last = read{consumer: meta.Consumer, sequence: meta.Sequence.Consumer}
		more, err := fn(m, meta)
		if err != nil || !more {
			return err
		}
		if meta.NumPending == 0 {
			return nil
		}
	}
	return nil
}

// maxFailedLooks is how many looks at the consumer may fail, one after
// the other, before a read gives up.
const maxFailedLooks = 3

// read is the last message read of an ordered consumer: the name of the
// server's consumer that sent it (an ordered consumer makes a new one
// when it resets, numbered from 1 again) and its sequence there.
type read struct {
	consumer string
	sequence uint64
}

// allOf says whether every message the consumer info describes has sent
// was read: one made since the last message read has sent none of them.
func (r read) allOf(info *jetstream.ConsumerInfo) bool {
	if info.Name != r.consumer {
		return info.Delivered.Consumer == 0
	}
	return info.Delivered.Consumer <= r.sequence
}

// nextWithin is its next message, waiting at most wait for it; the error
// is context.DeadlineExceeded when none came in time.
func nextWithin(ctx context.Context, it jetstream.MessagesContext, wait time.Duration) (jetstream.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m, err := it.Next(jetstream.NextContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("next dead letter: %w", err)
	}
	return m, nil
}
