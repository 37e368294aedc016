package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes/plan"
	"github.com/kfn-dev/kfn/test/node/singlenode"
)

// A step is one milestone of a wake, in the order a wake passes them.
type step string

const (
	stepScaled    step = "Deployment scaled to 1 (scaler push, KEDA)"
	stepReplicas  step = "ReplicaSet scaled to 1"
	stepPod       step = "pod created"
	stepScheduled step = "pod scheduled"
	stepSandbox   step = "sandbox and network ready"
	stepStarted   step = "container started"
	stepListening step = "host listening"
	stepLoaded    step = "handler loaded (ready path 200)"
	stepReady     step = "pod Ready"
	stepEndpoint  step = "EndpointSlice endpoint ready"
	stepDelivered step = "delivered"
)

// steps is every step in order.
var steps = []step{stepScaled, stepReplicas, stepPod, stepScheduled, stepSandbox, stepStarted,
	stepListening, stepLoaded, stepReady, stepEndpoint, stepDelivered}

// Steps of a wake served by the warm pool.
const (
	stepServes        step = "standby host serves the Function (its log line)"
	stepClaimed       step = "standby pod labelled as the Function's"
	stepPoolEndpoint  step = "EndpointSlice lists the standby pod"
	stepPoolDelivered step = "delivered by the standby pod"
)

// poolSteps is every step of a warm pool wake in order.
var poolSteps = []step{stepServes, stepScaled, stepClaimed, stepPoolEndpoint, stepPoolDelivered}

// timeline is when one wake passed each step, as this program saw it:
// watches of the Deployment, its ReplicaSets, its pods and the Service's
// EndpointSlices (the API server's timestamps have a one-second
// resolution, too coarse for a wake), and, once the pod has an address, a
// connection attempt and a GET of the ready path every 2 ms from the node.
type timeline struct {
	mu      sync.Mutex
	start   time.Time
	at      map[step]time.Time
	probing bool
	// given is the standby pod labelled as the Function's (pool wakes).
	given string
}

// probe reports whether the host's probes are still to be started, and
// notes that they are.
func (t *timeline) probe() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := !t.probing
	t.probing = true
	return first
}

func (t *timeline) see(s step) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.at[s]; !ok {
		t.at[s] = time.Now()
	}
}

func (t *timeline) seen(s step) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.at[s]
	return ok
}

// since returns each step's time after start; ok is false when a step was
// not seen.
func (t *timeline) since() (map[step]time.Duration, bool) { return t.sinceOf(steps) }

// sinceOf is since for the steps of list.
func (t *timeline) sinceOf(list []step) (map[step]time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[step]time.Duration{}
	for _, s := range list {
		at, ok := t.at[s]
		if !ok {
			return out, false
		}
		out[s] = at.Sub(t.start)
	}
	return out, true
}

// watchWake starts watching the wake of Deployment name in ns; stop ends
// the watches and the probes. Call it before the wake's publish and set
// start with begin.
func watchWake(ctx context.Context, c *singlenode.Cluster, ns, name string) (*timeline, func(), error) {
	t := &timeline{at: map[step]time.Time{}}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop := func() { cancel(); wg.Wait() }
	byName := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	byFunction := metav1.ListOptions{LabelSelector: "serverless.kyma-project.io/function-name=" + name}
	bySvc := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name}
	watches := []watcher{
		{func() (watch.Interface, error) { return c.Clientset.AppsV1().Deployments(ns).Watch(ctx, byName) }, func(o any) {
			if d, ok := o.(*appsv1.Deployment); ok && d.Spec.Replicas != nil && *d.Spec.Replicas > 0 {
				t.see(stepScaled)
			}
		}},
		{func() (watch.Interface, error) { return c.Clientset.AppsV1().ReplicaSets(ns).Watch(ctx, byFunction) }, func(o any) {
			if rs, ok := o.(*appsv1.ReplicaSet); ok && rs.Spec.Replicas != nil && *rs.Spec.Replicas > 0 {
				t.see(stepReplicas)
			}
		}},
		{func() (watch.Interface, error) { return c.Clientset.CoreV1().Pods(ns).Watch(ctx, byFunction) }, func(o any) {
			p, ok := o.(*corev1.Pod)
			if !ok || p.DeletionTimestamp != nil {
				return
			}
			t.see(stepPod)
			if p.Spec.NodeName != "" {
				t.see(stepScheduled)
			}
			for _, cond := range p.Status.Conditions {
				if cond.Status != corev1.ConditionTrue {
					continue
				}
				switch cond.Type {
				case corev1.PodReadyToStartContainers:
					t.see(stepSandbox)
				case corev1.PodReady:
					t.see(stepReady)
				}
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running != nil {
					t.see(stepStarted)
				}
			}
			if p.Status.PodIP != "" && t.probe() {
				wg.Add(1)
				go func() { defer wg.Done(); probeHost(ctx, t, p.Status.PodIP) }()
			}
		}},
		{func() (watch.Interface, error) { return c.Clientset.DiscoveryV1().EndpointSlices(ns).Watch(ctx, bySvc) }, func(o any) {
			es, ok := o.(*discoveryv1.EndpointSlice)
			if !ok {
				return
			}
			for _, e := range es.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					t.see(stepEndpoint)
				}
			}
		}},
	}
	if err := follow(ctx, &wg, watches); err != nil {
		stop()
		return nil, nil, err
	}
	return t, stop, nil
}

// watchPoolWake watches a wake of Function name in ns that the warm pool
// serves: the Deployment scaled, the standby pod labelled as the
// Function's, and the Function's EndpointSlice listing it (ready or not:
// the event bridge probes it). Call it before the publish and set start
// with begin.
func watchPoolWake(ctx context.Context, c *singlenode.Cluster, ns, name string) (*timeline, func(), error) {
	t := &timeline{at: map[step]time.Time{}}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop := func() { cancel(); wg.Wait() }
	standby := func(pod string) bool { return strings.HasPrefix(pod, "kfn-pool-") }
	watches := []watcher{
		{func() (watch.Interface, error) {
			return c.Clientset.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		}, func(o any) {
			if d, ok := o.(*appsv1.Deployment); ok && d.Spec.Replicas != nil && *d.Spec.Replicas > 0 {
				t.see(stepScaled)
			}
		}},
		{func() (watch.Interface, error) {
			return c.Clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "serverless.kyma-project.io/function-name=" + name})
		}, func(o any) {
			if p, ok := o.(*corev1.Pod); ok && standby(p.Name) && p.DeletionTimestamp == nil {
				t.see(stepClaimed)
				t.mu.Lock()
				t.given = p.Name
				t.mu.Unlock()
			}
		}},
		{func() (watch.Interface, error) {
			return c.Clientset.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		}, func(o any) {
			es, ok := o.(*discoveryv1.EndpointSlice)
			if !ok {
				return
			}
			for _, e := range es.Endpoints {
				if e.TargetRef != nil && standby(e.TargetRef.Name) {
					t.see(stepPoolEndpoint)
				}
			}
		}},
	}
	if err := follow(ctx, &wg, watches); err != nil {
		stop()
		return nil, nil, err
	}
	return t, stop, nil
}

// givenPod is the standby pod labelled as the Function's, if seen.
func (t *timeline) givenPod() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.given
}

// servesFromLog notes when the standby pod given Function fn of ns
// logged that its host serves fn (the runtimes' "kfn: function <ns>/<fn>
// loaded on standby host" line), as the node's container runtime
// timestamped the line: the node's clock is this program's. Nothing asks
// the pod anything during the wake (a probe every few milliseconds would
// take CPU of the pod it measures, and of the node's two cores). It
// reports whether the step is seen.
func (t *timeline) servesFromLog(ctx context.Context, c *singlenode.Cluster, ns, fn string) bool {
	t.mu.Lock()
	pod := t.given
	_, seen := t.at[stepServes]
	t.mu.Unlock()
	if seen {
		return true
	}
	if pod == "" {
		return false
	}
	raw, err := c.Clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: resources.ContainerFunction, Timestamps: true}).DoRaw(ctx)
	if err != nil {
		return false
	}
	at, ok := loggedServes(string(raw), ns+"/"+fn)
	if ok {
		t.mu.Lock()
		t.at[stepServes] = at
		t.mu.Unlock()
	}
	return ok
}

// loggedServes finds, in a container's log with timestamps, when its
// host logged that it serves fn (namespace/name).
func loggedServes(log, fn string) (time.Time, bool) {
	for _, line := range strings.Split(log, "\n") {
		ts, rest, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(rest, "kfn: function "+fn+" loaded on standby host") {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			return at, true
		}
	}
	return time.Time{}, false
}

// watcher is one watch of a wake: open starts it, on sees each object.
type watcher struct {
	open func() (watch.Interface, error)
	on   func(any)
}

// follow opens each watch and hands its objects to on, each in a goroutine
// counted in wg, until ctx ends or the watch closes.
func follow(ctx context.Context, wg *sync.WaitGroup, watches []watcher) error {
	for _, w := range watches {
		wi, err := w.open()
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer wi.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-wi.ResultChan():
					if !ok {
						return
					}
					w.on(ev.Object)
				}
			}
		}()
	}
	return nil
}

// begin sets the wake's start: the moment of its publish or request.
func (t *timeline) begin(at time.Time) {
	t.mu.Lock()
	t.start = at
	t.mu.Unlock()
}

// probeHost notes when the host at ip first accepts a connection and first
// answers its ready path with 200, trying every 2 ms.
func probeHost(ctx context.Context, t *timeline, ip string) {
	addr := net.JoinHostPort(ip, fmt.Sprint(plan.Port))
	hc := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	for !t.seen(stepLoaded) {
		if !t.seen(stepListening) {
			if conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
				conn.Close()
				t.see(stepListening)
			}
		}
		if t.seen(stepListening) {
			if resp, err := hc.Get("http://" + addr + plan.ReadyPath); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					t.see(stepLoaded)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// breakdown is the wake timelines of several wakes.
type breakdown []map[step]time.Duration

// percentile returns the p-th percentile (0-100) of each step's time since
// the start, nearest rank.
func (b breakdown) percentile(s step, p int) time.Duration {
	if len(b) == 0 {
		return 0
	}
	var ds []time.Duration
	for _, w := range b {
		ds = append(ds, w[s])
	}
	return percentile(ds, p)
}

// print writes the median timeline of b, each step since the start and
// since the step before it, in the order of their medians (a delivery may
// come before the pod is Ready).
func (b breakdown) print() { b.printOf("wake by event", steps) }

// printOf is print for the steps of list.
func (b breakdown) printOf(what string, list []step) {
	var prev time.Duration
	fmt.Fprintf(os.Stderr, "bench/cluster: %s, median of %d wakes (since the publish; since the step before):\n", what, len(b))
	order := slices.Clone(list)
	slices.SortStableFunc(order, func(x, y step) int { return cmp.Compare(b.percentile(x, 50), b.percentile(y, 50)) })
	for _, s := range order {
		m := b.percentile(s, 50)
		fmt.Fprintf(os.Stderr, "  %-45s %6d ms  %+6d ms\n", s, m.Milliseconds(), (m - prev).Milliseconds())
		prev = m
	}
}

// format is one wake's timeline on one line, each step's milliseconds
// since the start in the order of steps.
func format(w map[step]time.Duration) string { return formatOf(w, steps) }

// formatOf is format for the steps of list.
func formatOf(w map[step]time.Duration, list []step) string {
	var parts []string
	for _, s := range list {
		parts = append(parts, fmt.Sprint(w[s].Milliseconds()))
	}
	return strings.Join(parts, " ")
}
