package pool

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// TestAPoolIsSizedToItsRecentWakes: a pool keeps one standby pod from the
// moment a Function joins it, as many as the most wakes it saw in one
// minute of the window (within its size), back to one when those leave
// the window, and none once its Functions were idle for Idle.
func TestAPoolIsSizedToItsRecentWakes(t *testing.T) {
	const window, idle, size = 10 * time.Minute, time.Hour, 5
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var d demand
	assert.Zero(t, d.want(t0, window, idle, size), "no Function joined")
	d.joined(t0)
	assert.Equal(t, 1, d.want(t0, window, idle, size), "one pod for the first wake")

	for range 3 { // three Functions of the pool woke in the same minute
		d.woke(t0.Add(2*time.Minute), window)
	}
	d.woke(t0.Add(4*time.Minute), window)
	assert.Equal(t, 3, d.want(t0.Add(5*time.Minute), window, idle, size), "the busiest minute of the window")
	assert.Equal(t, 2, d.want(t0.Add(5*time.Minute), window, idle, 2), "at most size")
	assert.Equal(t, 0, d.want(t0.Add(5*time.Minute), window, idle, 0), "a size of 0 keeps none")

	assert.Equal(t, 1, d.want(t0.Add(13*time.Minute), window, idle, size), "the busy minute left the window; the last wake did not")
	assert.Equal(t, 1, d.want(t0.Add(4*time.Minute+idle), window, idle, size), "idle for exactly Idle")
	assert.Zero(t, d.want(t0.Add(4*time.Minute+idle+time.Second), window, idle, size), "idle for longer than Idle")

	d.woke(t0.Add(3*time.Hour), window)
	assert.Equal(t, 1, d.want(t0.Add(3*time.Hour), window, idle, size), "a wake brings the pool back")
	assert.Len(t, d.perMinute, 1, "the minutes before the window are forgotten")
}

// TestTheClusterCapGivesEveryPoolOneFirst: past MaxStandby, the pools
// that woke last are served first, and every pool gets its first pod
// before any gets a second: a namespace that wakes many Functions cannot
// take the others' pods.
func TestTheClusterCapGivesEveryPoolOneFirst(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	busy, quiet, old := poolKey{"busy", "a"}, poolKey{"quiet", "a"}, poolKey{"old", "a"}
	want := map[poolKey]int{busy: 5, quiet: 1, old: 2}
	last := map[poolKey]time.Time{busy: t0.Add(time.Minute), quiet: t0, old: t0.Add(-time.Hour)}

	assert.Equal(t, want, allocate(want, last, 8), "within the cap")
	assert.Equal(t, want, allocate(want, last, 0), "no cap")
	assert.Equal(t, map[poolKey]int{busy: 3, quiet: 1, old: 2}, allocate(want, last, 6))
	assert.Equal(t, map[poolKey]int{busy: 2, quiet: 1, old: 1}, allocate(want, last, 4))
	assert.Equal(t, map[poolKey]int{busy: 1, quiet: 1}, allocate(want, last, 2), "the pool that woke longest ago goes without")
	assert.Equal(t, map[poolKey]int{busy: 1}, allocate(want, last, 1))
}

// TestTheClusterCapGivesEveryNamespaceOneFirst: past MaxStandby, a
// namespace whose Functions spread over eight shapes (a pool each) and
// woke last gets one pod in each round, as every other namespace does,
// not one for each of its pools: with a cap of 8 and eight other
// namespaces of one pool each, every namespace gets one (before, the
// eight pools of the one namespace took all eight). Within the
// namespace, its pools are served in turn, the freshest first.
func TestTheClusterCapGivesEveryNamespaceOneFirst(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	want, last := map[poolKey]int{}, map[poolKey]time.Time{}
	for i := range 8 {
		k := poolKey{"spread", fmt.Sprint("shape-", i)}
		want[k], last[k] = 1, t0.Add(time.Hour+time.Duration(i)*time.Minute)
	}
	var others []poolKey
	for i := range 8 {
		k := poolKey{fmt.Sprint("team-", i), "a"}
		want[k], last[k] = 1, t0.Add(time.Duration(i)*time.Minute)
		others = append(others, k)
	}
	got := allocate(want, last, 8)
	spread := 0
	for k, n := range got {
		if k.namespace == "spread" {
			spread += n
		}
	}
	assert.Equal(t, 1, spread, "the namespace of many shapes gets one pod: %v", got)
	assert.Equal(t, 1, got[poolKey{"spread", "shape-7"}], "its freshest pool")
	for _, k := range others[1:] {
		assert.Equal(t, 1, got[k], "%s gets its first pod", k.namespace)
	}
	assert.Zero(t, got[others[0]], "the namespace that woke longest ago goes without")

	got = allocate(want, last, 16+4)
	assert.Equal(t, want, got, "within the cap every pool gets what it wants")
	got = allocate(want, last, 12)
	for _, k := range others {
		assert.Equal(t, 1, got[k], "%s gets its pod", k.namespace)
	}
	for i := 4; i < 8; i++ {
		assert.Equal(t, 1, got[poolKey{"spread", fmt.Sprint("shape-", i)}], "the rest to the spread namespace's freshest pools, one each")
	}
}

// TestTargetsFollowTheNamespacesSize: a namespace's AnnotationSize is
// kept as it is, whatever the demand; otherwise the demand asks within
// Config.Size; the demand of a pool no Function needs is forgotten.
func TestTargetsFollowTheNamespacesSize(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	p, err := New(nil, nil, Config{Size: 2, MaxStandby: 100})
	require.NoError(t, err)
	p.now = func() time.Time { return t0 }
	fixed, demanded, idle, gone := poolKey{"fixed", "a"}, poolKey{"demanded", "a"}, poolKey{"idle", "a"}, poolKey{"gone", "a"}
	for _, k := range []poolKey{fixed, demanded, gone} {
		p.demandOf(k).joined(t0)
	}
	for range 4 {
		p.demandOf(demanded).woke(t0, p.cfg.Window)
	}
	p.demandOf(idle).joined(t0.Add(-2 * time.Hour))
	want := map[poolKey]plan.Plan{fixed: {}, demanded: {}, idle: {}}
	got := p.targets(want, func(ns string) (int, bool) {
		if ns == "fixed" {
			return 3, true
		}
		return 2, false
	})
	assert.Equal(t, map[poolKey]int{fixed: 3, demanded: 2, idle: 0}, got)
	assert.NotContains(t, p.demand, gone)
}

// TestThePoolReportsItsStandbyPods: the gauges say how many standby pods
// the pool keeps per runtime and how many its demand asked for beyond the
// cluster's cap.
func TestThePoolReportsItsStandbyPods(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	p, err := New(nil, nil, Config{Size: 5, MaxStandby: 3}, WithMetrics(reg))
	require.NoError(t, err)
	_, err = New(nil, nil, Config{}, WithMetrics(reg))
	require.NoError(t, err, "a second pool on the registry shares the gauges")
	p.now = func() time.Time { return t0 }
	node, py := poolKey{"a", "node"}, poolKey{"b", "py"}
	for range 4 {
		p.demandOf(node).woke(t0, p.cfg.Window)
	}
	p.demandOf(py).joined(t0)
	want := map[poolKey]plan.Plan{node: {Runtime: runtimes.Runtime{Name: "nodejs22"}}, py: {Runtime: runtimes.Runtime{Name: "python312"}}}
	got := p.targets(want, func(string) (int, bool) { return 5, false })
	assert.Equal(t, map[poolKey]int{node: 2, py: 1}, got)
	assert.Equal(t, 2.0, testutil.ToFloat64(p.standbyPods.WithLabelValues("nodejs22")))
	assert.Equal(t, 1.0, testutil.ToFloat64(p.standbyPods.WithLabelValues("python312")))
	assert.Equal(t, 2.0, testutil.ToFloat64(p.cappedPods), "4 and 1 asked for, 3 kept")
}

// TestMaxStandbyIsBounded: a cap out of 0..MaxMaxStandby is refused, 0
// takes the default.
func TestMaxStandbyIsBounded(t *testing.T) {
	for _, n := range []int{-1, MaxMaxStandby + 1} {
		_, err := New(nil, nil, Config{MaxStandby: n})
		require.ErrorIs(t, err, ErrInvalidConfig, "%d", n)
	}
	p, err := New(nil, nil, Config{}, WithAddress(func(*corev1.Pod) string { return "" }))
	require.NoError(t, err)
	assert.Equal(t, DefaultMaxStandby, p.cfg.MaxStandby)
	assert.Equal(t, DefaultWindow, p.cfg.Window)
	assert.Equal(t, DefaultIdle, p.cfg.Idle)
}

// TestTakePrefersAPodPreparedWithTheFunctionsDependencies: a Function
// with dependencies is given a pod prepared with them first, then one
// being prepared with them or prepared with nothing, never first one
// prepared with another set; a Function without dependencies is given an
// unprepared pod first.
func TestTakePrefersAPodPreparedWithTheFunctionsDependencies(t *testing.T) {
	p, err := New(nil, nil, Config{})
	require.NoError(t, err)
	pod := func(name string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}}
	}
	p.prepared[types.NamespacedName{Namespace: "shop", Name: "other"}] = preparation{hash: "b", done: true}
	p.prepared[types.NamespacedName{Namespace: "shop", Name: "mine"}] = preparation{hash: "a", done: true}
	p.prepared[types.NamespacedName{Namespace: "shop", Name: "pending"}] = preparation{hash: "a"}
	names := func(hash string) []string {
		pods := []corev1.Pod{pod("other"), pod("plain"), pod("pending"), pod("mine")}
		p.rank(pods, hash)
		var out []string
		for _, x := range pods {
			out = append(out, x.Name)
		}
		return out
	}
	assert.Equal(t, []string{"mine", "plain", "pending", "other"}, names("a"))
	assert.Equal(t, []string{"plain", "other", "pending", "mine"}, names(""))
	assert.Equal(t, []string{"plain", "other", "pending", "mine"}, names("c"))
}

// burstOnlyPool is a pool at t0 and the plan of a Function of namespace
// shop that does not scale to zero.
func burstOnlyPool(t *testing.T, t0 time.Time) (*Pool, plan.Plan) {
	t.Helper()
	p, err := New(nil, nil, Config{Size: 2, MaxStandby: 100})
	require.NoError(t, err)
	p.now = func() time.Time { return t0 }
	return p, plan.Plan{Namespace: "shop", Name: "steady", Scaling: plan.Scaling{Autoscaled: true, MinReplicas: 1, MaxReplicas: 3}}
}

// TestABurstOnlyFunctionGetsStandbyPodsOnceItScaledUp: a Function that
// does not scale to zero joins the pool for its bursts without making its
// pool keep a standby pod (it never wakes from zero); once it scaled up,
// its gives count as wakes and the pool keeps pods for it. A Function
// that scales to zero has its pool keep one from the moment it joins.
// Fails when a burst-only Function's joining counts as demand.
func TestABurstOnlyFunctionGetsStandbyPodsOnceItScaledUp(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	p, steady := burstOnlyPool(t, t0)
	require.NoError(t, p.Observe(steady))
	k := poolKey{"shop", p.functions[types.NamespacedName{Namespace: "shop", Name: "steady"}].shape}
	notFixed := func(string) (int, bool) { return 2, false }
	assert.Empty(t, p.pools(), "no pool for a Function that never scaled up")
	assert.Equal(t, 0, p.targets(map[poolKey]plan.Plan{k: steady}, notFixed)[k], "no standby pod for a Function that never woke")
	p.mu.Lock()
	p.wokeNow(types.NamespacedName{Namespace: "shop", Name: "steady"}, p.functions[types.NamespacedName{Namespace: "shop", Name: "steady"}])
	p.mu.Unlock()
	assert.Contains(t, p.pools(), k, "its pool once it scaled up")
	assert.Equal(t, 1, p.targets(map[poolKey]plan.Plan{k: steady}, notFixed)[k], "one once it scaled up")
	p.now = func() time.Time { return t0.Add(2 * time.Hour) }
	assert.Empty(t, p.pools(), "none once it has not scaled up for Idle")
	p.now = func() time.Time { return t0 }

	zero := plan.Plan{Namespace: "other", Name: "cold", Scaling: plan.Scaling{Autoscaled: true, MinReplicas: 0, MaxReplicas: 3}}
	require.NoError(t, p.Observe(zero))
	kz := poolKey{"other", p.functions[types.NamespacedName{Namespace: "other", Name: "cold"}].shape}
	assert.Equal(t, 1, p.targets(map[poolKey]plan.Plan{kz: zero}, notFixed)[kz], "one from the moment a Function that scales to zero joins")
}

// TestABurstOnlyFunctionDoesNotKeepAnotherFunctionsPool: the wakes of a
// Function that scales to zero keep its pool, whose shape a Function
// that does not scale to zero shares, only while that Function is pooled:
// once it goes, the other one's pool goes too, until it scales up itself.
// Fails when the pool's wakes, not the Function's own, keep it.
func TestABurstOnlyFunctionDoesNotKeepAnotherFunctionsPool(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	p, steady := burstOnlyPool(t, t0)
	cold := plan.Plan{Namespace: "shop", Name: "cold", Scaling: plan.Scaling{Autoscaled: true, MinReplicas: 0, MaxReplicas: 3}}
	require.NoError(t, p.Observe(steady))
	require.NoError(t, p.Observe(cold))
	coldKey := types.NamespacedName{Namespace: "shop", Name: "cold"}
	p.mu.Lock()
	p.wokeNow(coldKey, p.functions[coldKey])
	p.mu.Unlock()
	require.Len(t, p.pools(), 1, "one shape, kept by the Function that scales to zero")
	p.Forget(coldKey)
	assert.Empty(t, p.pools(), "the other Function's wakes do not keep the pool of one that never scaled up")
}
