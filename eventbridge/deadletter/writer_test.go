package deadletter_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// writerEnv is a dead-letter stream of maxBytes, perNamespace bytes of
// it for each namespace (and what tweaks set), and a Writer to it.
func writerEnv(t *testing.T, maxBytes, perNamespace int64, tweaks ...func(*stream.Config)) (*env, *deadletter.Writer) {
	t.Helper()
	js := natstest.Start(t).JetStream()
	sc := stream.DefaultConfig()
	sc.Storage = stream.StorageMemory
	sc.MaxMsgSize = 32 << 10
	sc.DeadLetterMaxBytes, sc.DeadLetterMaxBytesPerNamespace = maxBytes, perNamespace
	for _, tweak := range tweaks {
		tweak(&sc)
	}
	require.NoError(t, jsstream.Ensure(context.Background(), js, sc))
	a, err := deadletter.NewAdmin(js, sc)
	require.NoError(t, err)
	return &env{js: js, streams: sc, admin: a}, deadletter.NewWriter(js, sc)
}

// write stores a dead letter of ns/s with data through w, as the
// dispatcher does, and returns how many of ns's older letters it dropped.
func write(w *deadletter.Writer, ns string, seq uint64, data []byte) (int, error) {
	d, err := writeDropping(w, ns, seq, data)
	return d.Own, err
}

// writeDropping is write, returning all the letters it dropped.
func writeDropping(w *deadletter.Writer, ns string, seq uint64, data []byte) (deadletter.Dropped, error) {
	return writeWithin(context.Background(), w, ns, seq, data)
}

// writeWithin is writeDropping within ctx.
func writeWithin(ctx context.Context, w *deadletter.Writer, ns string, seq uint64, data []byte) (deadletter.Dropped, error) {
	h := nats.Header{"ce-specversion": {"1.0"}, "ce-id": {strconv.FormatUint(seq, 10)}, "ce-source": {"shop"}, "ce-type": {"order.created.v1"}}
	f := deadletter.Failure{Namespace: ns, Subscription: "s", Status: 500, Error: "sink answered 500", Attempts: 1,
		Subject: "kyma.shop.order.created.v1", Sequence: seq, At: time.Now()}
	return w.Write(ctx, h, data, f)
}

// sequences returns the event sequences of namespace ns's dead letters
// (write makes them their ids), oldest first.
func (e *env) sequences(t *testing.T, ns string) []uint64 {
	t.Helper()
	letters, err := e.admin.List(context.Background(), deadletter.Filter{Namespace: ns})
	require.NoError(t, err)
	var seqs []uint64
	for _, l := range letters {
		seq, err := strconv.ParseUint(l.ID, 10, 64)
		require.NoError(t, err)
		seqs = append(seqs, seq)
	}
	return seqs
}

// TestNamespaceDeadLettersAreBoundedInBytes: a namespace's dead letters of
// 16 KiB, 64 KiB of them at most: it keeps its newest (three: each is a
// little over 16 KiB with its headers), its oldest are dropped for them,
// and another namespace's letters stay. JetStream bounds bytes per stream
// only, so without the writer's bound the namespace filled the stream.
func TestNamespaceDeadLettersAreBoundedInBytes(t *testing.T) {
	e, w := writerEnv(t, 1<<20, 64<<10)
	data := bytes.Repeat([]byte("x"), 16<<10)
	for seq := range uint64(3) {
		_, err := write(w, "victim", seq+1, data)
		require.NoError(t, err)
	}
	dropped := 0
	for seq := range uint64(20) {
		n, err := write(w, "attacker", 100+seq, data)
		require.NoError(t, err, "a namespace at its bound makes room with its own oldest")
		dropped += n
	}
	assert.Equal(t, []uint64{117, 118, 119}, e.sequences(t, "attacker"), "its newest are kept")
	assert.Equal(t, 17, dropped, "the writer says how many it dropped")
	assert.Equal(t, []uint64{1, 2, 3}, e.sequences(t, "victim"), "another namespace's letters stay")
}

// TestAFullDeadLetterStreamMakesRoomWithTheLargestHoldersOldest: the
// dead-letter stream (100 KiB) is full of two namespaces' letters (16 and
// 17 KiB each), within their bounds (64 KiB). A namespace makes room for
// its newest with its own oldest while no other holds more than it does
// with it; a namespace with none, written by another replica (a Writer
// that knows nothing of the others), makes room with the oldest of the
// one holding the most, then with its own once none holds more. Before,
// the third namespace's letter was refused (eventstore.ErrStorageFull:
// the dispatcher drops the event) however many the first two held. The
// sizes differ by a KiB, so that the letters' headers (their times) never
// tip a comparison.
func TestAFullDeadLetterStreamMakesRoomWithTheLargestHoldersOldest(t *testing.T) {
	e, w := writerEnv(t, 100<<10, 64<<10)
	writeAll(t, w, "a", bytes.Repeat([]byte("a"), 16<<10), 11, 12, 13)
	writeAll(t, w, "b", bytes.Repeat([]byte("b"), 17<<10), 21, 22, 23)
	assert.Equal(t, []uint64{11, 12, 13}, e.sequences(t, "a"), "a's letters stay: it holds no more than b with its newest")
	assert.Equal(t, []uint64{22, 23}, e.sequences(t, "b"), "b's oldest made room for its newest")

	replica := deadletter.NewWriter(e.js, e.streams)
	data := bytes.Repeat([]byte("c"), 20<<10)
	d, err := writeDropping(replica, "c", 31, data)
	require.NoError(t, err, "c's letter is stored")
	assert.Equal(t, deadletter.Dropped{Others: 1}, d, "one of another namespace's dropped")
	assert.Equal(t, []uint64{12, 13}, e.sequences(t, "a"), "a held the most: its oldest made room")
	assert.Equal(t, []uint64{22, 23}, e.sequences(t, "b"))
	assert.Equal(t, []uint64{31}, e.sequences(t, "c"))

	d, err = writeDropping(replica, "c", 32, data)
	require.NoError(t, err)
	assert.Equal(t, deadletter.Dropped{Own: 1}, d, "a and b hold no more than c with its newest: its own oldest made room")
	assert.Equal(t, []uint64{12, 13}, e.sequences(t, "a"))
	assert.Equal(t, []uint64{22, 23}, e.sequences(t, "b"))
	assert.Equal(t, []uint64{32}, e.sequences(t, "c"))
}

// TestTheLargestHolderIsFoundAmongManyNamespaces: more namespaces hold
// letters than the Writer weighs from the stream's counts (the 4 with the
// most letters), and the one holding the most bytes has the fewest
// letters; the Writer that stored them knows it, and its letters make
// room for a newcomer's, not the small letters of the others.
func TestTheLargestHolderIsFoundAmongManyNamespaces(t *testing.T) {
	e, w := writerEnv(t, 96<<10, 64<<10)
	small := bytes.Repeat([]byte("s"), 2<<10)
	for i, ns := range []string{"n1", "n2", "n3", "n4", "n5"} {
		base := uint64(10 * (i + 1))
		writeAll(t, w, ns, small, base+1, base+2, base+3)
	}
	writeAll(t, w, "big", bytes.Repeat([]byte("b"), 20<<10), 91, 92)
	d, err := writeDropping(w, "newcomer", 99, bytes.Repeat([]byte("x"), 20<<10))
	require.NoError(t, err)
	assert.Equal(t, deadletter.Dropped{Others: 1}, d)
	assert.Equal(t, []uint64{92}, e.sequences(t, "big"), "the largest holder gave up its oldest")
	for i, ns := range []string{"n1", "n2", "n3", "n4", "n5"} {
		assert.Len(t, e.sequences(t, ns), 3, "%s (%d) keeps its letters", ns, i)
	}
	assert.Equal(t, []uint64{99}, e.sequences(t, "newcomer"))
}

// TestLettersStoredSideBySideKeepTheNamespacesBound: a budget gives up
// many events of one namespace at once, and their letters are stored side
// by side (one at a time, a Subscription whose events arrive faster than
// two JetStream round trips each filled the event stream). However many
// are on their way, the namespace keeps no more than its bound: a letter
// that finds the room taken by others on their way waits for them, then
// drops the oldest.
func TestLettersStoredSideBySideKeepTheNamespacesBound(t *testing.T) {
	e, w := writerEnv(t, 1<<20, 64<<10)
	data := bytes.Repeat([]byte("x"), 16<<10)
	var dropped atomic.Int64
	burst := func(writers, each int, first uint64) {
		t.Helper()
		var g errgroup.Group
		start := make(chan struct{})
		for i := range writers {
			g.Go(func() error {
				<-start
				for j := range each {
					n, err := write(w, "attacker", first+uint64(i*each+j), data)
					if err != nil {
						return err
					}
					dropped.Add(int64(n))
				}
				return nil
			})
		}
		close(start)
		require.NoError(t, g.Wait())
	}
	burst(32, 1, 100) // at once, none stored yet
	assert.Len(t, e.sequences(t, "attacker"), 3, "its bound holds three, however many arrive at once")
	burst(8, 5, 200)
	kept := e.sequences(t, "attacker")
	assert.Len(t, kept, 3)
	assert.Equal(t, int64(72-len(kept)), dropped.Load(), "every other letter was dropped for a newer one")
	n, err := write(w, "victim", 1, data)
	require.NoError(t, err)
	assert.Zero(t, n, "another namespace's room is its own")
}

// TestLettersOfTwoPartitionsAreTwoLetters: events of two partitions may
// have the same sequence; each is a letter of its own (one id per
// partition), while the same event given up twice is stored once, and
// partition 0's letters keep the id they had before partitions.
func TestLettersOfTwoPartitionsAreTwoLetters(t *testing.T) {
	e, w := writerEnv(t, 1<<20, 256<<10)
	h := nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"a"}, "ce-source": {"shop"}, "ce-type": {"order.created.v1"}}
	failure := func(partition string) deadletter.Failure {
		return deadletter.Failure{Namespace: "shop", Subscription: "s", Status: 500, Error: "500", Attempts: 1,
			Subject: "kyma.shop.order.created.v1", Sequence: 7, Stream: partition, At: time.Now()}
	}
	assert.Equal(t, "dlq:"+stream.ConsumerName("shop", "s")+":7", deadletter.MsgID(failure("")))
	for _, partition := range []string{e.streams.EventStream, e.streams.EventStream + "-1", e.streams.EventStream + "-1", e.streams.EventStream} {
		_, err := w.Write(context.Background(), h, []byte("x"), failure(partition))
		require.NoError(t, err)
	}
	letters, err := e.admin.List(context.Background(), deadletter.Filter{Namespace: "shop"})
	require.NoError(t, err)
	assert.Len(t, letters, 2, "one letter per partition's event")
}

// holdingJetStream is a JetStream whose next publish, once armed, is
// stored and then held before its writer is told (stored is closed, then
// the answer waits for release), and whose streams tell when a letter
// looked for was not found (notFound is closed): a fake of timing only,
// for the moment between JetStream storing a letter and its writer
// hearing of it, which no real part can be made to hold.
type holdingJetStream struct {
	jetstream.JetStream
	armed                     atomic.Bool
	stored, release, notFound chan struct{}
	once                      sync.Once
}

func (h *holdingJetStream) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	s, err := h.JetStream.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return telling{Stream: s, h: h}, nil
}

// telling is a stream of a holdingJetStream.
type telling struct {
	jetstream.Stream
	h *holdingJetStream
}

func (s telling) GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	m, err := s.Stream.GetMsg(ctx, seq, opts...)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		s.h.once.Do(func() { close(s.h.notFound) })
	}
	return m, err
}

// holdingEnv is writerEnv's stream, 64 KiB of it for each namespace
// (three letters of 16 KiB), and a Writer to it through a
// holdingJetStream.
func holdingEnv(t *testing.T, tweaks ...func(*stream.Config)) (*env, *holdingJetStream, *deadletter.Writer) {
	t.Helper()
	e, _ := writerEnv(t, 1<<20, 64<<10, tweaks...)
	held := &holdingJetStream{JetStream: e.js, stored: make(chan struct{}), release: make(chan struct{}), notFound: make(chan struct{})}
	return e, held, deadletter.NewWriter(held, e.streams)
}

// onItsWay writes the letter of event seq of namespace ns through w in
// the background, held on its way: stored, its writer not told until
// h.release is closed. The channel gives the write's error.
func (h *holdingJetStream) onItsWay(w *deadletter.Writer, ns string, seq uint64, data []byte) <-chan error {
	h.stored, h.release = make(chan struct{}), make(chan struct{})
	h.armed.Store(true)
	done := make(chan error, 1)
	go func() { _, err := write(w, ns, seq, data); done <- err }()
	<-h.stored
	return done
}

// writeAll writes the letters of events seqs of namespace ns through w.
func writeAll(t *testing.T, w *deadletter.Writer, ns string, data []byte, seqs ...uint64) {
	t.Helper()
	for _, seq := range seqs {
		_, err := write(w, ns, seq, data)
		require.NoError(t, err)
	}
}

func (h *holdingJetStream) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := h.JetStream.PublishMsg(ctx, m, opts...)
	if h.armed.CompareAndSwap(true, false) {
		close(h.stored)
		<-h.release
	}
	return ack, err
}

// A letter dropped as the oldest before its writer heard it was stored
// is not counted again: its namespace, emptied meanwhile (its letters
// replayed by another replica), keeps as many letters as its bound holds
// (three here), not one fewer for a letter that is gone.
func TestALetterDroppedOnItsWayIsNotCountedAgain(t *testing.T) {
	e, held, w := holdingEnv(t)
	js, sc := e.js, e.streams
	data := bytes.Repeat([]byte("x"), 16<<10)

	held.armed.Store(true)
	first := make(chan error, 1)
	go func() { _, err := write(w, "ns", 1, data); first <- err }()
	<-held.stored // letter 1 stored, its writer not told yet
	for seq := range uint64(3) {
		_, err := write(w, "ns", 2+seq, data)
		require.NoError(t, err)
	}
	require.Equal(t, []uint64{2, 3, 4}, e.sequences(t, "ns"), "letter 1, the oldest, dropped for letter 4 while on its way")

	s, err := js.Stream(context.Background(), sc.DeadLetterStream)
	require.NoError(t, err)
	require.NoError(t, s.Purge(context.Background(), jetstream.WithPurgeSubject(stream.DeadLetterSubject("ns"))))
	fifth := make(chan error, 1)
	go func() { _, err := write(w, "ns", 5, data); fifth <- err }()
	<-held.notFound // letter 5 found none of the namespace's letters left, letter 1 on its way
	close(held.release)
	require.NoError(t, <-first)
	require.NoError(t, <-fifth)
	for seq := range uint64(2) {
		_, err := write(w, "ns", 6+seq, data)
		require.NoError(t, err)
	}
	assert.Equal(t, []uint64{5, 6, 7}, e.sequences(t, "ns"), "three letters fit")

	// What was on its way is forgotten once it arrived: dropped later, a
	// letter is no letter on its way, and the namespace emptied again
	// keeps three, not more.
	_, err = write(w, "ns", 8, data)
	require.NoError(t, err)
	require.NoError(t, s.Purge(context.Background(), jetstream.WithPurgeSubject(stream.DeadLetterSubject("ns"))))
	for seq := range uint64(4) {
		_, err := write(w, "ns", 9+seq, data)
		require.NoError(t, err)
	}
	assert.Equal(t, []uint64{10, 11, 12}, e.sequences(t, "ns"), "the bound holds three")
}

// The letters another replica stored meanwhile are counted at the
// Writer's next count: a (one letter) and b (three, the last dropping
// a's) are two replicas' Writers of one namespace; a's next letter,
// counted again, drops b's oldest, so the namespace keeps its three.
// Trusting its count of one letter, a would store a fourth.
func TestAnotherReplicasLettersAreCountedAtTheNextCount(t *testing.T) {
	e, a := writerEnv(t, 1<<20, 64<<10)
	b := deadletter.NewWriter(e.js, e.streams)
	a.SetCountAgain(0)
	data := bytes.Repeat([]byte("x"), 16<<10)
	writeAll(t, a, "ns", data, 1)
	writeAll(t, b, "ns", data, 2, 3, 4)
	require.Equal(t, []uint64{2, 3, 4}, e.sequences(t, "ns"))
	n, err := write(a, "ns", 5, data)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "one letter dropped")
	assert.Equal(t, []uint64{3, 4, 5}, e.sequences(t, "ns"), "three letters fit")
}

// A letter stored whose writer has not heard of it yet is counted once by
// a count meanwhile, not as stored and on its way: the namespace keeps
// the three letters its bound holds (before, the letter counted twice
// was dropped for the third). And when its writer then hears it was a
// duplicate (the same event and Subscription given up again), its bytes
// stay counted, since the count found it stored: the next letter drops
// the oldest rather than make four.
func TestALetterOnItsWayIsCountedOnce(t *testing.T) {
	e, held, w := holdingEnv(t)
	w.SetCountAgain(0)
	data := bytes.Repeat([]byte("x"), 16<<10)
	first := held.onItsWay(w, "ns", 1, data) // a new letter
	writeAll(t, w, "ns", data, 2, 3)
	assert.Equal(t, []uint64{1, 2, 3}, e.sequences(t, "ns"), "three letters fit")
	close(held.release)
	require.NoError(t, <-first)
	letters, err := e.admin.List(context.Background(), deadletter.Filter{Namespace: "ns"})
	require.NoError(t, err)
	require.NoError(t, e.admin.Delete(context.Background(), letters[2].Sequence), "letter 3 replayed: room for one")

	again := held.onItsWay(w, "ns", 2, data) // letter 2 given up again: a duplicate
	_, err = write(w, "ns", 4, data)
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 2, 4}, e.sequences(t, "ns"), "three letters fit")
	w.SetCountAgain(time.Hour) // from here on the Writer trusts its count
	close(held.release)
	require.NoError(t, <-again)
	n, err := write(w, "ns", 5, data)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "one letter dropped")
	assert.Equal(t, []uint64{2, 4, 5}, e.sequences(t, "ns"), "the bound holds three")
}

// A count while a letter on its way was dropped already (the oldest, for a
// newer one) leaves it out: its bytes are in inFlight, and no longer in the
// stream. The next letter drops one letter, not three.
func TestALetterDroppedOnItsWayIsLeftOutOfACount(t *testing.T) {
	e, held, w := holdingEnv(t)
	w.SetCountAgain(0)
	data := bytes.Repeat([]byte("x"), 16<<10)
	first := held.onItsWay(w, "ns", 1, data)
	writeAll(t, w, "ns", data, 2, 3, 4)
	require.Equal(t, []uint64{2, 3, 4}, e.sequences(t, "ns"), "letter 1 dropped for letter 4 while on its way")
	n, err := write(w, "ns", 5, data)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "one letter dropped")
	assert.Equal(t, []uint64{3, 4, 5}, e.sequences(t, "ns"), "three letters fit")
	close(held.release)
	require.NoError(t, <-first)
}

// A letter written again (the same event and Subscription given up twice:
// a duplicate JetStream does not store) takes no room: the namespace's
// next letter drops nothing.
func TestALetterWrittenAgainTakesNoRoom(t *testing.T) {
	e, w := writerEnv(t, 1<<20, 64<<10)
	w.SetCountAgain(time.Hour) // the Writer trusts its count
	data := bytes.Repeat([]byte("x"), 16<<10)
	writeAll(t, w, "ns", data, 1, 2, 2)
	n, err := write(w, "ns", 3, data)
	require.NoError(t, err)
	assert.Zero(t, n, "no letter dropped")
	assert.Equal(t, []uint64{1, 2, 3}, e.sequences(t, "ns"))
}

// A letter given up again once the de-duplication window has passed is
// stored again: a count while the new copy is on its way counts the older
// copy as stored, and skips only the new one (on its way), so the
// namespace keeps to its bound: the next letter drops the oldest.
// Skipping both by their id, the namespace kept four letters.
func TestAnOlderCopyOfALetterOnItsWayIsCounted(t *testing.T) {
	e, held, w := holdingEnv(t, func(sc *stream.Config) { sc.Duplicates = 100 * time.Millisecond })
	w.SetCountAgain(0)
	data := bytes.Repeat([]byte("x"), 16<<10)

	writeAll(t, w, "ns", data, 1, 2)
	// JetStream forgets a message id on a timer of the window's length:
	// nothing to await but the time (ten windows).
	time.Sleep(10 * e.streams.Duplicates)
	again := held.onItsWay(w, "ns", 2, data) // stored anew, held
	writeAll(t, w, "ns", data, 3)
	close(held.release)
	require.NoError(t, <-again)
	assert.Equal(t, []uint64{2, 2, 3}, e.sequences(t, "ns"), "letter 1 dropped for letter 3: three letters")
}

// vanishingJetStream is a JetStream whose dead-letter stream, once armed,
// has a namespace's letters deleted right after it is asked who holds it:
// a fake of timing only, for another replica replaying or deleting them
// between the Writer's look and its drop, which no real part can be made
// to do at that moment.
type vanishingJetStream struct {
	jetstream.JetStream
	armed atomic.Bool
	ns    string
}

func (v *vanishingJetStream) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	s, err := v.JetStream.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return vanishing{Stream: s, v: v}, nil
}

// vanishing is a stream of a vanishingJetStream.
type vanishing struct {
	jetstream.Stream
	v *vanishingJetStream
}

func (s vanishing) Info(ctx context.Context, opts ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	info, err := s.Stream.Info(ctx, opts...)
	if err == nil && s.v.armed.CompareAndSwap(true, false) {
		err = s.Purge(ctx, jetstream.WithPurgeSubject(stream.DeadLetterSubject(s.v.ns)))
	}
	return info, err
}

// TestRoomMadeMeanwhileIsTaken: the stream is full, and the namespace
// holding the most is chosen to make room; its letters are all replayed
// (by another replica) before its oldest is dropped. The room they left
// is the new letter's: it is stored. Before, the Writer found nothing to
// drop and refused it (the dispatcher drops the event).
func TestRoomMadeMeanwhileIsTaken(t *testing.T) {
	e, _ := writerEnv(t, 100<<10, 64<<10)
	v := &vanishingJetStream{JetStream: e.js, ns: "big"}
	w := deadletter.NewWriter(v, e.streams)
	writeAll(t, w, "big", bytes.Repeat([]byte("b"), 20<<10), 1, 2, 3)
	writeAll(t, deadletter.NewWriter(e.js, e.streams), "other", bytes.Repeat([]byte("o"), 17<<10), 11, 12)
	v.armed.Store(true)
	d, err := writeDropping(w, "newcomer", 21, bytes.Repeat([]byte("n"), 20<<10))
	require.NoError(t, err, "the room the replayed letters left is taken")
	assert.Equal(t, deadletter.Dropped{}, d, "nothing dropped: they were gone")
	assert.False(t, v.armed.Load(), "the letters vanished between the look and the drop")
	assert.Equal(t, []uint64{21}, e.sequences(t, "newcomer"))
	assert.Equal(t, []uint64{11, 12}, e.sequences(t, "other"))
}

// countingJetStream counts the ordered consumers made on it: one per
// count of a namespace's letters.
type countingJetStream struct {
	jetstream.JetStream
	counts atomic.Int32
}

func (c *countingJetStream) OrderedConsumer(ctx context.Context, name string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	c.counts.Add(1)
	return c.JetStream.OrderedConsumer(ctx, name, cfg)
}

// TestAFullStreamCountsOnlyTheNamespaceChosen: every count is old (the
// Writer counts again at once), six namespaces are known, and a letter
// finds the stream full: the Writer counts its own namespace, the one it
// chose and the one in turn, not every namespace it weighed (each count
// reads the headers of all that namespace's letters: with many
// namespaces, a scan of the stream for every letter while it is full).
func TestAFullStreamCountsOnlyTheNamespaceChosen(t *testing.T) {
	e, _ := writerEnv(t, 100<<10, 64<<10)
	c := &countingJetStream{JetStream: e.js}
	w := deadletter.NewWriter(c, e.streams)
	for i, ns := range []string{"n1", "n2", "n3", "n4", "n5"} {
		writeAll(t, w, ns, bytes.Repeat([]byte("s"), 2<<10), uint64(i+1))
	}
	writeAll(t, w, "big", bytes.Repeat([]byte("b"), 20<<10), 11, 12, 13)
	writeAll(t, w, "newcomer", bytes.Repeat([]byte("n"), 20<<10), 21)
	w.SetCountAgain(0)
	before := c.counts.Load()
	d, err := writeDropping(w, "newcomer", 22, bytes.Repeat([]byte("n"), 20<<10))
	require.NoError(t, err)
	assert.Equal(t, deadletter.Dropped{Others: 1}, d, "the stream was full: big's oldest made room")
	assert.Equal(t, []uint64{12, 13}, e.sequences(t, "big"))
	assert.Equal(t, int32(3), c.counts.Load()-before, "newcomer's count, big's and n4's (in turn)")
}

// TestAnOldCountIsCheckedBeforeItsLettersGo: the Writer counted x's three
// large letters, then two of them were deleted (through the admin API, as
// another replica would): its count still says x holds the most, but the
// count is checked before x's letter goes, and y, which holds more than
// the newcomer, makes room instead; x keeps its last letter.
func TestAnOldCountIsCheckedBeforeItsLettersGo(t *testing.T) {
	e, w := writerEnv(t, 100<<10, 64<<10)
	writeAll(t, w, "x", bytes.Repeat([]byte("x"), 20<<10), 1, 2, 3)
	letters, err := e.admin.List(context.Background(), deadletter.Filter{Namespace: "x"})
	require.NoError(t, err)
	for _, l := range letters[:2] {
		require.NoError(t, e.admin.Delete(context.Background(), l.Sequence))
	}
	replica := deadletter.NewWriter(e.js, e.streams)
	writeAll(t, replica, "y", bytes.Repeat([]byte("y"), 17<<10), 11, 12)
	writeAll(t, replica, "z", bytes.Repeat([]byte("z"), 25<<10), 21)
	w.SetCountAgain(0) // x's count is old
	d, err := writeDropping(w, "newcomer", 31, bytes.Repeat([]byte("n"), 22<<10))
	require.NoError(t, err)
	assert.Equal(t, deadletter.Dropped{Others: 1}, d)
	assert.Equal(t, []uint64{3}, e.sequences(t, "x"), "x holds less than the newcomer now: its letter stays")
	assert.Equal(t, []uint64{12}, e.sequences(t, "y"), "y held the most")
}

// fillWithoutBig nearly fills a dead-letter stream of 104 KiB: namespaces n1..n6
// hold three small letters each, written by w, and zbig two large ones,
// written by another replica (w knows nothing of it). The Writer weighs
// the 4 namespaces with the most letters (n1..n4) and those it wrote for:
// zbig, holding the most bytes with the fewest letters, is in neither.
func fillWithoutBig(t *testing.T, e *env, w *deadletter.Writer) {
	t.Helper()
	small := bytes.Repeat([]byte("s"), 2<<10)
	for i, ns := range []string{"n1", "n2", "n3", "n4", "n5", "n6"} {
		base := uint64(10 * (i + 1))
		writeAll(t, w, ns, small, base+1, base+2, base+3)
	}
	writeAll(t, deadletter.NewWriter(e.js, e.streams), "zbig", bytes.Repeat([]byte("b"), 20<<10), 91, 92)
	require.Equal(t, []uint64{91, 92}, e.sequences(t, "zbig"), "the stream had room for zbig's letters")
}

// TestEveryHolderIsWeighedInTurn: zbig, which holds the most bytes in
// few letters written by another replica, is weighed in its turn (the
// namespaces outside the 4 with the most letters, one a letter, by name:
// n5, n6, then zbig), and its oldest makes room for the newcomer's third
// letter. Before, the newcomer gave up its own letters for as long as the
// stream stayed full, while zbig held more than it.
func TestEveryHolderIsWeighedInTurn(t *testing.T) {
	e, w := writerEnv(t, 104<<10, 64<<10)
	writeAll(t, w, "newcomer", bytes.Repeat([]byte("x"), 9<<10), 1)
	fillWithoutBig(t, e, w)
	var drops []deadletter.Dropped
	for seq := uint64(2); seq <= 4; seq++ {
		d, err := writeDropping(w, "newcomer", seq, bytes.Repeat([]byte("x"), 9<<10))
		require.NoError(t, err)
		drops = append(drops, d)
	}
	assert.Equal(t, []deadletter.Dropped{{Own: 1}, {Own: 1}, {Others: 1}}, drops,
		"the newcomer gave up its own while n5 and n6 were weighed in turn, then zbig's turn came")
	assert.Equal(t, []uint64{92}, e.sequences(t, "zbig"), "zbig held the most: its oldest made room")
	for _, ns := range []string{"n1", "n2", "n3", "n4", "n5", "n6"} {
		assert.Len(t, e.sequences(t, ns), 3, "%s keeps its letters", ns)
	}
}

// TestALetterIsNotRefusedWhileANamespaceHoldsMore: the newcomer holds no
// letter of its own to give up, and none of the namespaces weighed for
// its letter (the 4 with the most letters, n5 in turn, those the Writer
// wrote for) holds more than it does with it: every holder is weighed
// before the letter is refused, and zbig's oldest makes room. Before, the
// letter was refused (ErrNoRoom: the dispatcher drops its event).
func TestALetterIsNotRefusedWhileANamespaceHoldsMore(t *testing.T) {
	e, w := writerEnv(t, 104<<10, 64<<10)
	fillWithoutBig(t, e, w)
	d, err := writeDropping(w, "newcomer", 1, bytes.Repeat([]byte("x"), 16<<10))
	require.NoError(t, err, "the letter is stored")
	assert.Equal(t, deadletter.Dropped{Others: 1}, d)
	assert.Equal(t, []uint64{92}, e.sequences(t, "zbig"), "zbig held the most: its oldest made room")
	assert.Equal(t, []uint64{1}, e.sequences(t, "newcomer"))
}

// TestALetterNoNamespaceMakesRoomForIsRefused: the stream is full, the
// newcomer holds no letter, and no namespace holds more than its letter:
// it is refused at once (ErrNoRoom), and nobody's letters are dropped for
// it.
func TestALetterNoNamespaceMakesRoomForIsRefused(t *testing.T) {
	e, w := writerEnv(t, 40<<10, 32<<10)
	writeAll(t, w, "a", bytes.Repeat([]byte("a"), 6<<10), 1, 2)
	writeAll(t, deadletter.NewWriter(e.js, e.streams), "b", bytes.Repeat([]byte("b"), 6<<10), 11, 12)
	d, err := writeDropping(w, "newcomer", 21, bytes.Repeat([]byte("n"), 20<<10))
	require.ErrorIs(t, err, deadletter.ErrNoRoom)
	assert.Equal(t, deadletter.Dropped{}, d)
	assert.Equal(t, []uint64{1, 2}, e.sequences(t, "a"))
	assert.Equal(t, []uint64{11, 12}, e.sequences(t, "b"))
	assert.Empty(t, e.sequences(t, "newcomer"))
}
