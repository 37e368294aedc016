package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each kind of wake gets a median and a p99 row under its own name, beside
// its anchor, with issue 48's targets: < 1 s p50 on a new pod, < 20 ms
// p50 and < 60 ms p99 by the warm pool; the same wake of the Function
// with a dependency follows it, anchored on it, with the same targets but
// the pool's median, < 30 ms.
func TestNodeRows(t *testing.T) {
	ds := func(ms ...int) []time.Duration {
		var out []time.Duration
		for _, m := range ms {
			out = append(out, time.Duration(m)*time.Millisecond)
		}
		return out
	}
	node := nodeFigures{
		nodeEvent: ds(900, 950, 1200), nodeReady: ds(1900, 2000, 2100), nodeHTTP: ds(800, 850, 1500),
		poolEvent: ds(60, 70, 300), poolHTTP: ds(50, 60, 70),
		pyEvent: ds(1000, 1100, 1200), pyHTTP: ds(1000, 1000, 1000), pyPoolEvent: ds(80, 90, 100), pyPoolHTTP: ds(70, 75, 80),
		dep:   wakes{event: ds(1500, 1600, 1700), http: ds(1400, 1500, 1600), poolEvent: ds(90, 95, 400), poolHTTP: ds(85, 90, 95)},
		depPy: wakes{event: ds(2000, 2100, 2200), http: ds(1900, 2000, 2100), poolEvent: ds(100, 110, 120), poolHTTP: ds(105, 110, 115)},
	}
	node.standby = map[string]standbyCost{"python312": {pods: 1, memoryMiB: 23, cpuMillicores: 0.5}, "nodejs22": {pods: 2, memoryMiB: 54, cpuMillicores: 1}}
	rows := nodeRows(node, devFigures{event: 60 * time.Millisecond, http: 65 * time.Millisecond}, 50)
	byName := map[string]int{}
	for i, f := range rows {
		_, dup := byName[f.Group+": "+f.Name]
		assert.False(t, dup, "one row per name in a group: %s", f.Name)
		byName[f.Group+": "+f.Name] = i
	}
	get := func(name string) (float64, float64, float64) {
		i, ok := byName["real node: "+name]
		if !assert.True(t, ok, "row %q", name) {
			return 0, 0, 0
		}
		return rows[i].Value, rows[i].AnchorValue, rows[i].Target.Max
	}
	v, a, max := get("cold start from zero by event, published -> delivered (median)")
	assert.Equal(t, []float64{0.95, 0.06, 1}, []float64{v, a, max})
	v, _, max = get("cold start from zero by event, published -> delivered (p99 of 3)")
	assert.Equal(t, []float64{1.2, 0}, []float64{v, max})
	v, a, max = get("warm pool wake by event, published -> delivered (median)")
	assert.Equal(t, []float64{0.07, 0.95, 0.02}, []float64{v, a, max}, "anchored on the Deployment path's median")
	v, _, max = get("warm pool wake by event, published -> delivered (p99 of 3)")
	assert.Equal(t, []float64{0.3, 0.06}, []float64{v, max})
	v, a, _ = get("Python: warm pool wake by HTTP through the gateway (median)")
	assert.Equal(t, []float64{0.075, 1}, []float64{v, a}, "anchored on Python's new pod")
	v, a, max = get("with a dependency: cold start from zero by event, published -> delivered (median)")
	assert.Equal(t, []float64{1.6, 0.95, 1}, []float64{v, a, max}, "anchored on the same wake without")
	v, _, max = get("with a dependency: warm pool wake by event, published -> delivered (p99 of 3)")
	assert.Equal(t, []float64{0.4, 0.06}, []float64{v, max})
	v, a, max = get("Python with a dependency: warm pool wake by HTTP through the gateway (median)")
	assert.Equal(t, []float64{0.11, 0.075, 0.03}, []float64{v, a, max}, "anchored on Python's pool wake without")
	names := make([]string, len(rows))
	for i, f := range rows {
		names[i] = f.Name
	}
	i := slices.Index(names, "cold start from zero by HTTP through the gateway (p99 of 3)")
	assert.Equal(t, "with a dependency: cold start from zero by HTTP through the gateway (median)", names[i+1], "beside the wake without")
	i = byName["real node warm pool cost: idle standby pod of nodejs22: memory working set (median of 2)"]
	assert.Equal(t, 54.0, rows[i].Value, "the pool's cost, by runtime")
	assert.Less(t, i, byName["real node warm pool cost: idle standby pod of python312: CPU (median of 1)"], "in runtime order")
	v, _, _ = get("cold start from zero by event, published -> pod ready (median)")
	assert.Equal(t, 2.0, v)
	for _, name := range []string{"cold start from zero by HTTP through the gateway (median)", "warm pool wake by HTTP through the gateway (p99 of 3)",
		"Python: cold start from zero by event, published -> delivered (median)", "Python: cold start from zero by HTTP through the gateway (p99 of 3)",
		"Python: warm pool wake by event, published -> delivered (p99 of 3)",
		"with a dependency: cold start from zero by HTTP through the gateway (p99 of 3)", "with a dependency: warm pool wake by HTTP through the gateway (median)",
		"Python with a dependency: cold start from zero by event, published -> delivered (median)",
		"Python with a dependency: cold start from zero by HTTP through the gateway (p99 of 3)",
		"Python with a dependency: warm pool wake by event, published -> delivered (median)"} {
		get(name)
	}
}

// The bursts' rows are medians with the warm pool, each anchored on the
// same figure without it; the kfn part (the HPA's ask -> serving) is its
// own row; no burst, no rows.
func TestBurstRows(t *testing.T) {
	s := time.Second
	pool := []burstFigures{{scaled: 5 * s, serving: 5*s + 100*time.Millisecond, p99: 9 * s}, {scaled: 6 * s, serving: 6*s + 300*time.Millisecond, p99: 11 * s}, {scaled: 4 * s, serving: 4*s + 200*time.Millisecond, p99: 10 * s}}
	none := []burstFigures{{scaled: 5 * s, serving: 7 * s, p99: 12 * s}}
	rows := burstRows(pool, none)
	require.Len(t, rows, 5)
	byWhat := map[string][]float64{}
	for _, r := range rows {
		assert.Equal(t, "without the warm pool, same run", r.Anchor)
		_, what, _ := strings.Cut(r.Name, "): ")
		byWhat[what] = []float64{r.Value, r.AnchorValue}
	}
	assert.InDeltaSlice(t, []float64{0.2, 2}, byWhat["the HPA asks for more replicas -> as many serve, with the warm pool (median of 3)"], 1e-9)
	assert.InDeltaSlice(t, []float64{5.1, 7}, byWhat["first event -> the replicas the HPA asked for serve, with the warm pool (median of 3)"], 1e-9)
	assert.InDeltaSlice(t, []float64{10, 12}, byWhat["delivery p99, published -> handler called, with the warm pool (median of 3)"], 1e-9)
	assert.Empty(t, burstRows(nil, none))
	assert.Empty(t, burstRows(pool, nil))
}

// Each burst's namespace has an event type of its own (a valid one: dots
// and lower-case letters and digits), so that a Subscription of the last
// burst's namespace, still being deleted, never takes this one's events.
func TestBurstTypeIsTheNamespaces(t *testing.T) {
	assert.Equal(t, "bench.surgeburstpool0.v1", burstType("burst-pool-0"))
	assert.NotEqual(t, burstType("burst-none-0"), burstType("burst-pool-0"))
}
