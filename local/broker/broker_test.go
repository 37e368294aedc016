package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/local/broker"
)

// TestStoreSurvivesRestart publishes into a file-backed stream, stops the
// broker, starts a new one on the same store and reads the message back:
// what `kfn dev` relies on to deliver pending events after a restart.
func TestStoreSurvivesRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := t.TempDir()

	b, err := broker.Start(broker.Config{StoreDir: store})
	require.NoError(t, err)
	nc, err := b.Connect()
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	_, err = js.Publish(ctx, "t.a", []byte("kept"))
	require.NoError(t, err)
	nc.Close()
	b.Stop()
	b.Stop() // safe twice

	b, err = broker.Start(broker.Config{StoreDir: store})
	require.NoError(t, err)
	defer b.Stop()
	nc, err = b.Connect()
	require.NoError(t, err)
	defer nc.Close()
	js, err = jetstream.New(nc)
	require.NoError(t, err)
	stream, err := js.Stream(ctx, "T")
	require.NoError(t, err)
	msg, err := stream.GetLastMsgForSubject(ctx, "t.a")
	require.NoError(t, err)
	require.Equal(t, "kept", string(msg.Data))
	require.Contains(t, b.URL(), "nats://127.0.0.1:")
}

func TestStartRefusesBadConfig(t *testing.T) {
	_, err := broker.Start(broker.Config{})
	require.ErrorIs(t, err, broker.ErrInvalidOption)
	_, err = broker.Start(broker.Config{StoreDir: t.TempDir(), Port: 70000})
	require.ErrorIs(t, err, broker.ErrInvalidOption)
}
