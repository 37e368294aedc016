package deadletter_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
)

// purgingJetStream is a JetStream whose next ordered consumer, once armed,
// has the dead-letter stream purged right after its reader asked it how
// many letters it has: a fake of timing only, for letters replayed or
// deleted between a reader's look and its read, which no real part can be
// made to do at that moment. (kfn dev's web view listed the dead letters
// while its Replay button deleted the one there was, and waited for it for
// ever: the page showed "Replaying…" until it was closed.)
type purgingJetStream struct {
	jetstream.JetStream
	streams stream.Config
	armed   atomic.Bool
	// failLooks is how many of the looks after the purge fail (as one
	// that times out under load does).
	failLooks int32
}

func (p *purgingJetStream) OrderedConsumer(ctx context.Context, name string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	c, err := p.JetStream.OrderedConsumer(ctx, name, cfg)
	if err != nil || !p.armed.CompareAndSwap(true, false) {
		return c, err
	}
	purge := &atomic.Bool{}
	purge.Store(true)
	fails := &atomic.Int32{}
	fails.Store(p.failLooks)
	return purgedAfterInfo{Consumer: c, p: p, purge: purge, fails: fails}, nil
}

// purgedAfterInfo is an ordered consumer of a purgingJetStream whose first
// Info is followed by the purge.
type purgedAfterInfo struct {
	jetstream.Consumer
	p     *purgingJetStream
	purge *atomic.Bool
	fails *atomic.Int32
}

// errLook is a look at the consumer that failed.
var errLook = errors.New("consumer info: timeout")

func (c purgedAfterInfo) Info(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	if !c.purge.Load() && c.fails.Add(-1) >= 0 {
		return nil, errLook
	}
	info, err := c.Consumer.Info(ctx)
	if err != nil || !c.purge.CompareAndSwap(true, false) {
		return info, err
	}
	s, err := c.p.JetStream.Stream(ctx, c.p.streams.DeadLetterStream)
	if err != nil {
		return nil, err
	}
	return info, s.Purge(ctx)
}

// TestAListingWhoseLettersGoMeanwhileEnds: the letters a listing was
// told of are deleted before it reads them; it ends, with none of them,
// rather than waiting for them until its context ends.
func TestAListingWhoseLettersGoMeanwhileEnds(t *testing.T) {
	for _, preview := range []bool{true, false} {
		e := newEnv(t)
		for i := range 3 {
			e.bury(t, "default", "a", string(rune('1'+i)), uint64(10+i))
		}
		p := &purgingJetStream{JetStream: e.js, streams: e.streams}
		a, err := deadletter.NewAdmin(p, e.streams)
		require.NoError(t, err)
		p.armed.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		letters, err := a.List(ctx, deadletter.Filter{Preview: preview})
		cancel()
		require.NoError(t, err, "preview %v: the listing ends when nothing is left to read", preview)
		assert.Empty(t, letters, "preview %v", preview)
		assert.False(t, p.armed.Load(), "the letters went between the look and the read")
	}
}

// TestACountWhoseLettersGoMeanwhileEnds: a Writer counts a namespace's
// letters, which are deleted before it reads them; the letter it writes
// is stored rather than waiting, with the namespace's lock held, until
// its context ends.
func TestACountWhoseLettersGoMeanwhileEnds(t *testing.T) {
	e, _ := writerEnv(t, 100<<10, 64<<10)
	writeAll(t, deadletter.NewWriter(e.js, e.streams), "ns", bytes.Repeat([]byte("a"), 1<<10), 1, 2, 3)
	p := &purgingJetStream{JetStream: e.js, streams: e.streams}
	w := deadletter.NewWriter(p, e.streams)
	p.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := writeWithin(ctx, w, "ns", 4, []byte("b"))
	require.NoError(t, err, "the count ends when nothing is left to read")
	assert.False(t, p.armed.Load(), "the letters went between the look and the read")
	assert.Equal(t, []uint64{4}, e.sequences(t, "ns"))
}

// TestAListingEndsWhileLettersKeepComing: a letter is stored for every
// letter listed; the listing ends with the letters there were when it
// began, rather than reading new ones for as long as they come. (The
// letters are large, so that the listing reads them a few at a time, and
// those it reads later say that more came.)
func TestAListingEndsWhileLettersKeepComing(t *testing.T) {
	e := newBoundedEnv(t, 1000, 1<<30)
	data := bytes.Repeat([]byte("x"), 900<<10)
	for i := range 12 {
		require.NoError(t, e.buryData("default", "a", uint64(i+1), data))
	}
	buried := uint64(100)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := 0
	_, err := e.admin.Each(ctx, deadletter.Filter{Limit: deadletter.MaxLimit}, func(deadletter.Letter) error {
		seen++
		buried++
		return e.buryData("default", "a", buried, data)
	})
	require.NoError(t, err)
	assert.Equal(t, 12, seen)
}

// TestALookThatFailsIsBorneAFewTimes: the letters went meanwhile, and the
// reader's looks at what is left fail: a few failures are borne (the
// listing ends with none of the letters), more fail the listing, which
// never waits for ever.
func TestALookThatFailsIsBorneAFewTimes(t *testing.T) {
	for _, tc := range []struct {
		fails int32
		ok    bool
	}{{fails: 3, ok: true}, {fails: 4, ok: false}} {
		e := newEnv(t)
		e.bury(t, "default", "a", "1", 10)
		p := &purgingJetStream{JetStream: e.js, streams: e.streams, failLooks: tc.fails}
		a, err := deadletter.NewAdmin(p, e.streams)
		require.NoError(t, err)
		p.armed.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		letters, err := a.List(ctx, deadletter.Filter{})
		cancel()
		if tc.ok {
			require.NoError(t, err, "%d failed looks are borne", tc.fails)
			assert.Empty(t, letters)
		} else {
			require.ErrorIs(t, err, errLook, "%d failed looks fail the listing", tc.fails)
		}
	}
}
