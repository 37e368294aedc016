package eventbridge_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge"
)

// With -subscriptions the consumers are made before the publisher serves:
// the event stream keeps only events some consumer is interested in, so an
// event accepted before its Subscription's consumer existed would be
// dropped although the publisher answered 204. The first event posted once
// the publisher is ready waits in the consumer (no dispatcher runs here to
// take it).
func TestStaticSubscriptionsHoldTheFirstAcceptedEvent(t *testing.T) {
	cfg := startPublisher(t, nil)
	req, err := http.NewRequest(http.MethodPost, "http://"+cfg.Listen+"/publish", bytes.NewReader([]byte(`{"n":1}`)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "first", "Ce-Source": "shop", "Ce-Type": "order.created.v1"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	js := connect(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, cfg.Streams.EventStream, stream.ConsumerName("default", "orders"))
	require.NoError(t, err, "the Subscription's consumer exists once the publisher is ready")
	// The server counts a stored event as pending from its own loop: wait
	// for it rather than read it once.
	require.Eventually(t, func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumPending == 1
	}, 10*time.Second, 10*time.Millisecond, "the accepted event waits in the consumer")
}

// TestConsumersLoseASettledReplaySubject checks the wiring of the replay
// sweep: a consumer that filters on its replay subject with no replay
// waiting (made by a release that always did, or left by a settled
// replay) gets its one subject back.
func TestConsumersLoseASettledReplaySubject(t *testing.T) {
	cfg := startPublisher(t, func(c *eventbridge.Process) { c.ReplaySweep = 50 * time.Millisecond })
	js := connect(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := stream.ConsumerName("default", "orders")
	cons, err := js.Consumer(ctx, cfg.Streams.EventStream, name)
	require.NoError(t, err)
	legacy := cons.CachedInfo().Config
	legacy.FilterSubjects = append(legacy.FilterSubjects, stream.ReplaySubject(name))
	_, err = js.UpdateConsumer(ctx, cfg.Streams.EventStream, legacy)
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		info, err := cons.Info(ctx)
		return err == nil && len(info.Config.FilterSubjects) == 1 && info.Config.FilterSubjects[0] == "kyma.shop.order.created.v1"
	}, 10*time.Second, 10*time.Millisecond, "the sweep takes the replay subject out")
}

// connect returns JetStream on the event bridge's NATS server, closed when
// the test ends.
func connect(t *testing.T, cfg eventbridge.Process) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(cfg.NATSURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}
