package endpoints

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kfn-dev/kfn/contract/host"
	"github.com/kfn-dev/kfn/internal/egress"
)

// DefaultProbeInterval is how often the Watcher asks a starting Function
// pod's host whether its handler is loaded.
const DefaultProbeInterval = 10 * time.Millisecond

// WithProbeInterval sets how often a starting pod of a Function is probed
// (default DefaultProbeInterval); 0 turns the probes off, and a Function's
// endpoint is then ready only when its EndpointSlice says so.
//
// A pod woken from zero listens some time before the kubelet's next
// readiness probe (one a second at the most) marks it ready and the
// EndpointSlice says so; the Watcher asks the pod itself in the meantime,
// at the host's ready path (host.ReadyPath, what the readiness probe
// asks), and takes its endpoint as ready from the first 200 answer, so
// that the dispatcher and the gateway reach it as soon as its handler is
// loaded. The same goes for the first replicas a scale-out adds (a
// standby pod the warm pool gave a Function scaling up serves it in
// milliseconds). Only endpoints of Functions' Services are probed: all
// the starting ones while their Service has no ready endpoint in its
// slices (a wake from zero), four of them at a time otherwise (a
// scale-out), at most 64 at a time per namespace; only while they are
// neither ready nor terminating in their slice, only if this Watcher
// never saw them ready (a pod whose readiness later fails is left to the
// kubelet), for at most host.MaxStartup, every interval for the first
// 100 intervals and slower then, up to one every 100 intervals, and not
// again once the host answered that its handler could not be loaded.
func WithProbeInterval(d time.Duration) Option {
	return func(w *Watcher) error {
		if d < 0 {
			return fmt.Errorf("%w: negative probe interval %s", ErrInvalidOption, d)
		}
		w.probeEvery = d
		return nil
	}
}

// maxProbeHeaderBytes bounds the headers of a probe's answer, which a
// tenant's pod gives: a host's ready answer has a few (FunctionHeader), and
// one with more is no answer, not up to Go's 10 MiB read per probe.
const maxProbeHeaderBytes = 16 << 10

// probeTransport is the transport of the probes: a connection per probe
// (a probe asks a pod that is not ready, and asks it no more once it is),
// no proxy from the environment, connections only to the addresses policy
// lets them reach, and answers with at most maxProbeHeaderBytes of
// headers.
func probeTransport(policy egress.Policy) *http.Transport {
	return &http.Transport{
		DialContext:            (&net.Dialer{Timeout: time.Second, Control: policy.Control}).DialContext,
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: maxProbeHeaderBytes,
	}
}

// WithEgress says which addresses the probes may ask (package egress),
// as deliveries: a starting pod's address is what its EndpointSlice says,
// which a tenant may write. Without it, the zero egress.Policy: no
// loopback, link-local, unspecified, multicast or broadcast address.
func WithEgress(p egress.Policy) Option {
	return func(w *Watcher) error {
		w.egress = p
		return nil
	}
}

// probe is the probe of one starting endpoint.
type probe struct{ cancel context.CancelFunc }

// startingAddresses returns host:port of the endpoints of a slice with
// exactly one port that are not ready and not terminating.
func startingAddresses(s *discoveryv1.EndpointSlice) []string {
	return singlePortAddresses(s, func(c discoveryv1.EndpointConditions) bool {
		return !isReady(c) && (c.Terminating == nil || !*c.Terminating)
	})
}

// setStarting records the ready and the starting endpoints of one slice of
// k, starts a probe for each starting endpoint never seen ready and stops
// those of endpoints no longer starting. w.mu is held.
func (w *Watcher) setStarting(k service, slice string, ready, starting []string) {
	w.recordSlice(k, slice, ready, starting)
	want := w.toProbe(k)
	w.stopUnwanted(k, want)
	w.startProbes(k, want)
	w.forgetGone(k)
	for _, m := range []map[service]map[string]bool{w.wasReady, w.early} {
		if len(m[k]) == 0 {
			delete(m, k)
		}
	}
	if len(w.probing[k]) == 0 {
		delete(w.probing, k)
	}
	if len(w.slicePorts[k]) == 0 {
		delete(w.slicePorts, k)
	}
}

// recordSlice records which endpoints of one slice of k are ready (seen
// ready once, never probed again) and which are starting. w.mu is held.
func (w *Watcher) recordSlice(k service, slice string, ready, starting []string) {
	if w.wasReady[k] == nil {
		w.wasReady[k] = map[string]bool{}
	}
	for _, a := range ready {
		w.wasReady[k][a] = true
	}
	if w.slicePorts[k] == nil {
		w.slicePorts[k] = map[string][]string{}
	}
	if len(starting) == 0 {
		delete(w.slicePorts[k], slice)
	} else {
		w.slicePorts[k][slice] = starting
	}
}

// Bounds of the probes.
const (
	// scaleOutProbes is how many starting endpoints of a Service that has
	// a ready one (a scale-out) are probed at once: the first replicas
	// it adds (standby pods the warm pool gave it serve in milliseconds)
	// take traffic as soon as they answer, not a kubelet readiness period
	// later, and a hundred starting pods are not asked a hundred times a
	// second each.
	scaleOutProbes = 4
	// namespaceProbes is how many endpoints of one namespace's Services
	// are probed at once: past it, a starting pod is ready when its
	// slice says so, and the probes left are the other namespaces'.
	namespaceProbes = 64
)

// toProbe returns the starting endpoints of k to probe, never seen
// ready: all of them while the slices of k have no ready endpoint (a
// wake from zero), scaleOutProbes of them otherwise (those probed
// already first, then by address). w.mu is held.
func (w *Watcher) toProbe(k service) map[string]bool {
	readyInSlices := 0
	for _, n := range w.slices[k] {
		readyInSlices += n
	}
	var never []string
	for _, as := range w.slicePorts[k] {
		for _, a := range as {
			if !w.wasReady[k][a] {
				never = append(never, a)
			}
		}
	}
	if readyInSlices > 0 && len(never) > scaleOutProbes {
		slices.SortFunc(never, func(a, b string) int {
			_, pa := w.probing[k][a]
			_, pb := w.probing[k][b]
			if pa != pb {
				if pa {
					return -1
				}
				return 1
			}
			return strings.Compare(a, b)
		})
		never = never[:scaleOutProbes]
	}
	want := make(map[string]bool, len(never))
	for _, a := range never {
		want[a] = true
	}
	return want
}

// probesIn counts the endpoints of namespace ns's Services probed (or
// answered, not ready in their slice yet). w.mu is held.
func (w *Watcher) probesIn(ns string) int {
	n := 0
	for k, ps := range w.probing {
		if k.namespace == ns {
			n += len(ps)
		}
	}
	return n
}

// stopUnwanted stops the probes of k's endpoints not in want, and forgets
// that those answered. w.mu is held.
func (w *Watcher) stopUnwanted(k service, want map[string]bool) {
	for a, p := range w.probing[k] {
		if !want[a] {
			p.cancel()
			delete(w.probing[k], a)
		}
	}
	for a := range w.early[k] {
		if !want[a] {
			delete(w.early[k], a)
		}
	}
}

// startProbes starts a probe for each endpoint of k in want that has
// none (in address order), unless probes are off or Run returned, while
// k's namespace has fewer than namespaceProbes. w.mu is held.
func (w *Watcher) startProbes(k service, want map[string]bool) {
	if w.probeEvery <= 0 || w.stopped {
		return
	}
	inNamespace := w.probesIn(k.namespace)
	for _, a := range slices.Sorted(maps.Keys(want)) {
		if _, ok := w.probing[k][a]; ok {
			continue
		}
		if inNamespace >= namespaceProbes {
			return
		}
		inNamespace++
		if w.probing[k] == nil {
			w.probing[k] = map[string]*probe{}
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.probeFor)
		p := &probe{cancel: cancel}
		w.probing[k][a] = p
		go w.probe(ctx, k, a, p)
	}
}

// forgetGone forgets that an address was ready once no endpoint of k has
// it any more: it may come back as another pod's. w.mu is held.
func (w *Watcher) forgetGone(k service) {
	present := map[string]bool{}
	for _, as := range w.all[k] {
		for _, a := range as {
			present[a.String()] = true
		}
	}
	for a := range w.wasReady[k] {
		if !present[a] {
			delete(w.wasReady[k], a)
		}
	}
}

// stopProbes stops every probe as Run returns, and starts no more.
func (w *Watcher) stopProbes() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	for _, probes := range w.probing {
		for _, p := range probes {
			p.cancel()
		}
	}
}

// Pace of a probe, in probe intervals (WithProbeInterval): it asks every
// interval for its first fastProbes intervals (a second by default: a
// host loads its handler in a few hundred milliseconds), then waits twice
// as long after each answer, up to slowestProbe intervals (a second by
// default; the kubelet's readiness probes mark the pod by then), so that
// a pod that never gets ready (a tenant's handler that fails to load, or
// a host made to answer 503 forever) costs the event bridge a probe a
// second, not a hundred, for the probe's host.MaxStartup.
const (
	fastProbes   = 100
	slowestProbe = 100
)

// probe asks the host at addr for its ready path until it answers 200,
// then takes addr as a ready endpoint of k (unless p was stopped). It
// stops at an answer of 500 naming k's Function: the host says that its
// handler could not be loaded, which no later probe changes (the
// kubelet's readiness probe still watches the pod).
func (w *Watcher) probe(ctx context.Context, k service, addr string, p *probe) {
	url := "http://" + addr + host.ReadyPath
	start := time.Now()
	wait := w.probeEvery
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		switch w.answers(ctx, url, k.namespace+"/"+k.name) {
		case notLoaded:
			return
		case ready:
			w.mu.Lock()
			if w.probing[k][addr] == p && ctx.Err() == nil {
				if w.early[k] == nil {
					w.early[k] = map[string]bool{}
				}
				w.early[k][addr] = true
				w.refresh(k)
			}
			w.mu.Unlock()
			return
		}
		wait = nextProbeWait(w.probeEvery, wait, time.Since(start))
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// nextProbeWait is how long a probe waits before its next question, the
// last wait having been last, probes every interval, since it started:
// every for the first fastProbes intervals, then twice the last wait, up
// to slowestProbe intervals.
func nextProbeWait(every, last, since time.Duration) time.Duration {
	if since < fastProbes*every {
		return every
	}
	return min(2*last, slowestProbe*every)
}

// An answer to a probe.
type answer uint8

const (
	// notYet: no answer, or not one of the Function's host saying ready.
	notYet answer = iota
	// ready: 200 from the Function's host.
	ready
	// notLoaded: 500 from the Function's host, whose handler could not
	// be loaded (host.ReadyPath).
	notLoaded
)

// FunctionHeader is the header in which a Function's host names its
// Function (namespace/name) on health answers.
const FunctionHeader = "X-Kfn-Function"

// answers asks the host at url (GET) whether Function fn's handler is
// loaded: only the answers of fn's host (its FunctionHeader) count, since
// an address another pod took over, in another namespace maybe, answers
// for another Function.
func (w *Watcher) answers(ctx context.Context, url, fn string) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return notYet
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return notYet
	}
	resp.Body.Close()
	switch {
	case resp.Header.Get(FunctionHeader) != fn:
		return notYet
	case resp.StatusCode == http.StatusOK:
		return ready
	case resp.StatusCode == http.StatusInternalServerError:
		return notLoaded
	}
	return notYet
}
