package keyorder_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher/keyorder"
)

// opened returns an Order open from the start (nothing handed out).
func opened(t *testing.T, most int) *keyorder.Order[uint64] {
	t.Helper()
	o := keyorder.New[uint64](most)
	ok, start := o.Open(o.Snapshot(), 0)
	require.True(t, ok)
	require.Empty(t, start)
	return o
}

func add(t *testing.T, o *keyorder.Order[uint64], key string, seq uint64) []uint64 {
	t.Helper()
	start, dup := o.Add(key, seq, seq)
	require.False(t, dup, "sequence %d", seq)
	return start
}

func TestAKeysEventsStartOneAtATimeInOrder(t *testing.T) {
	o := opened(t, 10)
	assert.Equal(t, []uint64{1}, add(t, o, "a", 1))
	assert.Empty(t, add(t, o, "a", 2), "the second event of a key waits for the first")
	assert.Empty(t, add(t, o, "a", 3))
	assert.Equal(t, []uint64{2}, o.Done("a", 1))
	assert.Equal(t, []uint64{3}, o.Done("a", 2))
	assert.Empty(t, o.Done("a", 3))
	assert.Zero(t, o.Held())
}

func TestDifferentKeysStartInParallelUpToTheBound(t *testing.T) {
	o := opened(t, 2)
	assert.Equal(t, []uint64{1}, add(t, o, "a", 1))
	assert.Equal(t, []uint64{2}, add(t, o, "b", 2), "another key does not wait for the first")
	assert.Empty(t, add(t, o, "c", 3), "no room: a third key waits")
	assert.Empty(t, add(t, o, "a", 4))
	assert.Equal(t, []uint64{3}, o.Done("b", 2), "the key that waited for room first starts first")
	assert.Equal(t, []uint64{4}, o.Done("a", 1))
}

func TestAFailingEventHoldsBackOnlyItsKey(t *testing.T) {
	o := opened(t, 4)
	add(t, o, "a", 1) // started, and failing: not done while it waits for its next attempt
	for seq := uint64(2); seq <= 6; seq += 2 {
		assert.Empty(t, add(t, o, "a", seq), "behind the failing event of its key")
		assert.Equal(t, []uint64{seq + 1}, add(t, o, "b", seq+1), "another key goes on")
		assert.Empty(t, o.Done("b", seq+1))
	}
	assert.Equal(t, []uint64{2}, o.Done("a", 1), "given up or delivered at last: the next of its key")
}

func TestEventsWithoutAKeyWaitOnlyForRoom(t *testing.T) {
	o := opened(t, 2)
	assert.Equal(t, []uint64{1}, add(t, o, "", 1))
	assert.Equal(t, []uint64{2}, add(t, o, "", 2))
	assert.Empty(t, add(t, o, "", 3))
	assert.Equal(t, []uint64{3}, o.Done("", 1))
}

func TestAnEventThatCameAgainIsPutInItsPlace(t *testing.T) {
	o := keyorder.New[uint64](10) // closed: a new session
	add(t, o, "a", 5)
	add(t, o, "a", 3) // handed out before, to another client, and come again
	add(t, o, "a", 4)
	_, dup := o.Add("a", 4, 4)
	assert.True(t, dup, "a copy of an event held")
	ok, start := o.Open(o.Snapshot(), 3)
	require.True(t, ok)
	assert.Equal(t, []uint64{3}, start)
	assert.Equal(t, []uint64{4}, o.Done("a", 3))
	assert.Equal(t, []uint64{5}, o.Done("a", 4))
}

func TestNothingStartsBeforeTheConsumersEventsAreAllHeld(t *testing.T) {
	o := keyorder.New[uint64](10)
	assert.Empty(t, add(t, o, "a", 7), "closed")
	s := o.Snapshot()
	ok, _ := o.Open(s, 2)
	assert.False(t, ok, "the consumer handed out an event the Order does not hold")
	ok, start := o.Open(s, 1)
	assert.True(t, ok)
	assert.Equal(t, []uint64{7}, start)

	o.Close()
	assert.Empty(t, add(t, o, "b", 8), "closed again")
	s = o.Snapshot()
	add(t, o, "b", 9)
	ok, _ = o.Open(s, 2)
	assert.False(t, ok, "an event came after the snapshot")
	s = o.Snapshot()
	o.Close()
	ok, _ = o.Open(s, 0)
	assert.False(t, ok, "closed after the snapshot")
	s = o.Snapshot()
	ok, start = o.Open(s, 3)
	assert.True(t, ok)
	assert.Equal(t, []uint64{8}, start)
}

func TestDrainHandsBackTheQueuedBySequence(t *testing.T) {
	o := opened(t, 1)
	add(t, o, "a", 1)
	add(t, o, "b", 4)
	add(t, o, "a", 2)
	add(t, o, "c", 3)
	assert.Equal(t, []uint64{2, 3, 4}, o.Drain(), "the started one is its holder's")
	assert.Equal(t, 1, o.Held())
	assert.False(t, o.IsOpen())
	assert.Empty(t, o.Done("a", 1), "closed: nothing starts")
	assert.Zero(t, o.Held())
}

func TestAnOpenDecidedBeforeAnyChangeIsRefused(t *testing.T) {
	for name, change := range map[string]func(o *keyorder.Order[uint64]){
		"an event added and done": func(o *keyorder.Order[uint64]) { add(t, o, "a", 1); o.Done("a", 1) },
		"an event added, closed":  func(o *keyorder.Order[uint64]) { add(t, o, "a", 1); o.Close() },
		"an event added, drained": func(o *keyorder.Order[uint64]) { add(t, o, "a", 1); o.Drain() },
		"closed twice":            func(o *keyorder.Order[uint64]) { o.Close(); o.Close() },
		"closed and drained":      func(o *keyorder.Order[uint64]) { o.Close(); o.Drain() },
	} {
		t.Run(name, func(t *testing.T) {
			o := keyorder.New[uint64](4)
			s := o.Snapshot()
			change(o)
			ok, _ := o.Open(s, 0)
			assert.False(t, ok, "the Order changed after the snapshot")
			ok, _ = o.Open(o.Snapshot(), o.Held())
			assert.True(t, ok)
		})
	}
}
