package gateway

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// InFlightReporter receives the gateway's requests in flight per function
// (held ones included), valid for ttl; *activity.Scaler (package scaler/activity) implements it, and a
// function that gets requests while at zero is activated at once.
type InFlightReporter interface {
	ReportInFlight(src string, counts map[types.NamespacedName]int, ttl time.Duration)
}

// begin counts a request in flight and, for a function that had none,
// reports at once so that a function at zero is activated now.
func (g *Gateway) begin(fn types.NamespacedName, m function) {
	g.mu.Lock()
	g.inFlight[fn]++
	first := g.inFlight[fn] == 1
	counts := g.snapshotLocked()
	g.mu.Unlock()
	m.inFlight.Inc()
	if first && g.reporter != nil {
		g.reporter.ReportInFlight(g.cfg.Source, counts, 5*g.cfg.ReportInterval)
		select {
		case g.kick <- struct{}{}:
		default:
		}
	}
}

func (g *Gateway) end(fn types.NamespacedName, m function) {
	g.mu.Lock()
	if g.inFlight[fn]--; g.inFlight[fn] <= 0 {
		delete(g.inFlight, fn)
	}
	g.mu.Unlock()
	m.inFlight.Dec()
}

// busy says whether fn has requests in flight.
func (g *Gateway) busy(fn types.NamespacedName) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight[fn] > 0
}

func (g *Gateway) snapshotLocked() map[types.NamespacedName]int {
	out := make(map[types.NamespacedName]int, len(g.inFlight))
	for k, v := range g.inFlight {
		out[k] = v
	}
	return out
}

// InFlight returns the requests in flight per function, held ones included.
func (g *Gateway) InFlight() map[types.NamespacedName]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.snapshotLocked()
}

// Run reports in-flight counts every ReportInterval while there are any
// (and once more when they drop to none) until ctx ends, and returns nil.
// It drains by stopping the reports: the requests still in flight are
// served to their end by the HTTP server that holds them, and the last
// counts reported lapse at the scaler after their TTL (5 intervals).
func (g *Gateway) Run(ctx context.Context) error {
	if g.reporter == nil {
		<-ctx.Done()
		return nil
	}
	ticker := time.NewTicker(g.cfg.ReportInterval)
	defer ticker.Stop()
	reported := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-g.kick:
		}
		counts := g.InFlight()
		if len(counts) == 0 && !reported {
			continue
		}
		g.reporter.ReportInFlight(g.cfg.Source, counts, 5*g.cfg.ReportInterval)
		reported = len(counts) > 0
	}
}
