package endpoints

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestProbesAskEveryIntervalFirstThenLessAndLess: a probe asks every
// interval for its first 100 intervals (a woken pod is taken as ready
// within an interval of its handler's loading, the wake's latency), then
// waits twice its last wait each time, up to 100 intervals.
func TestProbesAskEveryIntervalFirstThenLessAndLess(t *testing.T) {
	const every = 10 * time.Millisecond
	for _, c := range []struct {
		last, since, want time.Duration
	}{
		{every, 0, every},
		{every, 99 * every, every},
		{every, 100 * every, 2 * every},
		{2 * every, 102 * every, 4 * every},
		{64 * every, 200 * every, 100 * every},
		{100 * every, time.Minute, 100 * every},
	} {
		assert.Equal(t, c.want, nextProbeWait(every, c.last, c.since), "last %s, %s since the start", c.last, c.since)
	}
	var waited time.Duration
	asks := 0
	for wait := every; waited < time.Second; wait = nextProbeWait(every, wait, waited) {
		waited += wait
		asks++
	}
	assert.Equal(t, 100, asks, "a hundred questions in the first second at the default interval")
}
