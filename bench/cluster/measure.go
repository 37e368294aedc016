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
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/local/dev"
	"github.com/kfn-dev/kfn/test/node/install"
	"github.com/kfn-dev/kfn/test/node/singlenode"
	"github.com/kfn-dev/kfn/test/pkgindex"
)

// coldFunctions are the Functions the cold starts wake, in namespace ns,
// reporting to recorderURL: the copies of each fleet (cold-0, cold-1, ...
// of fleet cold), each with minReplicas 0 and a Subscription to its own
// type (bench.cold0.v1, ...) from source "bench", and warm, a Function
// that stays up. A fleet's Functions run a Node.js or a Python handler,
// with test/pkgindex's package as their inline dependency (loaded before
// the handler serves) or none. Wakes rotate over the copies (fleet), so
// that one copy's way back to zero overlaps the next copies' wakes. A
// handler called with an event reports its id and the moment it was
// called (Date.now(), time.time(): the node's clock is this program's),
// which is when the event was delivered; the report's own trip is not part
// of the wake. Called by HTTP, it reports nothing: the caller times the
// answer.
func coldFunctions(ns, recorderURL string, fleets ...*fleet) string {
	var b strings.Builder
	for _, f := range fleets {
		for i := range f.copies {
			b.WriteString(coldFunction(ns, recorderURL, f, i))
		}
	}
	fmt.Fprintf(&b, `apiVersion: serverless.kyma-project.io/v1alpha2
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
`, ns)
	return b.String()
}

// benchResources are the cold Functions' resources: the limits of the
// chart's default preset (L: 800m of CPU, 1 GiB), which is what a Function
// that names none gets from the chart, and XS's requests (50m, 64Mi), so
// that the 2-core node schedules the wakes' new pods and standby pods
// beside kfn's own. With the XS preset's limit (150m, the test install's
// default) the wakes measured CFS throttling more than kfn: a new pod
// was throttled for 270-860 ms of its start (2026-11-27).
const benchResources = `  resourceConfiguration:
    function:
      resources:
        requests:
          cpu: 50m
          memory: 64Mi
        limits:
          cpu: 800m
          memory: 1Gi
`

// coldFunction is copy i of fleet f's cold Function and its Subscription.
func coldFunction(ns, recorderURL string, f *fleet, i int) string {
	var source, deps string
	if strings.HasPrefix(f.runtime, "python") {
		source = `import os
import time
import urllib.parse
import urllib.request
`
		if f.dependency {
			source += "import kfn_greet\n"
			deps = pkgindex.Package + "==" + pkgindex.Version
		}
		source += `
def main(event, context):
    at = int(time.time() * 1000)
    id = event.get('ce-id')
    if id:
        urllib.request.urlopen(urllib.request.Request(os.environ['RECORDER_URL'] + '/record?id=' + urllib.parse.quote(id) + '&at=' + str(at), method='POST'), timeout=10).close()
    return 'ok'
`
	} else {
		if f.dependency {
			source = "require(\"" + pkgindex.Package + "\");\n"
			deps = fmt.Sprintf(`{"dependencies":{%q:%q}}`, pkgindex.Package, pkgindex.Version)
		}
		source += `module.exports = {
  main: async function (event) {
    const at = Date.now();
    const id = event["ce-id"];
    if (id) {
      await fetch(process.env.RECORDER_URL + "/record?id=" + encodeURIComponent(id) + "&at=" + at, { method: "POST" });
    }
    return "ok";
  }
}
`
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: %[3]s
  namespace: %[1]s
spec:
  runtime: %[4]s
  scaleConfig:
    minReplicas: 0
    maxReplicas: 1
    cooldownPeriod: 5
%[5]s  env:
    - name: RECORDER_URL
      value: %[2]s
  source:
    inline:
`, ns, recorderURL, f.name(i), f.runtime, benchResources)
	if deps != "" {
		fmt.Fprintf(&b, "      dependencies: %q\n", deps)
	}
	b.WriteString("      source: |\n")
	for _, line := range strings.Split(source, "\n") {
		if line != "" {
			b.WriteString("        " + line)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, `---
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  sink: http://%[2]s.%[1]s.svc.cluster.local
  source: bench
  types:
    - %[3]s
---
`, ns, f.name(i), f.typ(i))
	return b.String()
}

// registrySecret is the Secret of a Function's namespace whose .npmrc and
// pip.conf the install container uses (the chart's
// functions.registrySecretName, by default).
const registrySecret = "serverless-package-registry-config"

// recorder notes, for each id a handler reports, the moment the handler
// says it was called (its "at" parameter, Unix milliseconds), or else when
// the report came, and the pod it names (its "pod" parameter), if any.
type recorder struct {
	url  string
	srv  *http.Server
	mu   sync.Mutex
	at   map[string]time.Time
	pods map[string]string
}

func startRecorder(host string) (*recorder, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	r := &recorder{url: "http://" + ln.Addr().String(), at: map[string]time.Time{}, pods: map[string]string{}}
	r.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		at := time.Now()
		if ms, err := strconv.ParseInt(req.URL.Query().Get("at"), 10, 64); err == nil {
			at = time.UnixMilli(ms)
		}
		id := req.URL.Query().Get("id")
		r.mu.Lock()
		if _, ok := r.at[id]; !ok {
			r.at[id] = at
			if pod := req.URL.Query().Get("pod"); pod != "" {
				r.pods[id] = pod
			}
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

// pod returns the pod that reported id, if it said.
func (r *recorder) pod(id string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[id]
	return p, ok
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
func publish(url, typ, id string) error { return publishWith(http.DefaultClient, url, typ, id) }

// publishWith is publish with hc.
func publishWith(hc *http.Client, url, typ, id string) error {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	if err != nil {
		return err
	}
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-type": typ, "ce-source": "bench", "ce-id": id, "content-type": "application/json"} {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
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
	if err := os.WriteFile(filepath.Join(project, "cold.yaml"), []byte(coldFunctions("default", rec.url, &fleet{runtime: "nodejs22", prefix: "cold", copies: 1}, &fleet{runtime: "python312", prefix: "coldpy", copies: 1})), 0o644); err != nil {
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
				if f.Name == "cold-0" && f.Replicas == 0 && f.Ready == 0 {
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
		if err := publish("http://"+addr+"/publish", "bench.cold0.v1", id); err != nil {
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
		if err := get(fmt.Sprintf("http://%s/default/cold-0/?id=dev-http-%d", addr, i)); err != nil {
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

// nodeFigures are the real node's figures: every wake's time, by kind.
type nodeFigures struct {
	// nodeEvent, nodeReady and nodeHTTP are the Node.js Function's wakes
	// on a new pod: by event (published -> delivered, published -> pod
	// Ready) and by HTTP through the gateway (request -> answer); breakdown
	// the event wakes' steps.
	nodeEvent, nodeReady, nodeHTTP []time.Duration
	breakdown                      breakdown
	// poolEvent and poolHTTP are the wakes served by the warm pool;
	// poolBreakdown the event wakes' steps.
	poolEvent, poolHTTP []time.Duration
	poolBreakdown       breakdown
	// The Python Function's wakes, on a new pod and by the warm pool.
	pyEvent, pyHTTP, pyPoolEvent, pyPoolHTTP []time.Duration
	// dep and depPy are the wakes of the same Node.js and Python
	// Functions with a dependency to install.
	dep, depPy   wakes
	service, pod latencies
	// standby is what the idle standby pods use, by runtime.
	standby map[string]standbyCost
	// burstPool and burstNone are the bursts at one replica, with the
	// warm pool and without it (burst.go).
	burstPool, burstNone []burstFigures
}

// wakes are one Function's wakes of each kind: by event and by HTTP, on a
// new pod and by the warm pool.
type wakes struct {
	event, http, poolEvent, poolHTTP []time.Duration
}

// measureNode applies the functions in namespace bench, copies of each
// cold one, and measures trials wakes of each kind, then bursts bursts
// at one replica with the warm pool and as many without (burst.go). The Functions with a
// dependency install it from test/pkgindex's index on the node's address,
// which the namespace's registry config Secret names.
func measureNode(ctx context.Context, c *singlenode.Cluster, trials, copies, bursts int, latency time.Duration, rate int) (nodeFigures, error) {
	var out nodeFigures
	rec, err := startRecorder(c.Config.NodeIP)
	if err != nil {
		return out, err
	}
	defer rec.close()
	index, err := pkgindex.Start(net.JoinHostPort(c.Config.NodeIP, "0"))
	if err != nil {
		return out, err
	}
	defer index.Close()
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
	if _, err := c.Clientset.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: registrySecret},
		StringData: map[string]string{".npmrc": index.NPMRC(), "pip.conf": index.PipConf()},
	}, metav1.CreateOptions{}); err != nil {
		return out, fmt.Errorf("registry config Secret: %w", err)
	}
	node := &fleet{runtime: "nodejs22", prefix: "cold", copies: copies}
	py := &fleet{runtime: "python312", prefix: "coldpy", copies: copies}
	dep := &fleet{runtime: "nodejs22", prefix: "colddep", dependency: true, copies: copies}
	depPy := &fleet{runtime: "python312", prefix: "colddeppy", dependency: true, copies: copies}
	if err := c.Apply(ctx, []byte(coldFunctions(ns, rec.url, node, py, dep, depPy))); err != nil {
		return out, err
	}
	publisher, err := serviceURL(ctx, c, install.Namespace, "kfn-publisher")
	if err != nil {
		return out, err
	}
	gateway, err := serviceURL(ctx, c, install.Namespace, "kfn-gateway")
	if err != nil {
		return out, err
	}
	token, err := invoker(ctx, c, ns)
	if err != nil {
		return out, err
	}
	w := &waker{c: c, ns: ns, rec: rec, publisher: publisher, gateway: gateway, token: token}
	// asked is how often npm and pip asked the index for the dependency
	// so far: once per install, none when the cache serves it.
	asked := func() int {
		return index.Requests(pkgindex.NPM, pkgindex.Package) + index.Requests(pkgindex.PyPI, pkgindex.Package)
	}
	var depBreakdown breakdown
	notPooled := map[*fleet]bool{}
	for i := range trials {
		tl, err := w.event(ctx, node, fmt.Sprintf("node-event-%d", i), false)
		if err != nil {
			return out, err
		}
		out.breakdown = append(out.breakdown, tl)
		out.nodeEvent = append(out.nodeEvent, tl[stepDelivered])
		out.nodeReady = append(out.nodeReady, tl[stepReady])
		if tl, err = w.event(ctx, py, fmt.Sprintf("py-event-%d", i), false); err != nil {
			return out, err
		}
		out.pyEvent = append(out.pyEvent, tl[stepDelivered])
		d, err := w.http(ctx, node, fmt.Sprintf("node-http-%d", i), false)
		if err != nil {
			return out, err
		}
		out.nodeHTTP = append(out.nodeHTTP, d)
		if d, err = w.http(ctx, py, fmt.Sprintf("py-http-%d", i), false); err != nil {
			return out, err
		}
		out.pyHTTP = append(out.pyHTTP, d)
		fmt.Fprintf(os.Stderr, "bench/cluster: new pod wakes %d: Node.js event %s (pod Ready %s), HTTP %s; Python event %s, HTTP %s\n", i+1,
			ms3(out.nodeEvent[i]), ms3(out.nodeReady[i]), ms3(out.nodeHTTP[i]), ms3(out.pyEvent[i]), ms3(out.pyHTTP[i]))

		before := asked()
		if tl, err = w.event(ctx, dep, fmt.Sprintf("dep-event-%d", i), false); err != nil {
			return out, err
		}
		depBreakdown = append(depBreakdown, tl)
		out.dep.event = append(out.dep.event, tl[stepDelivered])
		if tl, err = w.event(ctx, depPy, fmt.Sprintf("dep-py-event-%d", i), false); err != nil {
			return out, err
		}
		out.depPy.event = append(out.depPy.event, tl[stepDelivered])
		if d, err = w.http(ctx, dep, fmt.Sprintf("dep-http-%d", i), false); err != nil {
			return out, err
		}
		out.dep.http = append(out.dep.http, d)
		if d, err = w.http(ctx, depPy, fmt.Sprintf("dep-py-http-%d", i), false); err != nil {
			return out, err
		}
		out.depPy.http = append(out.depPy.http, d)
		fmt.Fprintf(os.Stderr, "bench/cluster: new pod wakes with a dependency %d: Node.js event %s, HTTP %s; Python event %s, HTTP %s; the index was asked %d times\n", i+1,
			ms3(out.dep.event[i]), ms3(out.dep.http[i]), ms3(out.depPy.event[i]), ms3(out.depPy.http[i]), asked()-before)
	}
	out.breakdown.print()
	depBreakdown.printOf("wake by event with a dependency", steps)

	// The same wakes, served by the warm pool: the namespace asks for a
	// standby pod of each shape (the install keeps none unless asked).
	if err := c.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  annotations:
    kfn.dev/warm-pool-size: "1"
`, ns))); err != nil {
		return out, err
	}
	for i := range trials {
		tl, err := w.event(ctx, node, fmt.Sprintf("pool-event-%d", i), true)
		if err != nil {
			return out, err
		}
		out.poolBreakdown = append(out.poolBreakdown, tl)
		out.poolEvent = append(out.poolEvent, tl[stepPoolDelivered])
		if tl, err = w.event(ctx, py, fmt.Sprintf("py-pool-event-%d", i), true); err != nil {
			return out, err
		}
		out.pyPoolEvent = append(out.pyPoolEvent, tl[stepPoolDelivered])
		d, err := w.http(ctx, node, fmt.Sprintf("pool-http-%d", i), true)
		if err != nil {
			return out, err
		}
		out.poolHTTP = append(out.poolHTTP, d)
		if d, err = w.http(ctx, py, fmt.Sprintf("py-pool-http-%d", i), true); err != nil {
			return out, err
		}
		out.pyPoolHTTP = append(out.pyPoolHTTP, d)
		fmt.Fprintf(os.Stderr, "bench/cluster: warm pool wakes %d: Node.js event %s, HTTP %s; Python event %s, HTTP %s\n", i+1,
			ms3(out.poolEvent[i]), ms3(out.poolHTTP[i]), ms3(out.pyPoolEvent[i]), ms3(out.pyPoolHTTP[i]))

		before := asked()
		for _, wk := range []struct {
			f       *fleet
			id      string
			byEvent bool
			ds      *[]time.Duration
		}{
			{dep, fmt.Sprintf("dep-pool-event-%d", i), true, &out.dep.poolEvent},
			{depPy, fmt.Sprintf("dep-py-pool-event-%d", i), true, &out.depPy.poolEvent},
			{dep, fmt.Sprintf("dep-pool-http-%d", i), false, &out.dep.poolHTTP},
			{depPy, fmt.Sprintf("dep-py-pool-http-%d", i), false, &out.depPy.poolHTTP},
		} {
			if notPooled[wk.f] {
				continue
			}
			var d time.Duration
			if wk.byEvent {
				var tl map[step]time.Duration
				if tl, err = w.event(ctx, wk.f, wk.id, true); err == nil {
					d = tl[stepPoolDelivered]
				}
			} else {
				d, err = w.http(ctx, wk.f, wk.id, true)
			}
			if errors.Is(err, errNotPooled) {
				// A Function with a dependency that the pool does not
				// serve: its rows are left out, and the log says why.
				notPooled[wk.f] = true
				fmt.Fprintf(os.Stderr, "bench/cluster: %s: the warm pool did not serve it (%v; %s): its warm pool rows are left out\n",
					wk.f.prefix, err, w.poolReason(ctx, wk.f.name(0)))
				continue
			}
			if err != nil {
				return out, err
			}
			*wk.ds = append(*wk.ds, d)
		}
		fmt.Fprintf(os.Stderr, "bench/cluster: warm pool wakes with a dependency %d: Node.js event %s, HTTP %s; Python event %s, HTTP %s; the index was asked %d times\n", i+1,
			lastOf(out.dep.poolEvent), lastOf(out.dep.poolHTTP), lastOf(out.depPy.poolEvent), lastOf(out.depPy.poolHTTP), asked()-before)
	}
	out.poolBreakdown.printOf("warm pool wake by event", poolSteps)
	// The pool's cost: its pods idle for a minute after the last wake
	// (the kubelet's CPU rate is over its last sampling window).
	if out.standby, err = measureStandbyCost(ctx, c, ns, time.Minute); err != nil {
		return out, err
	}
	for runtime, sc := range out.standby {
		fmt.Fprintf(os.Stderr, "bench/cluster: idle standby pods of %s: %d, median %.1f MiB, %.2f millicores\n", runtime, sc.pods, sc.memoryMiB, sc.cpuMillicores)
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

	// Bursts at one replica, without and with the warm pool, in turn,
	// each in a namespace of its own (deleted after it).
	for i := range bursts {
		for _, b := range []struct {
			ns      string
			standby int
			out     *[]burstFigures
		}{
			{fmt.Sprintf("burst-none-%d", i), 0, &out.burstNone},
			{fmt.Sprintf("burst-pool-%d", i), burstStandby, &out.burstPool},
		} {
			f, err := measureBurst(ctx, c, rec, publisher, b.ns, b.standby)
			if err != nil {
				// The wakes measured so far are kept: the bursts' rows
				// are left out (burstRows needs both kinds), and the log
				// says why.
				fmt.Fprintf(os.Stderr, "bench/cluster: %v\nbench/cluster: the burst rows are left out\n", err)
				out.burstNone, out.burstPool = nil, nil
				return out, nil
			}
			*b.out = append(*b.out, f)
		}
	}
	return out, nil
}

// lastOf is the last of ds for the log, or "-".
func lastOf(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	return ms3(ds[len(ds)-1])
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
