package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/test/node/install"
	"github.com/kfn-dev/kfn/test/node/singlenode"
)

// fleet is the copies of one runtime's cold Function. Wakes take them in
// turn, so one copy's way back to zero (its cooldown, KEDA's next poll, the
// pod's end) overlaps the wakes of the others and the run is shorter; each
// wake is still measured alone (waker.quiet).
type fleet struct {
	runtime, prefix string
	// dependency says whether the Function has test/pkgindex's package as
	// its inline dependency.
	dependency   bool
	copies, next int
}

func (f *fleet) name(i int) string { return fmt.Sprintf("%s-%d", f.prefix, i) }
func (f *fleet) typ(i int) string  { return fmt.Sprintf("bench.%s%d.v1", f.prefix, i) }

// waker wakes the cold Functions of namespace ns by event (through the
// publisher) and by HTTP (through the gateway, with token).
type waker struct {
	c                         *singlenode.Cluster
	ns                        string
	rec                       *recorder
	publisher, gateway, token string
}

// errNotPooled is a pool wake that no standby pod served.
var errNotPooled = errors.New("no standby pod was given the Function (the wake was not the pool's)")

// standbyPod says whether a pod is one the warm pool made.
func standbyPod(name string) bool { return strings.HasPrefix(name, "kfn-pool-") }

// next takes f's next copy once it is at zero, with a started standby pod
// of its runtime when pool is set, and the namespace quiet.
func (w *waker) next(ctx context.Context, f *fleet, pool bool) (name, typ string, err error) {
	i := f.next
	f.next = (f.next + 1) % f.copies
	name, typ = f.name(i), f.typ(i)
	if err := w.atZero(ctx, name); err != nil {
		return "", "", fmt.Errorf("%s at zero: %w\n%s", name, err, w.c.Describe(ctx, w.ns))
	}
	if pool {
		if err := w.standby(ctx, f.runtime, f.dependency); err != nil {
			return "", "", fmt.Errorf("no %s standby pod: %w\n%s", f.runtime, err, w.c.Describe(ctx, w.ns))
		}
	}
	if err := w.quiet(ctx); err != nil {
		return "", "", fmt.Errorf("namespace %s never quiet: %w\n%s", w.ns, err, w.c.Describe(ctx, w.ns))
	}
	return name, typ, nil
}

// event wakes f's next copy with one event and returns the wake's
// timeline: on a new pod (steps) or, with pool, on a standby pod
// (poolSteps), the delivery being when the handler was called.
func (w *waker) event(ctx context.Context, f *fleet, id string, pool bool) (map[step]time.Duration, error) {
	name, typ, err := w.next(ctx, f, pool)
	if err != nil {
		return nil, err
	}
	return w.timed(ctx, name, id, pool, func() (time.Time, error) {
		if err := publish(w.publisher+"/publish", typ, id); err != nil {
			return time.Time{}, err
		}
		at, err := w.rec.wait(ctx, id, 2*time.Minute)
		if err != nil {
			return time.Time{}, fmt.Errorf("event %s to %s: %w\n%s", id, name, err, w.c.Describe(ctx, w.ns))
		}
		return at, nil
	})
}

// http wakes f's next copy with one request through the gateway and
// returns the time to its answer; with pool, it fails unless a standby pod
// was given the Function, and logs the wake's timeline as event does.
func (w *waker) http(ctx context.Context, f *fleet, id string, pool bool) (time.Duration, error) {
	name, _, err := w.next(ctx, f, pool)
	if err != nil {
		return 0, err
	}
	get := func() (time.Time, error) {
		if err := getAs(fmt.Sprintf("%s/%s/%s/?id=%s", w.gateway, w.ns, name, id), w.token); err != nil {
			return time.Time{}, fmt.Errorf("request %s to %s: %w", id, name, err)
		}
		return time.Now(), nil
	}
	if pool {
		tl, err := w.timed(ctx, name, id, true, get)
		return tl[stepPoolDelivered], err
	}
	start := time.Now()
	at, err := get()
	return at.Sub(start), err
}

// slowPoolWake is the time to delivery from which a warm pool wake's log
// also quotes what the platform logged of it (the scalers', the event
// bridges', the controller's and the standby host's lines): the wakes
// that make the p99 (target < 60 ms), with their steps.
const slowPoolWake = 40 * time.Millisecond

// timed watches the wake of Function name that send starts (a publish or a
// request; it returns when the handler was called or answered), and
// returns the wake's timeline (steps, or poolSteps with pool), having
// logged it.
func (w *waker) timed(ctx context.Context, name, id string, pool bool, send func() (time.Time, error)) (map[step]time.Duration, error) {
	watch, list, last := watchWake, steps, stepDelivered
	if pool {
		watch, list, last = watchPoolWake, poolSteps, stepPoolDelivered
	}
	tl, stop, err := watch(ctx, w.c, w.ns, name)
	if err != nil {
		return nil, err
	}
	defer stop()
	start := time.Now()
	tl.begin(start)
	at, err := send()
	if err != nil {
		return nil, err
	}
	tl.see(last)
	if _, err := pollValue(ctx, 30*time.Second, func() (bool, bool) {
		if pool && !tl.servesFromLog(ctx, w.c, w.ns, name) {
			return false, false
		}
		_, ok := tl.sinceOf(list)
		return ok, ok
	}); err != nil {
		seen, _ := tl.sinceOf(list)
		fmt.Fprintf(os.Stderr, "bench/cluster: wake %s: a step was not seen: %v\n", id, seen)
	}
	stop()
	d, _ := tl.sinceOf(list)
	d[last] = at.Sub(start)
	if pool && d[stepClaimed] == 0 {
		return nil, fmt.Errorf("wake %s of %s: %w", id, name, errNotPooled)
	}
	fmt.Fprintf(os.Stderr, "bench/cluster: %s (%s) timeline (ms): %s\n", id, name, formatOf(d, list))
	if pool && d[last] >= slowPoolWake {
		fmt.Fprintf(os.Stderr, "bench/cluster: %s took %s; the platform logged:\n%s\n", id, ms3(d[last]), strings.Join(w.logged(ctx, tl.givenPod(), start), "\n"))
	}
	return d, nil
}

// Label selectors of the platform's components (the chart's labels; the
// gateway runs in the event bridge's pods).
const (
	scalerSelector      = "app.kubernetes.io/component=scaler"
	eventBridgeSelector = "app.kubernetes.io/component=eventbridge"
	controllerSelector  = "app.kubernetes.io/component=controller"
)

// logged is what the platform logged of a wake in w's namespace from
// start on: the lines of the scalers, the event bridges (with their
// gateways) and the controller that name the namespace, and every line of standby pod standby.
func (w *waker) logged(ctx context.Context, standby string, start time.Time) []string {
	names := func(text string) bool {
		return strings.Contains(text, `"`+w.ns+`"`) || strings.Contains(text, w.ns+"/")
	}
	var sources []singlenode.LogSource
	for _, sel := range []string{scalerSelector, eventBridgeSelector, controllerSelector} {
		sources = append(sources, singlenode.LogSource{Namespace: install.Namespace, Selector: sel, Keep: names})
	}
	if standby != "" {
		sources = append(sources, singlenode.LogSource{Namespace: w.ns, Name: standby})
	}
	return w.c.LogsSince(ctx, start, sources...)
}

// atZero waits until Function name's Deployment is scaled to zero and its
// pods are gone.
func (w *waker) atZero(ctx context.Context, name string) error {
	_, err := pollValue(ctx, 3*time.Minute, func() (bool, bool) {
		pods, err := w.c.Clientset.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: "serverless.kyma-project.io/function-name=" + name})
		d, derr := w.c.Clientset.AppsV1().Deployments(w.ns).Get(ctx, name, metav1.GetOptions{})
		ok := err == nil && derr == nil && len(pods.Items) == 0 && d.Spec.Replicas != nil && *d.Spec.Replicas == 0
		return ok, ok
	})
	return err
}

// standby waits for a started standby pod of runtime.
func (w *waker) standby(ctx context.Context, runtime string, prepared bool) error {
	_, err := pollValue(ctx, 3*time.Minute, func() (bool, bool) {
		pods, err := w.c.Clientset.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: "kfn.dev/pool-shape"})
		if err != nil {
			return false, false
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || !started(p) {
				continue
			}
			for _, e := range p.Spec.Containers[0].Env {
				if e.Name == "FUNC_RUNTIME" && e.Value == runtime && (!prepared || w.prepared(ctx, p.Name)) {
					return true, true
				}
			}
		}
		return false, false
	})
	return err
}

// prepared reports whether standby pod pod's host logged that it holds
// its pool's dependency set (the pool's prepare, from the dependency
// cache): the steady state of a namespace whose Functions with
// dependencies woke before, which the wakes with a dependency measure.
func (w *waker) prepared(ctx context.Context, pod string) bool {
	raw, err := w.c.Clientset.CoreV1().Pods(w.ns).GetLogs(pod, &corev1.PodLogOptions{Container: resources.ContainerFunction}).DoRaw(ctx)
	return err == nil && strings.Contains(string(raw), " prepared from the cache in ")
}

// quiet waits until no pod of the namespace is starting or ending: each
// is Ready, or a started standby pod (which is never Ready). A wake is
// measured without another pod's start or end beside it on the node.
func (w *waker) quiet(ctx context.Context) error {
	_, err := pollValue(ctx, 3*time.Minute, func() (bool, bool) {
		pods, err := w.c.Clientset.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, false
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return false, false
			}
			if standbyPod(p.Name) {
				// An idle started standby pod is the pool at rest;
				// one given a Function is deleted once the Function's
				// own pod is Ready (its end would fall in the next
				// wake), one not started yet is starting.
				if started(p) && p.Labels["serverless.kyma-project.io/function-name"] == "" {
					continue
				}
				return false, false
			}
			if !podReady(p) {
				return false, false
			}
		}
		return true, true
	})
	return err
}

func started(p corev1.Pod) bool {
	return len(p.Status.ContainerStatuses) > 0 && ptr.Deref(p.Status.ContainerStatuses[0].Started, false)
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ms3 is d in milliseconds for the log.
func ms3(d time.Duration) string { return d.Round(time.Millisecond).String() }

// poolReason is the message of Function name's ConfigurationReady
// condition, where the controller says why the warm pool does not serve
// it, or why it could not.
func (w *waker) poolReason(ctx context.Context, name string) string {
	fn := &unstructured.Unstructured{}
	fn.SetAPIVersion("serverless.kyma-project.io/v1alpha2")
	fn.SetKind("Function")
	if err := w.c.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: name}, fn); err != nil {
		return "its status could not be read: " + err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(fn.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "ConfigurationReady" {
			return fmt.Sprintf("ConfigurationReady: %v", m["message"])
		}
	}
	return "no ConfigurationReady condition"
}
