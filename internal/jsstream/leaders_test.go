package jsstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// TestSpreadLeadersPutsEachPartitionOnItsServer: on a 3-server cluster,
// three R3 partitions all led by one server (as an operator's step-downs,
// or NATS's elections, may leave them) end up led by three servers, and a
// spread installation is left as it is.
func TestSpreadLeadersPutsEachPartitionOnItsServer(t *testing.T) {
	js := natstest.StartCluster(t, 3).JetStream(t)
	ctx := context.Background()
	cfg := stream.DefaultConfig()
	cfg.Partitions, cfg.Replicas = 3, 3
	require.Eventually(t, func() bool { return jsstream.Ensure(ctx, js, cfg) == nil }, 30*time.Second, 50*time.Millisecond, "R3 partitions made")
	// leaders are the partitions' leaders known now: a stream whose
	// election is under way answers nothing for a while, and is left out.
	leaders := func() map[string]string {
		got := map[string]string{}
		for _, name := range cfg.PartitionStreams() {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			s, err := js.Stream(rctx, name)
			cancel()
			if err != nil {
				continue
			}
			if ci := s.CachedInfo().Cluster; ci != nil && ci.Leader != "" {
				got[name] = ci.Leader
			}
		}
		return got
	}
	distinct := func(m map[string]string) int {
		seen := map[string]bool{}
		for _, l := range m {
			seen[l] = true
		}
		return len(seen)
	}
	// Every leader on one server first, whatever NATS elected (it may
	// spread them by chance).
	first := ""
	require.Eventually(t, func() bool {
		l := leaders()
		if len(l) < 3 {
			return false
		}
		if first == "" {
			first = l[cfg.EventStream]
		}
		for name, leader := range l {
			if leader != first {
				_ = jsstream.MoveLeader(ctx, js, name, first) // failed: the next look asks again
			}
		}
		l = leaders()
		return len(l) == 3 && distinct(l) == 1
	}, 60*time.Second, 200*time.Millisecond, "every partition led by %s", first)

	require.Eventually(t, func() bool {
		if _, err := jsstream.SpreadLeaders(ctx, js, cfg); err != nil {
			t.Logf("spread: %v", err)
		}
		l := leaders()
		return len(l) == 3 && distinct(l) == 3
	}, 60*time.Second, 200*time.Millisecond, "each partition led by a server of its own")
	t.Logf("leaders: %v", leaders())
	moved, err := jsstream.SpreadLeaders(ctx, js, cfg)
	require.NoError(t, err)
	assert.Zero(t, moved, "spread already")

	one := cfg
	one.Replicas = 1
	moved, err = jsstream.SpreadLeaders(ctx, js, one)
	require.NoError(t, err)
	assert.Zero(t, moved, "a stream of one replica is led where it is")
}

// TestAStepDownNobodyAnswersEnds: only a stream's leader answers a
// step-down, and one that lost its leadership before the request came
// answers nothing; MoveLeader, asked with a context of no deadline (the
// leader's lifetime, as the Opener asks), ends with the client's default
// timeout rather than holding the Opener for as long as it leads. The
// silent leader is a subscriber on an API prefix of the test's own: no
// real server can be made to lose its leadership at that moment.
func TestAStepDownNobodyAnswersEnds(t *testing.T) {
	nc := natstest.Start(t).Connect()
	sub, err := nc.SubscribeSync("silent.api.STREAM.LEADER.STEPDOWN.>")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	js, err := jetstream.NewWithAPIPrefix(nc, "silent.api", jetstream.WithDefaultTimeout(100*time.Millisecond))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- jsstream.MoveLeader(context.Background(), js, "events-1", "n2") }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(10 * time.Second):
		t.Fatal("MoveLeader still waits for an answer after 10s")
	}
	_, err = sub.NextMsg(time.Second)
	require.NoError(t, err, "the step-down was asked")
}
