package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/local/dev"
	"github.com/kfn-dev/kfn/test/clusterinstall"
	"github.com/kfn-dev/kfn/test/singlenode"
)

// coldFunction is the function every cold start wakes, in namespace ns,
// reporting to recorderURL: a Node.js handler with minReplicas 0 and a
// Subscription to bench.cold.v1 from source "bench"; coldpy the same in
// Python (bench.coldpy.v1), and warm a Function that stays up.
func coldFunction(ns, recorderURL string) string {
	return fmt.Sprintf(`apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: cold
  namespace: %[1]s
spec:
  runtime: nodejs22
  scaleConfig:
    minReplicas: 0
    maxReplicas: 1
    cooldownPeriod: 5
  env:
    - name: RECORDER_URL
      value: %[2]s
  source:
    inline:
      source: |
        module.exports = {
          main: async function (event) {
            const id = event["ce-id"] || event.extensions.request.query.id || "";
            await fetch(process.env.RECORDER_URL + "/record?id=" + encodeURIComponent(id), { method: "POST" });
            return "ok";
          }
        }
---
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata:
  name: cold
  namespace: %[1]s
spec:
  sink: http://cold.%[1]s.svc.cluster.local
  source: bench
  types:
    - bench.cold.v1
---
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: coldpy
  namespace: %[1]s
spec:
  runtime: python312
  scaleConfig:
    minReplicas: 0
    maxReplicas: 1
    cooldownPeriod: 5
  env:
    - name: RECORDER_URL
      value: %[2]s
  source:
    inline:
      source: |
        import os
        import urllib.parse
        import urllib.request

        def main(event, context):
            id = event.get('ce-id') or ''
            urllib.request.urlopen(urllib.request.Request(os.environ['RECORDER_URL'] + '/record?id=' + urllib.parse.quote(id), method='POST'), timeout=10).close()
            return 'ok'
---
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata:
  name: coldpy
  namespace: %[1]s
spec:
  sink: http://coldpy.%[1]s.svc.cluster.local
  source: bench
  types:
    - bench.coldpy.v1
---
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: warm
  namespace: %[1]s
spec:
  runtime: nodejs22
  source:
    inline:
      source: |
        module.exports = { main: async () => "ok" }
`, ns, recorderURL)
}

// recorder notes when the function reported each id.
type recorder struct {
	url string
	srv *http.Server
	mu  sync.Mutex
	at  map[string]time.Time
}

func startRecorder(host string) (*recorder, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	r := &recorder{url: "http://" + ln.Addr().String(), at: map[string]time.Time{}}
	r.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		if _, ok := r.at[req.URL.Query().Get("id")]; !ok {
			r.at[req.URL.Query().Get("id")] = time.Now()
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *recorder) close() { _ = r.srv.Close() }

// wait returns when id was reported, polling for up to d.
func (r *recorder) wait(ctx context.Context, id string, d time.Duration) (time.Time, error) {
	return pollValue(ctx, d, func() (time.Time, bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		t, ok := r.at[id]
		return t, ok
	})
}

// pollValue polls get every 10 ms until it reports ok or d passes.
func pollValue[T any](ctx context.Context, d time.Duration, get func() (T, bool)) (T, error) {
	deadline := time.Now().Add(d)
	for {
		if v, ok := get(); ok {
			return v, nil
		}
		if time.Now().After(deadline) {
			var zero T
			return zero, fmt.Errorf("not within %s", d)
		}
		select {
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// percentile is the p-th percentile (0-100) of ds, nearest rank.
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[i]
}

// publish posts a binary-mode CloudEvent and requires it stored.
func publish(url, typ, id string) error {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	if err != nil {
		return err
	}
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-type": typ, "ce-source": "bench", "ce-id": id, "content-type": "application/json"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("publish %s: %s %s", id, resp.Status, body)
	}
	return nil
}

// get returns nil after a 200 answer.
func get(url string) error { return getAs(url, "") }

// getAs is get with a bearer token, when not empty.
func getAs(url, token string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s %s", url, resp.Status, body)
	}
	return nil
}

// devFigures are kfn dev's cold starts (medians).
type devFigures struct{ event, http time.Duration }

// measureDev runs kfn dev with the cold function and wakes it from zero by
// event and by HTTP, trials times each.
func measureDev(ctx context.Context, root string, trials int) (devFigures, error) {
	rec, err := startRecorder("127.0.0.1")
	if err != nil {
		return devFigures{}, err
	}
	defer rec.close()
	dir, err := os.MkdirTemp("", "kfn-bench-cluster-")
	if err != nil {
		return devFigures{}, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "kfn")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kfn")
	build.Dir, build.Stderr = root, os.Stderr
	if err := build.Run(); err != nil {
		return devFigures{}, fmt.Errorf("build kfn: %w", err)
	}
	project := filepath.Join(dir, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		return devFigures{}, err
	}
	if err := os.WriteFile(filepath.Join(project, "cold.yaml"), []byte(coldFunction("default", rec.url)), 0o644); err != nil {
		return devFigures{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return devFigures{}, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, "dev", "--plain", "--no-watch", "--addr", addr, "--cooldown", "1s", project)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	if err := cmd.Start(); err != nil {
		return devFigures{}, err
	}
	defer func() { cancel(); _ = cmd.Wait() }()

	atZero := func() error {
		_, err := pollValue(ctx, 2*time.Minute, func() (bool, bool) {
			st, err := devStatus(addr)
			if err != nil || !st.Ready {
				return false, false
			}
			for _, f := range st.Functions {
				if f.Name == "cold" && f.Replicas == 0 && f.Ready == 0 {
					return true, true
				}
			}
			return false, false
		})
		return err
	}
	var events, https []time.Duration
	for i := range trials {
		if err := atZero(); err != nil {
			return devFigures{}, fmt.Errorf("cold at zero: %w", err)
		}
		id := fmt.Sprintf("dev-event-%d", i)
		start := time.Now()
		if err := publish("http://"+addr+"/publish", "bench.cold.v1", id); err != nil {
			return devFigures{}, err
		}
		at, err := rec.wait(ctx, id, time.Minute)
		if err != nil {
			return devFigures{}, fmt.Errorf("event %s: %w", id, err)
		}
		events = append(events, at.Sub(start))
		if err := atZero(); err != nil {
			return devFigures{}, fmt.Errorf("cold back at zero: %w", err)
		}
		start = time.Now()
		if err := get(fmt.Sprintf("http://%s/default/cold/?id=dev-http-%d", addr, i)); err != nil {
			return devFigures{}, err
		}
		https = append(https, time.Since(start))
		fmt.Fprintf(os.Stderr, "bench/cluster: kfn dev cold start %d: event %s, HTTP %s\n", i+1, events[i].Round(time.Millisecond), https[i].Round(time.Millisecond))
	}
	return devFigures{event: median(events), http: median(https)}, nil
}

func devStatus(addr string) (dev.Status, error) {
	var st dev.Status
	resp, err := http.Get("http://" + addr + dev.AdminPrefix + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// latencies are the p50 and p99 of a constant-rate load.
type latencies struct{ p50, p99 time.Duration }

// load sends rate requests per second to url for d, one at a time on one
// keep-alive connection, and returns the latency percentiles.
func load(ctx context.Context, url string, rate int, d time.Duration) (latencies, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(d)
	var ds []time.Duration
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return latencies{}, ctx.Err()
		case <-tick.C:
		}
		start := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			return latencies{}, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return latencies{}, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return latencies{p50: ds[len(ds)/2], p99: ds[len(ds)*99/100]}, nil
}

// nodeFigures are the real node's figures.
type nodeFigures struct {
	eventReady, eventDelivered, http time.Duration
	eventDelivered99, http99         time.Duration
	breakdown                        breakdown
	service, pod                     latencies
	// poolEvent and poolHTTP are the wakes served by the warm pool;
	// poolBreakdown the event wakes' steps.
	poolEvent, poolHTTP []time.Duration
	poolBreakdown       breakdown
	// pyEvent and pyPoolEvent are the Python Function's wakes by event,
	// on a new pod and by the warm pool.
	pyEvent, pyPoolEvent []time.Duration
}

// measureNode applies the functions in namespace bench and measures.
func measureNode(ctx context.Context, c *singlenode.Cluster, trials int, latency time.Duration, rate int) (nodeFigures, error) {
	var out nodeFigures
	rec, err := startRecorder(c.Config.NodeIP)
	if err != nil {
		return out, err
	}
	defer rec.close()
	const ns = "bench"
	if err := c.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    pod-security.kubernetes.io/enforce: restricted
`, ns))); err != nil {
		return out, err
	}
	if err := c.Apply(ctx, []byte(coldFunction(ns, rec.url))); err != nil {
		return out, err
	}
	publisher, err := serviceURL(ctx, c, clusterinstall.Namespace, "kfn-publisher")
	if err != nil {
		return out, err
	}
	gateway, err := serviceURL(ctx, c, clusterinstall.Namespace, "kfn-gateway")
	if err != nil {
		return out, err
	}
	token, err := invoker(ctx, c, ns)
	if err != nil {
		return out, err
	}
	fnAtZero := func(fn string) error {
		_, err := pollValue(ctx, 3*time.Minute, func() (bool, bool) {
			pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "serverless.kyma-project.io/function-name=" + fn})
			d, derr := c.Clientset.AppsV1().Deployments(ns).Get(ctx, fn, metav1.GetOptions{})
			ok := err == nil && derr == nil && len(pods.Items) == 0 && d.Spec.Replicas != nil && *d.Spec.Replicas == 0
			return ok, ok
		})
		return err
	}
	atZero := func() error { return fnAtZero("cold") }
	// pyWake publishes one event to coldpy at zero and returns when it
	// was delivered.
	pyWake := func(id string) (time.Duration, error) {
		if err := fnAtZero("coldpy"); err != nil {
			return 0, fmt.Errorf("coldpy at zero: %w", err)
		}
		start := time.Now()
		if err := publish(publisher+"/publish", "bench.coldpy.v1", id); err != nil {
			return 0, err
		}
		at, err := rec.wait(ctx, id, 2*time.Minute)
		if err != nil {
			return 0, fmt.Errorf("event %s: %w\n%s", id, err, c.Describe(ctx, ns))
		}
		return at.Sub(start), nil
	}
	podReady := func(since time.Time) (time.Duration, error) {
		return pollValue(ctx, 3*time.Minute, func() (time.Duration, bool) {
			d, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "cold", metav1.GetOptions{})
			if err != nil || d.Status.ReadyReplicas < 1 {
				return 0, false
			}
			return time.Since(since), true
		})
	}
	var ready, delivered, https []time.Duration
	for i := range trials {
		if err := atZero(); err != nil {
			return out, fmt.Errorf("cold at zero: %w\n%s", err, c.Describe(ctx, ns))
		}
		id := fmt.Sprintf("node-event-%d", i)
		tl, stopWatch, err := watchWake(ctx, c, ns, "cold")
		if err != nil {
			return out, err
		}
		start := time.Now()
		tl.begin(start)
		if err := publish(publisher+"/publish", "bench.cold.v1", id); err != nil {
			stopWatch()
			return out, err
		}
		r, err := podReady(start)
		if err != nil {
			stopWatch()
			return out, fmt.Errorf("event %s: no ready pod: %w", id, err)
		}
		at, err := rec.wait(ctx, id, 2*time.Minute)
		if err != nil {
			stopWatch()
			return out, fmt.Errorf("event %s: %w\n%s", id, err, c.Describe(ctx, ns))
		}
		tl.see(stepDelivered)
		if _, err := pollValue(ctx, 10*time.Second, func() (bool, bool) { _, ok := tl.since(); return ok, ok }); err != nil {
			fmt.Fprintf(os.Stderr, "bench/cluster: wake %d: a step was not seen: %v\n", i+1, tl.at)
		}
		stopWatch()
		w, _ := tl.since()
		w[stepDelivered] = at.Sub(start)
		out.breakdown = append(out.breakdown, w)
		fmt.Fprintf(os.Stderr, "bench/cluster: wake %d timeline (ms): %s\n", i+1, format(w))
		ready, delivered = append(ready, r), append(delivered, at.Sub(start))
		if err := atZero(); err != nil {
			return out, fmt.Errorf("cold back at zero: %w", err)
		}
		start = time.Now()
		if err := getAs(fmt.Sprintf("%s/%s/cold/?id=node-http-%d", gateway, ns, i), token); err != nil {
			return out, err
		}
		https = append(https, time.Since(start))
		fmt.Fprintf(os.Stderr, "bench/cluster: real node cold start %d: event: pod ready %s, delivered %s; HTTP %s\n", i+1,
			r.Round(time.Millisecond), delivered[i].Round(time.Millisecond), https[i].Round(time.Millisecond))
	}
	out.eventReady, out.eventDelivered, out.http = median(ready), median(delivered), median(https)
	out.eventDelivered99, out.http99 = percentile(delivered, 99), percentile(https, 99)
	out.breakdown.print()
	for i := range trials {
		d, err := pyWake(fmt.Sprintf("py-event-%d", i))
		if err != nil {
			return out, err
		}
		out.pyEvent = append(out.pyEvent, d)
		fmt.Fprintf(os.Stderr, "bench/cluster: Python cold start %d: delivered %s\n", i+1, d.Round(time.Millisecond))
	}

	// The same wakes, served by the warm pool: the namespace asks for a
	// standby pod (the install keeps none unless asked).
	if err := c.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  annotations:
    kfn.dev/warm-pool-size: "1"
`, ns))); err != nil {
		return out, err
	}
	// standbyOf waits for a started standby pod of the runtime.
	standbyOf := func(runtime string) error {
		_, err := pollValue(ctx, 3*time.Minute, func() (bool, bool) {
			pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "kfn.dev/pool-shape"})
			if err != nil {
				return false, false
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) == 0 || !ptr.Deref(p.Status.ContainerStatuses[0].Started, false) {
					continue
				}
				for _, e := range p.Spec.Containers[0].Env {
					if e.Name == "FUNC_RUNTIME" && e.Value == runtime {
						return true, true
					}
				}
			}
			return false, false
		})
		return err
	}
	standby := func() error { return standbyOf("nodejs22") }
	for i := range trials {
		if err := atZero(); err != nil {
			return out, fmt.Errorf("cold at zero: %w", err)
		}
		if err := standby(); err != nil {
			return out, fmt.Errorf("no standby pod: %w\n%s", err, c.Describe(ctx, ns))
		}
		id := fmt.Sprintf("pool-event-%d", i)
		tl, stopWatch, err := watchPoolWake(ctx, c, ns, "cold")
		if err != nil {
			return out, err
		}
		start := time.Now()
		tl.begin(start)
		if err := publish(publisher+"/publish", "bench.cold.v1", id); err != nil {
			stopWatch()
			return out, err
		}
		at, err := rec.wait(ctx, id, 2*time.Minute)
		if err != nil {
			stopWatch()
			return out, fmt.Errorf("event %s: %w\n%s", id, err, c.Describe(ctx, ns))
		}
		tl.see(stepPoolDelivered)
		if _, err := pollValue(ctx, 10*time.Second, func() (bool, bool) { _, ok := tl.sinceOf(poolSteps); return ok, ok }); err != nil {
			fmt.Fprintf(os.Stderr, "bench/cluster: pool wake %d: a step was not seen: %v\n", i+1, tl.at)
		}
		stopWatch()
		w, _ := tl.sinceOf(poolSteps)
		w[stepPoolDelivered] = at.Sub(start)
		out.poolBreakdown = append(out.poolBreakdown, w)
		fmt.Fprintf(os.Stderr, "bench/cluster: pool wake %d timeline (ms): %s\n", i+1, formatOf(w, poolSteps))
		out.poolEvent = append(out.poolEvent, at.Sub(start))
		if err := atZero(); err != nil {
			return out, fmt.Errorf("cold back at zero: %w", err)
		}
		if err := standby(); err != nil {
			return out, fmt.Errorf("no standby pod: %w", err)
		}
		start = time.Now()
		if err := getAs(fmt.Sprintf("%s/%s/cold/?id=pool-http-%d", gateway, ns, i), token); err != nil {
			return out, err
		}
		out.poolHTTP = append(out.poolHTTP, time.Since(start))
		fmt.Fprintf(os.Stderr, "bench/cluster: warm pool wake %d: event delivered %s; HTTP %s\n", i+1,
			out.poolEvent[i].Round(time.Millisecond), out.poolHTTP[i].Round(time.Millisecond))
	}
	out.poolBreakdown.printOf("warm pool wake by event", poolSteps)
	for i := range trials {
		if err := standbyOf("python312"); err != nil {
			return out, fmt.Errorf("no Python standby pod: %w", err)
		}
		d, err := pyWake(fmt.Sprintf("py-pool-event-%d", i))
		if err != nil {
			return out, err
		}
		out.pyPoolEvent = append(out.pyPoolEvent, d)
		fmt.Fprintf(os.Stderr, "bench/cluster: Python warm pool wake %d: delivered %s\n", i+1, d.Round(time.Millisecond))
	}

	svc, pod, err := warmAddresses(ctx, c, ns)
	if err != nil {
		return out, err
	}
	if out.service, err = load(ctx, svc, rate, latency); err != nil {
		return out, err
	}
	if out.pod, err = load(ctx, pod, rate, latency); err != nil {
		return out, err
	}
	return out, nil
}

// warmAddresses waits for the warm function and returns its Service's and
// its pod's URLs.
func warmAddresses(ctx context.Context, c *singlenode.Cluster, ns string) (string, string, error) {
	pod, err := pollValue(ctx, 3*time.Minute, func() (corev1.Pod, bool) {
		pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "serverless.kyma-project.io/function-name=warm"})
		if err != nil {
			return corev1.Pod{}, false
		}
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					return p, true
				}
			}
		}
		return corev1.Pod{}, false
	})
	if err != nil {
		return "", "", errors.New("the warm function has no ready pod")
	}
	svc, err := serviceURL(ctx, c, ns, "warm")
	if err != nil {
		return "", "", err
	}
	podURL := "http://" + net.JoinHostPort(pod.Status.PodIP, "8080")
	// Both answer before the load starts (kube-proxy's rules may trail).
	for _, u := range []string{svc, podURL} {
		if _, err := pollValue(ctx, time.Minute, func() (bool, bool) { return true, get(u) == nil }); err != nil {
			return "", "", fmt.Errorf("%s does not answer", u)
		}
	}
	return svc, podURL, nil
}

func serviceURL(ctx context.Context, c *singlenode.Cluster, ns, name string) (string, error) {
	svc := &corev1.Service{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		return "", fmt.Errorf("service %s/%s: %w", ns, name, err)
	}
	if len(svc.Spec.Ports) == 0 {
		return "", fmt.Errorf("service %s/%s has no port", ns, name)
	}
	return fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port), nil
}

// invoker returns a bearer token of audience kfn for a ServiceAccount of ns
// bound to the edit role there, which the chart gives functions/invoke:
// the gateway asks who calls (eventbridge.gateway.auth: kubernetes).
func invoker(ctx context.Context, c *singlenode.Cluster, ns string) (string, error) {
	if err := c.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: bench-invoker
  namespace: %[1]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: bench-invoker
  namespace: %[1]s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: edit
subjects:
  - kind: ServiceAccount
    name: bench-invoker
    namespace: %[1]s
`, ns))); err != nil {
		return "", err
	}
	tr, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "bench-invoker", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"kfn"}, ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of the bench's invoker: %w", err)
	}
	return tr.Status.Token, nil
}
