package gateway

import "time"

// SetMetricsSweep has g forget the series of functions gone at most once
// per d (metricsSweep otherwise), so that a test need not wait a minute.
func (g *Gateway) SetMetricsSweep(d time.Duration) {
	g.metrics.mu.Lock()
	defer g.metrics.mu.Unlock()
	g.metrics.every = d
}
