package activity_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/test/scalertest"
)

// TestActivationIsHeldWhileAStandbyPodIsClaimed: with a claim hold, a
// Function's activation is published for the event bridge at once, and
// told to KEDA's watchers only once the bridge says its claim ended, or
// the hold's bound passed, whichever comes first; a Function that is
// active again without a new activation is not told twice. Without the
// activation hook (no bridge hears of it), the hold does not apply. Fails
// when the watchers hear of the activation before the claim ended (the
// hold not applied), or never after it (the hold not released).
func TestActivationIsHeldWhileAStandbyPodIsClaimed(t *testing.T) {
	n := scalertest.StartNATS(t)
	reader := activity.NewJetStreamReader(n.JS, n.Streams)
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	busy := map[types.NamespacedName]int{fn: 1}
	// quiet fails when the watcher was told something within a while
	// (what a held activation must not do).
	quiet := func(t *testing.T, ch <-chan struct{}, msg string) {
		t.Helper()
		select {
		case <-ch:
			t.Fatalf("%s: the watcher was told while the claim was under way", msg)
		case <-time.After(100 * time.Millisecond):
		}
	}
	newCore := func(t *testing.T, reg *prometheus.Registry, opts ...activity.Option) *activity.Scaler {
		opts = append(opts, activity.WithActivationHold(0), activity.WithMetrics(reg))
		core, err := activity.New(reader, nil, opts...)
		require.NoError(t, err)
		require.NoError(t, core.Refresh(context.Background()))
		return core
	}

	t.Run("until the claim ended", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		published := make(chan types.NamespacedName, 8)
		core := newCore(t, reg, activity.WithClaimHold(time.Minute), activity.WithActivations(func(f types.NamespacedName) { published <- f }))
		active, ch, cancel := core.Watch(fn)
		defer cancel()
		require.False(t, active)
		core.ReportInFlight("gateway", busy, time.Minute)
		select {
		case got := <-published:
			assert.Equal(t, fn, got, "the bridge hears of the activation at once")
		case <-time.After(10 * time.Second):
			t.Fatal("the activation was not published")
		}
		st, err := core.State(fn)
		require.NoError(t, err)
		assert.True(t, st.Active, "the Function is active (IsActive says so)")
		quiet(t, ch, "before ClaimEnded")
		again, _, cancelAgain := core.Watch(fn)
		cancelAgain()
		assert.False(t, again, "a stream opened while held is not told either")

		core.ClaimEnded(types.NamespacedName{Namespace: "shop", Name: "another"})
		quiet(t, ch, "after another Function's claim ended")
		core.ClaimEnded(fn)
		awaitActivation(t, ch, "after the claim ended")
		core.ClaimEnded(fn)
		quiet(t, ch, "a second ClaimEnded")
		assert.Equal(t, 1.0, heldBy(t, reg, "claim_ended"))
		assert.Equal(t, 0.0, heldBy(t, reg, "bound"))
	})

	t.Run("for at most its bound", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		core := newCore(t, reg, activity.WithClaimHold(50*time.Millisecond), activity.WithActivations(func(types.NamespacedName) {}))
		_, ch, cancel := core.Watch(fn)
		defer cancel()
		core.ReportInFlight("gateway", busy, time.Minute)
		awaitActivation(t, ch, "once the bound passed, without ClaimEnded")
		core.ClaimEnded(fn)
		quiet(t, ch, "ClaimEnded after the bound")
		assert.Equal(t, 1.0, heldBy(t, reg, "bound"))
		assert.Equal(t, 0.0, heldBy(t, reg, "claim_ended"))
	})

	t.Run("not without a bridge to claim", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		core := newCore(t, reg, activity.WithClaimHold(time.Minute))
		_, ch, cancel := core.Watch(fn)
		defer cancel()
		core.ReportInFlight("gateway", busy, time.Minute)
		awaitActivation(t, ch, "no activation hook: no hold")
	})
}

// heldBy reads kfn_scaler_activation_holds_total{ended_by=by} from reg.
func heldBy(t *testing.T, reg *prometheus.Registry, by string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "kfn_scaler_activation_holds_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "ended_by" && l.GetValue() == by {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no kfn_scaler_activation_holds_total{ended_by=%q}", by)
	return 0
}
