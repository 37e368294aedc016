package jsstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// TestSpreadLeadersPutsEachPartitionOnItsServer: on a 3-server cluster,
// three R3 partitions end up led by three servers, whichever NATS elected
// first, and a spread installation is left as it is.
func TestSpreadLeadersPutsEachPartitionOnItsServer(t *testing.T) {
	js := natstest.StartCluster(t, 3).JetStream(t)
	ctx := context.Background()
	cfg := stream.DefaultConfig()
	cfg.Partitions, cfg.Replicas = 3, 3
	require.Eventually(t, func() bool { return jsstream.Ensure(ctx, js, cfg) == nil }, 30*time.Second, 50*time.Millisecond, "R3 partitions made")
	leaders := func() map[string]string {
		got := map[string]string{}
		for _, name := range cfg.PartitionStreams() {
			s, err := js.Stream(ctx, name)
			require.NoError(t, err)
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
	require.Eventually(t, func() bool {
		if _, err := jsstream.SpreadLeaders(ctx, js, cfg); err != nil {
			t.Logf("spread: %v", err)
		}
		l := leaders()
		return len(l) == 3 && distinct(l) == 3
	}, 30*time.Second, 200*time.Millisecond, "each partition led by a server of its own")
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
