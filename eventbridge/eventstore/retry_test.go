package eventstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/test/natstest"
)

// TestUnansweredAttemptIsMadeAgain: a publish that JetStream does not
// answer (the stream's leader died with the request) is sent again with
// the same message id after eventstore.AttemptTimeout, within the
// caller's deadline, rather than waiting for the deadline and failing.
//
// The stream's leader is played by a subscriber on a real NATS server
// that drops the first request and answers the second as JetStream does:
// a real leader cannot be killed at the moment a given request reaches
// it. What a real 3-server cluster does when its leader is killed under
// load is e2e/cluster's TestKilledStreamLeaderLosesNoEvent.
func TestUnansweredAttemptIsMadeAgain(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect()
	var (
		mu  sync.Mutex
		ids []string
	)
	sub, err := nc.Subscribe("kyma.shop.>", func(m *nats.Msg) {
		mu.Lock()
		ids = append(ids, m.Header.Get(nats.MsgIdHdr))
		n := len(ids)
		mu.Unlock()
		if n > 1 {
			_ = m.Respond([]byte(`{"stream":"events","seq":7}`))
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	js, err := jetstream.New(srv.Connect())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 5*eventstore.AttemptTimeout)
	defer cancel()
	res, err := eventstore.New(js, "events").Put(ctx, eventstore.Restore(&nats.Msg{Subject: "kyma.shop.order.created.v1", Header: attrs(nil)}, "m1"))
	require.NoError(t, err, "stored by the second attempt")
	assert.Equal(t, uint64(7), res.Sequence)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"m1", "m1"}, ids, "sent twice with the same message id")
}

// TestAttemptsEndAtTheCallersDeadline: when JetStream never answers, the
// attempts end with the caller's deadline, and the error says the
// storage is unavailable.
func TestAttemptsEndAtTheCallersDeadline(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect()
	sub, err := nc.Subscribe("kyma.shop.>", func(*nats.Msg) {})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	js, err := jetstream.New(srv.Connect())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), eventstore.AttemptTimeout+eventstore.AttemptTimeout/2)
	defer cancel()
	_, err = eventstore.New(js, "events").Put(ctx, eventstore.Restore(&nats.Msg{Subject: "kyma.shop.order.created.v1", Header: attrs(nil)}, "m1"))
	require.ErrorIs(t, err, eventstore.ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
