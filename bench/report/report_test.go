package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/bench/result"
)

func TestNewSpread(t *testing.T) {
	tests := map[string]struct {
		in   []float64
		want spread
	}{
		"none": {nil, spread{}},
		"one":  {[]float64{4}, spread{median: 4, min: 4, max: 4, n: 1}},
		"odd":  {[]float64{9, 1, 5}, spread{median: 5, min: 1, max: 9, n: 3}},
		"even": {[]float64{4, 1, 2, 8}, spread{median: 3, min: 1, max: 8, n: 4}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, newSpread(tc.in))
		})
	}
}

func fig(name string, v, anchor, x float64) result.Figure {
	f := result.Figure{Name: name, Unit: "events/s", Value: v, X: x}
	if anchor != 0 {
		f.Anchor = &result.Anchor{Name: "bare", Value: anchor}
	}
	if x != 0 {
		f.XLabel = "Subscriptions"
	}
	return f
}

func TestSummariseTakesRatiosPerRepetition(t *testing.T) {
	aggs := summarise([]result.Figure{
		fig("eventbridge/throughput", 6000, 10000, 0),
		fig("eventbridge/subscriptions/throughput", 50, 0, 10),
		fig("eventbridge/subscriptions/throughput", 90, 0, 1),
		fig("eventbridge/throughput", 8000, 10000, 0),
		fig("eventbridge/throughput", 3000, 2000, 0),
	})
	require.Len(t, aggs, 3)
	tp := aggs[0]
	assert.Equal(t, "eventbridge/throughput", tp.name)
	assert.Equal(t, spread{median: 6000, min: 3000, max: 8000, n: 3}, tp.value)
	assert.Equal(t, spread{median: 10000, min: 2000, max: 10000, n: 3}, tp.anchor)
	assert.Equal(t, spread{median: 0.8, min: 0.6, max: 1.5, n: 3}, tp.ratio, "ratio of medians would be 0.6")
	assert.Equal(t, []float64{1, 10}, []float64{aggs[1].x, aggs[2].x}, "curve points ordered by x")
}

func TestRender(t *testing.T) {
	aggs := summarise([]result.Figure{
		fig("eventbridge/throughput", 12000, 15000, 0),
		fig("eventbridge/throughput", 11000, 14000, 0),
		fig("eventbridge/subscriptions/throughput", 9000, 0, 1),
		fig("extra/figure", 1.5, 0, 0),
	})
	r := report{
		machine: machine{cpus: 2, cpuModel: "Test CPU", goVersion: "go1.26", node: "v20", python: "3.11", natsServer: "v2.15.2",
			started: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), reps: 2},
		statuses: []status{
			{b: benchmark{name: "eventbridge", dir: "bench/eventbridge", full: []string{"-jsonl"}}, runs: 2},
			{b: benchmark{name: "scaler", dir: "bench/scaler"}, skipped: "not available: bench/scaler does not exist in this checkout"},
		},
		figures: aggs,
		plots:   []plotFile{{name: "eventbridge/subscriptions/throughput", path: "bench/results/x.png"}},
		peers:   "Kyma runtime: measured by hand.",
	}
	var b strings.Builder
	require.NoError(t, render(&b, r))
	out := b.String()
	for _, want := range []string{
		"| CPUs | 2 × Test CPU |",
		"| Event bridge throughput, 1 KiB events, vs bare pipeline | 11,500 events/s (11,000–12,000) | bare: 14,500 events/s (14,000–15,000) | 0.79 (0.79–0.80) | >= 10,000 events/s and >= 60% of bare | met |",
		"| Activation latency p99 (first event -> StreamIsActive), vs KEDA polling | not available: bench/scaler does not exist in this checkout |",
		"| Python function cold start, one dependency | not measurable here: PyPI",
		"| extra/figure | 1.50 events/s | — | — | — |",
		"![eventbridge/subscriptions/throughput](bench/results/x.png)",
		"| 1 | 9,000 | 1 |",
		"| eventbridge | `go run ./bench/eventbridge -jsonl` | 2 | ok |",
		"## Peers measured by hand\n\nKyma runtime: measured by hand.\n",
	} {
		assert.Contains(t, out, want)
	}
}

func TestVerdict(t *testing.T) {
	tg, ok := targetOf("eventbridge/throughput")
	require.True(t, ok)
	low := summarise([]result.Figure{fig("eventbridge/throughput", 9000, 10000, 0)})[0]
	high := summarise([]result.Figure{fig("eventbridge/throughput", 12000, 30000, 0)})[0]
	both := summarise([]result.Figure{fig("eventbridge/throughput", 12000, 15000, 0)})[0]
	assert.Equal(t, "MISSED", verdict(tg, low), "below 10,000 events/s")
	assert.Equal(t, "MISSED", verdict(tg, high), "below 60% of bare")
	assert.Equal(t, "met", verdict(tg, both))
	assert.Equal(t, "", verdict(target{}, both), "no target")
}

func TestSuiteEntriesAreComplete(t *testing.T) {
	names := map[string]bool{}
	for _, b := range suite {
		assert.False(t, names[b.name], "duplicate %s", b.name)
		names[b.name] = true
		assert.True(t, strings.HasPrefix(b.dir, "bench/"), b.name)
	}
}
