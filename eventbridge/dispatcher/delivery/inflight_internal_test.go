package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/internal/seats"
)

// TestADeliveryHeldByABoundSaysWhichBound: with 2 deliveries in flight in
// all and 1 per namespace, a namespace's second waits for its own bound
// and another's, beside two held, for the dispatcher's; each error says
// which, with the context's; without MaxInFlight nothing is bounded (the
// seats' own order is internal/seats's tests').
func TestADeliveryHeldByABoundSaysWhichBound(t *testing.T) {
	s := NewSender(Config{MaxInFlight: 2, MaxInFlightPerNamespace: 1})
	a, b, c := s.For("a", "x", v1alpha2.Sink{}, v1alpha2.Delivery{}, nil, nil), s.For("b", "x", v1alpha2.Sink{}, v1alpha2.Delivery{}, nil, nil), s.For("c", "x", v1alpha2.Sink{}, v1alpha2.Delivery{}, nil, nil)
	ctx := context.Background()
	require.NoError(t, a.enter(ctx))
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	err := a.enter(short())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "namespace a has 1 deliveries in flight, its bound")

	require.NoError(t, b.enter(ctx))
	err = c.enter(short())
	require.ErrorIs(t, err, seats.ErrAllFull)
	assert.ErrorContains(t, err, "the dispatcher has 2 deliveries in flight, its bound, and none was free for namespace c")

	s.inFlight.Leave("b")
	require.NoError(t, c.enter(short()))

	free := NewSender(Config{MaxInFlightPerNamespace: 1})
	d := free.For("d", "x", v1alpha2.Sink{}, v1alpha2.Delivery{}, nil, nil)
	for range 100 {
		require.NoError(t, d.enter(short()))
	}
}
