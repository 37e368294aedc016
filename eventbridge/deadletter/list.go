package deadletter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kfn-dev/kfn/contract/stream"
)

// Limits of List.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Filter selects dead letters.
type Filter struct {
	// Namespace and Subscription select one Subscription's dead letters;
	// both empty select all. Subscription needs Namespace.
	Namespace, Subscription string
	// After skips dead letters up to this sequence (for paging).
	After uint64
	// Limit is the most returned; DefaultLimit when 0, at most MaxLimit.
	Limit int
	// Preview lists each letter with only the start of its data (the
	// MaxPreview bytes kept in its header HeaderDataPreview when it was
	// dead-lettered) and the size of the whole: the data itself is not
	// read, so a page of large letters costs what their headers do.
	// Letters stored before previews were kept have no data then.
	Preview bool
}

// listBufferBytes bounds the bytes of dead letters a listing reads ahead:
// a listing holds at most this and the letter it writes, however many it
// lists.
const listBufferBytes = 4 << 20

// previewReadAhead is how many letters a listing with Filter.Preview reads
// ahead: their headers, each at most the event's and the failure's.
const previewReadAhead = 64

// List returns the dead letters the filter selects, oldest first. It holds
// them all: for many, use Each.
func (a *Admin) List(ctx context.Context, f Filter) ([]Letter, error) {
	out := []Letter{}
	_, err := a.Each(ctx, f, func(l Letter) error {
		out = append(out, l)
		return nil
	})
	return out, err
}

// Each calls fn with each dead letter the filter selects, oldest first, up
// to its Limit, reading ahead at most listBufferBytes; an error of fn
// stops it and is returned. next is the sequence to pass as Filter.After
// for the next page, 0 when no letter is left after the last one given.
// The error wraps ErrInvalidFilter for a filter that cannot select.
func (a *Admin) Each(ctx context.Context, f Filter, fn func(Letter) error) (next uint64, err error) {
	subjects, err := f.subjects()
	if err != nil {
		return 0, err
	}
	if f.Limit == 0 {
		f.Limit = DefaultLimit
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverAllPolicy, HeadersOnly: f.Preview}
	if f.After > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = f.After + 1
	}
	c, err := a.js.OrderedConsumer(ctx, a.streams.DeadLetterStream, cfg)
	if err != nil {
		return 0, fmt.Errorf("read dead letters: %w", err)
	}
	// The server would keep the consumer for minutes after the last read:
	// remove it, so that listing often (kfn dev's web view) leaves none.
	defer a.deleteConsumer(c)
	// Headers only (Preview) are small: a batch of messages, where a bound
	// in bytes would make the client buffer a million of them.
	readAhead := jetstream.PullMessagesOpt(jetstream.PullMaxBytes(listBufferBytes))
	if f.Preview {
		readAhead = jetstream.PullMaxMessages(previewReadAhead)
	}
	given, full := 0, false
	var fnErr error
	err = readOrdered(ctx, c, readAhead, func(m jetstream.Msg, meta *jetstream.MsgMetadata) (bool, error) {
		var l Letter
		if f.Preview {
			l = preview(meta.Sequence.Stream, m.Headers())
		} else {
			l = letter(meta.Sequence.Stream, m.Headers(), m.Data())
		}
		if !f.selects(l) {
			return true, nil
		}
		if given == f.Limit {
			full = true // more are left: the next page starts after the last given
			return false, nil
		}
		if fnErr = fn(l); fnErr != nil {
			return false, nil
		}
		given++
		next = l.Sequence
		return true, nil
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("read dead letters: %w", err)
	case fnErr != nil:
		return 0, fnErr
	case !full:
		return 0, nil
	}
	return next, nil
}

// subjects returns the subjects the filter's dead letters are on: their
// namespace's, and those of dead letters of releases before per-namespace
// bounds (one per consumer). The error wraps ErrInvalidFilter.
func (f Filter) subjects() ([]string, error) {
	switch {
	case f.Subscription != "" && f.Namespace == "":
		return nil, fmt.Errorf("%w: a subscription needs its namespace", ErrInvalidFilter)
	case f.Limit < 0 || f.Limit > MaxLimit:
		return nil, fmt.Errorf("%w: limit must be between 1 and %d", ErrInvalidFilter, MaxLimit)
	case f.Namespace == "":
		return []string{DeadLetterSubjectPrefixAll}, nil
	}
	if errs := validation.IsDNS1123Label(f.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("%w: namespace %q: %s", ErrInvalidFilter, f.Namespace, strings.Join(errs, "; "))
	}
	legacy := stream.DeadLetterSubjectPrefix + ".*"
	if f.Subscription != "" {
		if errs := validation.IsDNS1123Subdomain(f.Subscription); len(errs) > 0 {
			return nil, fmt.Errorf("%w: subscription %q: %s", ErrInvalidFilter, f.Subscription, strings.Join(errs, "; "))
		}
		legacy = stream.LegacyDeadLetterSubject(stream.ConsumerName(f.Namespace, f.Subscription))
	}
	return []string{stream.DeadLetterSubject(f.Namespace), legacy}, nil
}

// selects reports whether the filter selects l: its subjects select its
// namespace's letters, which are told apart by their headers.
func (f Filter) selects(l Letter) bool {
	return (f.Namespace == "" || l.Namespace == f.Namespace) && (f.Subscription == "" || l.Subscription == f.Subscription)
}

// deleteConsumer removes the server's consumer behind the ordered consumer
// c; a failure leaves it to expire on its own.
func (a *Admin) deleteConsumer(c jetstream.Consumer) {
	deleteOrdered(a.js, a.streams.DeadLetterStream, c)
}

// deleteOrdered removes the server's consumer behind the ordered consumer
// c of stream name; a failure leaves it to expire on its own.
func deleteOrdered(js jetstream.JetStream, name string, c jetstream.Consumer) {
	info := c.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = js.DeleteConsumer(ctx, name, info.Name)
}

// DeadLetterSubjectPrefixAll selects every dead letter.
const DeadLetterSubjectPrefixAll = stream.DeadLetterSubjectPrefix + ".>"
