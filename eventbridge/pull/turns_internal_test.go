package pull

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/test/natstest"
)

// TestAGroupsConsumersTakeTurns: 24 consumers of the group "many", each
// sent 40 events a second, with at most 2 of the group streaming at once
// and turns of 50 ms; one consumer of the group "one" beside them. No
// more than 2 of "many" ever stream, the consumers of "many" handed
// events in a 50 ms window are few (their events come in batches, in
// their turns), every event of every consumer is handed over (no
// consumer starves), and "one" is never made to wait: it streams from
// its start.
func TestAGroupsConsumersTakeTurns(t *testing.T) {
	const (
		many      = 24
		perSecond = 40
		seconds   = 2
		maxStream = 2
		turn      = 50 * time.Millisecond
	)
	srv := natstest.Start(t)
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "events", Subjects: []string{"ev.>"}, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	for i := range many + 1 {
		_, err = js.CreateConsumer(ctx, "events", jetstream.ConsumerConfig{Durable: fmt.Sprintf("c%d", i),
			FilterSubject: fmt.Sprintf("ev.%d", i), AckPolicy: jetstream.AckExplicitPolicy})
		require.NoError(t, err)
	}
	p, err := Start(nc, Config{Stream: "events", MaxStreamingPerGroup: maxStream, Turn: turn})
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(); <-p.Closed() })

	var (
		mu sync.Mutex
		// handed counts each consumer's events; windows are, per 50 ms
		// window, the consumers of "many" handed an event in it.
		handed      = map[string]int{}
		windows     = map[int64]map[string]bool{}
		mostHolders atomic.Int64
		oneWaited   atomic.Bool
	)
	start := time.Now()
	var acks sync.WaitGroup
	for i := range many + 1 {
		group, consumer := "many", fmt.Sprintf("c%d", i)
		if i == many {
			group = "one"
		}
		var pl *Pull
		pl = p.Add(group, consumer, 10, take(func(m *Msg) {
			// Take runs under the puller's lock: the turns can be read.
			mostHolders.Store(max(mostHolders.Load(), int64(len(p.turns.holders["many"]))))
			if group == "one" && pl.turn != streaming {
				oneWaited.Store(true)
			}
			mu.Lock()
			handed[consumer]++
			if group == "many" {
				w := int64(time.Since(start) / turn)
				if windows[w] == nil {
					windows[w] = map[string]bool{}
				}
				windows[w][consumer] = true
			}
			mu.Unlock()
			acks.Add(1)
			go func() {
				defer acks.Done()
				_ = m.Ack()
				m.Release()
			}()
		}))
		pl.Start()
	}

	// Every consumer is sent perSecond events a second, each at its own
	// moments.
	tick := time.NewTicker(time.Second / perSecond)
	for range perSecond * seconds {
		<-tick.C
		for i := range many + 1 {
			_, err := js.PublishAsync(fmt.Sprintf("ev.%d", i), []byte("x"))
			require.NoError(t, err)
		}
	}
	tick.Stop()
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("the events were not stored")
	}

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range many + 1 {
			if handed[fmt.Sprintf("c%d", i)] < perSecond*seconds {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "every consumer is handed all its events")
	acks.Wait()

	assert.LessOrEqual(t, mostHolders.Load(), int64(maxStream), "at most 2 of the group stream at once")
	assert.False(t, oneWaited.Load(), "the consumer of the other group streams from its start")
	mu.Lock()
	defer mu.Unlock()
	var sum, n int
	for _, w := range windows {
		sum += len(w)
		n++
	}
	mean := float64(sum) / float64(n)
	t.Logf("consumers of the group handed events per %v: %.1f on average over %d windows", turn, mean, n)
	// Without turns each of the 24 is handed events in every window; with
	// them about 2 streaming and the probes of the turns passed on.
	assert.Less(t, mean, float64(many)/2, "the group's consumers are handed events in turns, not all at once")
}
