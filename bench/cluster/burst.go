package main

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/bench/figures"
	"github.com/kfn-dev/kfn/test/node/singlenode"
)

// A burst (issue 48): a Node.js Function serving on one pod of its own
// gets burstEvents events as fast as the bench can publish them; its
// handler takes burstHandlerMs and the Subscription lets burstInFlight be
// in flight, so the backlog outlasts the HPA's sync period (5 s on the
// test node) and KEDA's HPA scales it to burstMaxReplicas. The same burst
// is measured with the warm pool (the namespace keeps burstStandby standby
// pods, which the pool gives the replicas the HPA adds until the
// Deployment's own pods are ready) and without it.
const (
	burstEvents      = 2000
	burstHandlerMs   = 50
	burstInFlight    = 10
	burstMaxReplicas = 4
	burstStandby     = 3
	burstPublishers  = 8
)

// burstFigures are one burst's times, from its first publish.
type burstFigures struct {
	// scaled is when the HPA first asked for more than one replica (not
	// kfn's: its sync period); serving when the most replicas it asked
	// for had each handled an event (pods of the pool's count), and
	// replicas how many that was.
	scaled, serving time.Duration
	replicas        int32
	// p50 and p99 are of the events' delivery, published -> handler
	// called.
	p50, p99 time.Duration
	// standby is how many of the pool's pods handled events.
	standby int
}

// burstType is the event type of the burst in namespace ns: a type of its
// own, so that no Subscription of another burst's namespace (still being
// deleted) takes its events to that namespace's pods.
func burstType(ns string) string {
	return "bench.surge" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, ns) + ".v1"
}

// burstFunction is the burst's Function and Subscription in ns: the
// handler reports each event's id, the moment it was called and its pod.
func burstFunction(ns, recorderURL string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
  labels:
    pod-security.kubernetes.io/enforce: restricted
---
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: surge
  namespace: %[1]s
spec:
  runtime: nodejs22
  scaleConfig:
    minReplicas: 0
    maxReplicas: %[3]d
    cooldownPeriod: 60
    targetBacklog: 20
  env:
    - name: RECORDER_URL
      value: %[2]s
  source:
    inline:
      source: |
        const pod = require("node:os").hostname();
        module.exports = {
          main: async function (event) {
            const at = Date.now();
            await new Promise((resolve) => setTimeout(resolve, %[4]d));
            await fetch(process.env.RECORDER_URL + "/record?id=" + encodeURIComponent(event["ce-id"]) + "&at=" + at + "&pod=" + pod, { method: "POST" });
            return "ok";
          }
        }
---
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata:
  name: surge
  namespace: %[1]s
spec:
  sink: http://surge.%[1]s.svc.cluster.local
  source: bench
  config:
    maxInFlightMessages: "%[5]d"
  types:
    - %[6]s
`, ns, recorderURL, burstMaxReplicas, burstHandlerMs, burstInFlight, burstType(ns))
}

// measureBurst runs the burst in namespace ns, whose warm pool keeps
// standby pods (0: none).
func measureBurst(ctx context.Context, c *singlenode.Cluster, rec *recorder, publisher, ns string, standby int) (burstFigures, error) {
	var out burstFigures
	if err := c.Apply(ctx, []byte(burstFunction(ns, rec.url))); err != nil {
		return out, err
	}
	if err := c.Apply(ctx, []byte(fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  annotations:\n    kfn.dev/warm-pool-size: %q\n", ns, fmt.Sprint(standby)))); err != nil {
		return out, err
	}
	// Events wake it until it serves on one pod of its own (the
	// Subscription may not be ready yet, and KEDA takes a new Function to
	// zero at once: a waking event is sent again whenever it is at zero
	// and the last one was handled or 5 s passed), with the namespace's
	// standby pods started and none given to it.
	wakes := 0
	var lastWake time.Time
	wakeID := func(n int) string { return fmt.Sprintf("%s-wake-%d", ns, n) }
	if _, err := pollValue(ctx, 3*time.Minute, func() (bool, bool) {
		d, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "surge", metav1.GetOptions{})
		if err != nil || d.Spec.Replicas == nil {
			return false, false
		}
		if *d.Spec.Replicas == 0 {
			if _, handled := rec.pod(wakeID(wakes)); wakes == 0 || handled || time.Since(lastWake) > 5*time.Second {
				wakes++
				lastWake = time.Now()
				_ = publish(publisher+"/publish", burstType(ns), wakeID(wakes))
			}
			return false, false
		}
		if *d.Spec.Replicas != 1 || d.Status.ReadyReplicas != 1 {
			return false, false
		}
		pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, false
		}
		ready := 0
		for _, p := range pods.Items {
			switch {
			case p.DeletionTimestamp != nil, standbyPod(p.Name) && p.Labels["kfn.dev/pool-claimed-by"] != "":
				return false, false // a pod ending, or the wake's pod of the pool's not retired yet
			case standbyPod(p.Name) && started(p):
				ready++
			}
		}
		return ready >= standby, ready >= standby
	}); err != nil {
		return out, fmt.Errorf("burst %s: not at one pod of its own with %d standby pods (%d waking events sent): %w\n%s", ns, standby, wakes, err, c.Describe(ctx, ns))
	}

	// The HPA's asks, watched from before the burst.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var mu sync.Mutex
	var scaledAt time.Time
	var most int32
	watchDone := make(chan struct{})
	wi, err := c.Clientset.AppsV1().Deployments(ns).Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=surge"})
	if err != nil {
		return out, fmt.Errorf("watch the burst's Deployment: %w", err)
	}
	go func() {
		defer close(watchDone)
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			dep, ok := ev.Object.(*appsv1.Deployment)
			if !ok || dep.Spec.Replicas == nil {
				continue
			}
			mu.Lock()
			if n := *dep.Spec.Replicas; n > 1 && scaledAt.IsZero() {
				scaledAt = time.Now()
			}
			most = max(most, *dep.Spec.Replicas)
			mu.Unlock()
		}
	}()

	ids := make([]string, burstEvents)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%04d", ns, i)
	}
	published := make([]time.Time, len(ids))
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, burstPublishers)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: burstPublishers}}
	for w := range burstPublishers {
		wg.Go(func() {
			for i := w; i < len(ids); i += burstPublishers {
				published[i] = time.Now()
				if err := publishWith(hc, publisher+"/publish", burstType(ns), ids[i]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return out, fmt.Errorf("burst %s: %w", ns, err)
	}
	fmt.Fprintf(os.Stderr, "bench/cluster: burst %s: %d events published in %s\n", ns, len(ids), ms3(time.Since(start)))
	for _, id := range ids {
		if _, err := rec.wait(ctx, id, 3*time.Minute); err != nil {
			return out, fmt.Errorf("burst %s: event %s not handled: %w\n%s", ns, id, err, c.Describe(ctx, ns))
		}
	}
	stopWatch()
	<-watchDone

	var delivery []time.Duration
	firstOf := map[string]time.Time{} // pod -> its first event of the burst
	for i, id := range ids {
		at, _ := rec.wait(ctx, id, 0)
		delivery = append(delivery, at.Sub(published[i]))
		pod, _ := rec.pod(id)
		if f, ok := firstOf[pod]; !ok || at.Before(f) {
			firstOf[pod] = at
		}
	}
	out.p50, out.p99 = percentile(delivery, 50), percentile(delivery, 99)
	mu.Lock()
	out.replicas = most
	if !scaledAt.IsZero() {
		out.scaled = scaledAt.Sub(start)
	}
	mu.Unlock()
	type served struct {
		pod string
		at  time.Duration
	}
	var byPod []served
	for pod, at := range firstOf {
		byPod = append(byPod, served{pod, at.Sub(start)})
		if standbyPod(pod) {
			out.standby++
		}
	}
	slices.SortFunc(byPod, func(a, b served) int { return cmp.Compare(a.at, b.at) })
	firsts := make([]time.Duration, len(byPod))
	order := make([]string, len(byPod))
	for i, s := range byPod {
		firsts[i] = s.at
		order[i] = fmt.Sprintf("%s=%d", s.pod, s.at.Milliseconds())
	}
	if n := int(out.replicas); n > 0 && n <= len(firsts) {
		out.serving = firsts[n-1]
	} else if len(firsts) > 0 {
		out.serving = firsts[len(firsts)-1]
	}
	fmt.Fprintf(os.Stderr, "bench/cluster: burst %s (%d standby pods): HPA asked for more at %s, at most %d replicas, %d serving at %s (%d of the pool's); delivery p50 %s, p99 %s; each pod's first event (ms since the first publish): %s\n",
		ns, standby, ms3(out.scaled), out.replicas, min(int(out.replicas), len(firsts)), ms3(out.serving), out.standby, ms3(out.p50), ms3(out.p99), strings.Join(order, " "))
	// The namespace goes, and the next measure waits for it: its pods
	// leave the node (and its Subscription the event bridge) first.
	if err := c.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return out, fmt.Errorf("burst %s: delete its namespace: %w", ns, err)
	}
	if _, err := pollValue(ctx, 3*time.Minute, func() (bool, bool) {
		_, err := c.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return true, apierrors.IsNotFound(err)
	}); err != nil {
		return out, fmt.Errorf("burst %s: its namespace not gone: %w\n%s", ns, err, c.Describe(ctx, ns))
	}
	return out, nil
}

// burstRows are the bursts' figures with the warm pool, each anchored on
// the same figure without it (medians of the bursts); none without
// bursts.
func burstRows(pool, none []burstFigures) []figures.Figure {
	if len(pool) == 0 || len(none) == 0 {
		return nil
	}
	med := func(bs []burstFigures, f func(burstFigures) time.Duration) float64 {
		ds := make([]time.Duration, len(bs))
		for i, b := range bs {
			ds[i] = f(b)
		}
		return median(ds).Seconds()
	}
	name := fmt.Sprintf("burst of %d events at one replica (handler %d ms, %d in flight, up to %d replicas)", burstEvents, burstHandlerMs, burstInFlight, burstMaxReplicas)
	const group, without = "real node burst", "without the warm pool, same run"
	var figs []figures.Figure
	for _, r := range []struct {
		what string
		f    func(burstFigures) time.Duration
	}{
		{"the HPA asks for more replicas -> as many serve, with the warm pool", func(b burstFigures) time.Duration { return b.serving - b.scaled }},
		{"first event -> the replicas the HPA asked for serve, with the warm pool", func(b burstFigures) time.Duration { return b.serving }},
		{"first event -> the HPA asks for more replicas (its sync period, not kfn's), with the warm pool", func(b burstFigures) time.Duration { return b.scaled }},
		{"delivery p50, published -> handler called, with the warm pool", func(b burstFigures) time.Duration { return b.p50 }},
		{"delivery p99, published -> handler called, with the warm pool", func(b burstFigures) time.Duration { return b.p99 }},
	} {
		figs = append(figs, figures.Figure{Group: group, Name: fmt.Sprintf("%s: %s (median of %d)", name, r.what, len(pool)), Unit: "s",
			Value: med(pool, r.f), Anchor: without, AnchorValue: med(none, r.f)})
	}
	return figs
}
