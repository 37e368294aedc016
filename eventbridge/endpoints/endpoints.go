package endpoints

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/contract/host"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/internal/ratelimit"
)

type service struct{ namespace, name string }

// Watcher tracks the ready endpoints of every Service. It is safe for
// concurrent use.
type Watcher struct {
	mu        sync.Mutex
	synced    bool
	syncCh    chan struct{}                           // closed once the initial list is in
	slices    map[service]map[string]int              // ready endpoints per slice
	addrs     map[service]map[string][]string         // ready host:port per slice (single-port slices)
	named     map[service]map[string]namedPorts       // ready host:port per slice by port name (ports.go)
	namedFlat map[service]namedPorts                  // named of all slices, sorted
	flat      map[service][]string                    // addrs of all slices, sorted
	fnSlices  map[service]map[string]struct{}         // slices labelled as a Function's
	all       map[service]map[string][]netip.AddrPort // every endpoint address and port per slice, ready or not
	changed   map[service]chan struct{}               // closed when the Service's readiness flips
	ready     map[service]bool
	next      atomic.Uint64 // round robin of Pick
	cache     cache.Cache   // fed from by Run; nil: fed by hand

	// Starting pods of Functions: endpoints not ready yet, probed at the
	// host's ready path until they answer (probe.go).
	probeEvery time.Duration                   // 0: no probes
	probeFor   time.Duration                   // a probe gives up after this long
	client     *http.Client                    // of the probes
	egress     egress.Policy                   // where the probes may ask (WithEgress)
	stopped    bool                            // Run returned: no probe starts any more
	probing    map[service]map[string]*probe   // host:port -> its probe
	early      map[service]map[string]bool     // host:port that answered, not ready yet in its slice
	wasReady   map[service]map[string]bool     // host:port seen ready in a slice: never probed again
	slicePorts map[service]map[string][]string // host:port of each slice's starting endpoints

	// Pods claimed for Functions at zero (claim.go).
	claimer   Claimer
	claimHold time.Duration
	claiming  map[service]bool
	// claimEnded are the callers of WakeThen waiting for a claim under
	// way to end.
	claimEnded map[service][]func(claimed bool)
	claimAfter map[service]time.Time // no claim before, after a failed one
	claimRates *ratelimit.PerKey     // each namespace's claims
	claimed    map[service]claimed
	metrics    *claimMetrics
	log        *slog.Logger
}

// ErrInvalidOption is wrapped by New's errors.
var ErrInvalidOption = errors.New("invalid endpoints option")

// Option configures New; it returns an error wrapping ErrInvalidOption
// for a value it cannot use.
type Option func(*Watcher) error

// WithCache makes Run feed the Watcher from the EndpointSlice informer of
// c (a controller-runtime cache, which must be started).
func WithCache(c cache.Cache) Option {
	return func(w *Watcher) error {
		if c == nil {
			return fmt.Errorf("%w: nil cache", ErrInvalidOption)
		}
		w.cache = c
		return nil
	}
}

var _ dispatcher.Endpoints = (*Watcher)(nil)

// WithLogger sets where the Watcher says what its claims came to
// (default: nowhere).
func WithLogger(l *slog.Logger) Option {
	return func(w *Watcher) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		w.log = l
		return nil
	}
}

// New returns a Watcher that knows nothing until it is fed (by Run, with
// WithCache, or by the OnAdd, OnUpdate, OnDelete and MarkSynced methods);
// until then no Service is ready.
func New(opts ...Option) (*Watcher, error) {
	w := &Watcher{
		syncCh:    make(chan struct{}),
		slices:    map[service]map[string]int{},
		addrs:     map[service]map[string][]string{},
		named:     map[service]map[string]namedPorts{},
		namedFlat: map[service]namedPorts{},
		flat:      map[service][]string{},
		fnSlices:  map[service]map[string]struct{}{},
		all:       map[service]map[string][]netip.AddrPort{},
		changed:   map[service]chan struct{}{},
		ready:     map[service]bool{},

		probeEvery: DefaultProbeInterval,
		probeFor:   host.MaxStartup,
		probing:    map[service]map[string]*probe{},
		early:      map[service]map[string]bool{},
		wasReady:   map[service]map[string]bool{},
		slicePorts: map[service]map[string][]string{},
		claiming:   map[service]bool{},
		claimEnded: map[service][]func(claimed bool){},
		claimAfter: map[service]time.Time{},
		claimRates: ratelimit.NewPerKey(NamespaceClaimsPerSecond, NamespaceClaimBurst),
		claimed:    map[service]claimed{},
		log:        slog.New(slog.DiscardHandler),
	}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := opt(w); err != nil {
			return nil, err
		}
	}
	w.client = &http.Client{Timeout: time.Second, Transport: probeTransport(w.egress)}
	return w, nil
}

// Run feeds the Watcher from the EndpointSlice informer of the cache given
// WithCache and marks it synced once the informer has synced; without a
// cache it only waits (the Watcher is fed by hand). It drains by removing
// its event handler from the informer: once it returned, the Watcher keeps
// what it knew and changes no more. It returns nil when ctx ends after the
// informer synced, ctx's error when it ended before, and an error when
// the informer cannot be had.
func (w *Watcher) Run(ctx context.Context) error {
	defer w.stopProbes()
	if w.cache == nil {
		<-ctx.Done()
		return nil
	}
	inf, err := w.cache.GetInformer(ctx, &discoveryv1.EndpointSlice{})
	if err != nil {
		return fmt.Errorf("endpointslice informer: %w", err)
	}
	reg, err := inf.AddEventHandler(w)
	if err != nil {
		return fmt.Errorf("watch endpointslices: %w", err)
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return ctx.Err()
	}
	w.MarkSynced()
	<-ctx.Done()
	return nil
}

// Ready reports whether namespace/name has a ready endpoint. The channel is
// closed when that flips (or when the Watcher first syncs).
func (w *Watcher) Ready(namespace, name string) (bool, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.synced {
		return false, w.syncCh
	}
	k := service{namespace, name}
	ch, ok := w.changed[k]
	if !ok {
		ch = make(chan struct{})
		w.changed[k] = ch
	}
	return w.ready[k], ch
}

// Pick returns host:port of a ready endpoint of namespace/name, taking
// them in turn, so that every request (not every connection, as kube-proxy
// balances) goes to the next pod, and a pod takes requests from the moment
// its endpoint is ready, before kube-proxy has written its rules. It
// reports false when the Service has no ready endpoint it can name: none
// at all, or a Service whose slices have more than one port (the caller
// then goes through the Service).
func (w *Watcher) Pick(namespace, name string) (string, bool) {
	w.mu.Lock()
	addrs := w.flat[service{namespace, name}]
	w.mu.Unlock()
	if len(addrs) == 0 {
		return "", false
	}
	return addrs[int(w.next.Add(1)%uint64(len(addrs)))], true
}

// Function reports whether namespace/name is the Service of a kfn Function:
// it has an EndpointSlice with the labels kfn's controller puts on a
// Function's Service (the EndpointSlice controller copies a Service's labels
// to its slices, and keeps one slice, empty, for a Service at zero
// replicas). False before the Watcher has synced.
func (w *Watcher) Function(namespace, name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.fnSlices[service{namespace, name}]
	return ok
}

// HasEndpoint reports whether a is the address and port of an endpoint of
// namespace/name, ready or not, in any of its slices (IPv4 in IPv6 taken
// as IPv4).
func (w *Watcher) HasEndpoint(namespace, name string, a netip.AddrPort) bool {
	a = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, addrs := range w.all[service{namespace, name}] {
		for _, x := range addrs {
			if x == a {
				return true
			}
		}
	}
	return false
}

// Synced returns a channel closed once the initial list of EndpointSlices
// is in.
func (w *Watcher) Synced() <-chan struct{} { return w.syncCh }

// MarkSynced says the initial list of EndpointSlices is in.
func (w *Watcher) MarkSynced() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.synced {
		w.synced = true
		close(w.syncCh)
	}
}

// OnAdd records a new EndpointSlice.
func (w *Watcher) OnAdd(obj any, _ bool) { w.set(obj, false) }

// OnUpdate records a changed EndpointSlice.
func (w *Watcher) OnUpdate(_, obj any) { w.set(obj, false) }

// OnDelete forgets a deleted EndpointSlice.
func (w *Watcher) OnDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	w.set(obj, true)
}

func (w *Watcher) set(obj any, deleted bool) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return
	}
	k := service{s.Namespace, name}
	n := 0
	var addrs []string
	var all []netip.AddrPort
	var ports namedPorts
	if !deleted {
		n = readyEndpoints(s)
		addrs = readyAddresses(s)
		all = allAddresses(s)
		ports = readyNamedPorts(s)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.slices[k] == nil {
		w.slices[k] = map[string]int{}
	}
	if deleted {
		delete(w.slices[k], s.Name)
	} else {
		w.slices[k][s.Name] = n
	}
	w.setAddrs(k, s.Name, addrs)
	w.setNamedPorts(k, s.Name, ports)
	if len(all) > 0 {
		if w.all[k] == nil {
			w.all[k] = map[string][]netip.AddrPort{}
		}
		w.all[k][s.Name] = all
	} else if w.all[k] != nil {
		delete(w.all[k], s.Name)
		if len(w.all[k]) == 0 {
			delete(w.all, k)
		}
	}
	if len(w.slices[k]) == 0 {
		delete(w.slices, k)
	}
	isFn := !deleted && s.Labels[serverlessv1alpha2.LabelManagedBy] == serverlessv1alpha2.LabelManagedByValue &&
		s.Labels[serverlessv1alpha2.LabelFunctionName] == name
	if isFn {
		if w.fnSlices[k] == nil {
			w.fnSlices[k] = map[string]struct{}{}
		}
		w.fnSlices[k][s.Name] = struct{}{}
	} else if w.fnSlices[k] != nil {
		delete(w.fnSlices[k], s.Name)
		if len(w.fnSlices[k]) == 0 {
			delete(w.fnSlices, k)
			delete(w.claimAfter, k) // a Function gone keeps no backoff: names come and go
		}
	}
	var starting []string
	if isFn {
		starting = startingAddresses(s)
	}
	w.setStarting(k, s.Name, addrs, starting)
	w.refresh(k)
}

// refresh flattens the ready addresses of k's slices and the early ones
// of its starting pods, and wakes the waiters of k when its readiness
// flips.
func (w *Watcher) refresh(k service) {
	w.dropClaimSeen(k)
	var flat []string
	for _, a := range w.addrs[k] {
		flat = append(flat, a...)
	}
	for a := range w.early[k] {
		flat = append(flat, a)
	}
	c, claimedPod := w.claimed[k]
	if claimedPod {
		flat = append(flat, c.addr)
	}
	if len(flat) == 0 {
		delete(w.flat, k)
	} else {
		sort.Strings(flat)
		w.flat[k] = flat
	}
	total := len(w.early[k])
	for _, n := range w.slices[k] {
		total += n
	}
	if claimedPod {
		total++
	}
	if now := total > 0; now != w.ready[k] {
		if now {
			w.ready[k] = true
		} else {
			delete(w.ready, k)
		}
		w.notify(k)
	}
}

// notify closes the channel Ready gave for k: whoever waits asks again.
// w.mu is held.
func (w *Watcher) notify(k service) {
	if ch, ok := w.changed[k]; ok {
		close(ch)
		delete(w.changed, k)
	}
}

// setAddrs records the ready addresses of one slice of k.
func (w *Watcher) setAddrs(k service, slice string, addrs []string) {
	if w.addrs[k] == nil {
		w.addrs[k] = map[string][]string{}
	}
	if len(addrs) == 0 {
		delete(w.addrs[k], slice)
	} else {
		w.addrs[k][slice] = addrs
	}
	if len(w.addrs[k]) == 0 {
		delete(w.addrs, k)
	}
}

// readyAddresses returns host:port of the ready endpoints of a slice with
// exactly one port; for other slices, nil (which port a request is meant
// for is known only to the Service).
func readyAddresses(s *discoveryv1.EndpointSlice) []string {
	return singlePortAddresses(s, isReady)
}

// singlePortAddresses returns host:port of the endpoints of a slice with
// exactly one port whose conditions keep takes; for other slices, nil.
func singlePortAddresses(s *discoveryv1.EndpointSlice, keep func(discoveryv1.EndpointConditions) bool) []string {
	if len(s.Ports) != 1 || s.Ports[0].Port == nil {
		return nil
	}
	port := strconv.Itoa(int(*s.Ports[0].Port))
	var out []string
	for _, e := range s.Endpoints {
		if !keep(e.Conditions) {
			continue
		}
		for _, a := range e.Addresses {
			out = append(out, net.JoinHostPort(a, port))
		}
	}
	return out
}

// isReady reports whether an endpoint is ready (an unset condition means
// ready, as the API defines).
func isReady(c discoveryv1.EndpointConditions) bool { return c.Ready == nil || *c.Ready }

// allAddresses returns the address and port of every endpoint of a
// slice, for each of its ports.
func allAddresses(s *discoveryv1.EndpointSlice) []netip.AddrPort {
	var out []netip.AddrPort
	for _, e := range s.Endpoints {
		for _, a := range e.Addresses {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				continue
			}
			for _, p := range s.Ports {
				if p.Port != nil {
					out = append(out, netip.AddrPortFrom(ip.Unmap(), uint16(*p.Port)))
				}
			}
		}
	}
	return out
}

// readyEndpoints counts the endpoints of a slice that are ready.
func readyEndpoints(s *discoveryv1.EndpointSlice) int {
	n := 0
	for _, e := range s.Endpoints {
		if isReady(e.Conditions) {
			n++
		}
	}
	return n
}
