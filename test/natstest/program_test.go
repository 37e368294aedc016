package natstest

import (
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestLaunchClusterStoresR3AndStops: a program's cluster takes a stream
// of three replicas, and stop shuts every server down.
func TestLaunchClusterStoresR3AndStops(t *testing.T) {
	c, stop, err := LaunchCluster(3, t.TempDir())
	require.NoError(t, err)
	nc, err := nats.Connect(c.URL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	s, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "r3", Subjects: []string{"r3.>"}, Replicas: 3})
	require.NoError(t, err)
	require.Len(t, s.CachedInfo().Cluster.Replicas, 2, "two followers beside the leader")
	_, err = js.Publish(t.Context(), "r3.x", []byte("x"))
	require.NoError(t, err)
	stop()
	for _, srv := range c.Servers {
		require.False(t, srv.srv.Running(), "server %s stopped", srv.srv.Name())
	}
}

// TestLaunchClusterFailsWithAnError: a server that cannot start is an
// error of LaunchCluster, not a panic of the program.
func TestLaunchClusterFailsWithAnError(t *testing.T) {
	_, _, err := LaunchCluster(3, filepath.Join(t.TempDir(), "missing"))
	require.ErrorContains(t, err, "store directory")
}
