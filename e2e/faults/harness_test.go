package faults_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/stream"
	"github.com/kfn-dev/kfn/local/supervisor"
	"github.com/kfn-dev/kfn/runtimes"
)

// Bounds of the waits of the suite. Generous: the machine is shared.
const (
	startBound   = 30 * time.Second
	deliverBound = 90 * time.Second
	tick         = 10 * time.Millisecond
)

// syncBuffer collects a child's output; safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// child is a process run from this test binary in one of its roles.
type child struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// startChild runs the test binary in role with args; it is killed when the
// test ends, and its output is shown if the test failed.
func startChild(t *testing.T, name, role string, env []string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the suite
	require.NoError(t, cmd.Start(), "start %s", name)
	c := &child{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
		if t.Failed() {
			t.Logf("%s output (tail):\n%s", name, tail(out.String(), 3000))
		}
	})
	return c
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// signal sends sig and waits until the process is gone.
func (c *child) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(sig))
	select {
	case <-c.done:
	case <-time.After(startBound):
		t.Fatalf("%s did not exit after %s", c.name, sig)
	}
}

// waitOutput waits until the output matches re and returns the first
// submatch.
func (c *child) waitOutput(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(startBound)
	for {
		if m := re.FindStringSubmatch(c.out.String()); m != nil {
			return m[len(m)-1]
		}
		select {
		case <-c.done:
			t.Fatalf("%s exited before it printed %s: %s", c.name, re, tail(c.out.String(), 3000))
		case <-time.After(tick): // polling a child's output
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %s within %s", c.name, re, startBound)
		}
	}
}

// natsServer is a NATS JetStream server in a child process with file
// storage, restartable on the same port and store.
type natsServer struct {
	port int
	dir  string
	proc *child
}

var natsReady = regexp.MustCompile(`nats ready on (\S+)`)

func startNATS(t *testing.T) *natsServer {
	t.Helper()
	n := &natsServer{port: freePort(t), dir: t.TempDir()}
	n.start(t)
	return n
}

func (n *natsServer) start(t *testing.T) {
	t.Helper()
	n.proc = startChild(t, "nats", roleNATS, []string{natsPortEnv + "=" + strconv.Itoa(n.port), natsDirEnv + "=" + n.dir})
	n.proc.waitOutput(t, natsReady)
}

func (n *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// restart stops the server with sig (SIGTERM: a clean shutdown; SIGKILL:
// a crash) and starts it again on the same port and store.
func (n *natsServer) restart(t *testing.T, sig syscall.Signal) {
	t.Helper()
	n.proc.signal(t, sig)
	n.start(t)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// connect returns a JetStream client that reconnects forever.
func connect(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// function is a Node.js function run by kfn dev's process supervisor, the
// real host serving a handler that answers 200, or after
// slowFor when the file slowFile exists.
type function struct {
	pool     *supervisor.Pool
	slowFile string

	mu      sync.Mutex
	changed chan struct{}
}

const handlerJS = `const fs = require('node:fs');
module.exports = {
  main: async function (event, context) {
    if (fs.existsSync(process.env.FAULTS_SLOW_FILE)) {
      await new Promise((resolve) => setTimeout(resolve, Number(process.env.FAULTS_SLOW_MS)));
    }
    return 'ok';
  },
};
`

// slowFor is how long the function takes while slow: longer than the
// dispatcher's request timeout in the slow-sink scenario.
const slowFor = 3 * time.Second

func startFunction(t *testing.T, replicas int) *function {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skipf("node not installed: %v", err)
	}
	root := t.TempDir()
	hostDir, err := runtimes.WriteHost(root)
	require.NoError(t, err)
	fnDir := filepath.Join(root, "fn")
	require.NoError(t, os.MkdirAll(fnDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(fnDir, "handler.js"), []byte(handlerJS), 0o600))
	rt, err := runtimes.Lookup("nodejs22")
	require.NoError(t, err)
	env, err := rt.Env(runtimes.Config{FunctionName: "fn", Namespace: "default", FunctionDir: fnDir, ListenFD: 3, Timeout: time.Minute})
	require.NoError(t, err)
	f := &function{slowFile: filepath.Join(root, "slow"), changed: make(chan struct{})}
	kv := []string{"FAULTS_SLOW_FILE=" + f.slowFile, "FAULTS_SLOW_MS=" + strconv.Itoa(int(slowFor.Milliseconds()))}
	for _, e := range env {
		kv = append(kv, e.Name+"="+e.Value)
	}
	logs := &syncBuffer{}
	f.pool = supervisor.NewPool("fn", logs, supervisor.PoolOptions{
		DrainGrace: 10 * time.Second, DrainDelay: 100 * time.Millisecond, RestartDelay: 50 * time.Millisecond,
		OnChange: f.notify,
	})
	t.Cleanup(func() {
		f.pool.Stop()
		if t.Failed() {
			t.Logf("function output (tail):\n%s", tail(logs.String(), 3000))
		}
	})
	ctx := context.Background()
	require.NoError(t, f.pool.Update(ctx, supervisor.Spec{Argv: rt.Command(hostDir), Env: kv, Dir: fnDir, HealthPath: runtimes.HealthPath}))
	require.NoError(t, f.pool.Scale(ctx, replicas))
	return f
}

func (f *function) notify() {
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// Ready is dispatcher.Endpoints from the pool, as kfn dev answers it: the
// function's Service is ready while a process of it is.
func (f *function) Ready(_, _ string) (bool, <-chan struct{}) {
	f.mu.Lock()
	ch := f.changed
	f.mu.Unlock()
	return len(f.pool.Endpoints()) > 0, ch
}

var _ dispatcher.Endpoints = (*function)(nil)

func (f *function) setSlow(t *testing.T, slow bool) {
	t.Helper()
	if slow {
		require.NoError(t, os.WriteFile(f.slowFile, nil, 0o600))
	} else {
		require.NoError(t, os.Remove(f.slowFile))
	}
}

// service stands for the function's Kubernetes Service: it forwards each
// delivery to a ready process, round robin, and answers 503 when there is
// none (the refused connection of a Service without endpoints). It records
// the id of every event the function answered 2xx to: what was delivered.
type service struct {
	fn     *function
	srv    *httptest.Server
	client *http.Client
	next   atomic.Uint64

	mu        sync.Mutex
	delivered map[string]int
	failed    map[string]int // by reason, for the report
}

func startService(t *testing.T, fn *function) *service {
	t.Helper()
	s := &service{fn: fn, client: &http.Client{Transport: dispatcher.NewTransport()}, delivered: map[string]int{}, failed: map[string]int{}}
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *service) fail(w http.ResponseWriter, code int, reason string) {
	s.mu.Lock()
	s.failed[reason]++
	s.mu.Unlock()
	http.Error(w, reason, code)
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	addrs := s.fn.pool.Endpoints()
	if len(addrs) == 0 {
		s.fail(w, http.StatusServiceUnavailable, "no ready process")
		return
	}
	addr := addrs[int(s.next.Add(1)%uint64(len(addrs)))]
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "read body")
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		s.fail(w, http.StatusInternalServerError, "build request")
		return
	}
	req.Header = r.Header.Clone()
	resp, err := s.client.Do(req)
	if err != nil {
		reason := "process unreachable"
		if r.Context().Err() != nil {
			reason = "dispatcher gave up (timeout)"
		}
		s.fail(w, http.StatusBadGateway, reason)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		s.mu.Lock()
		s.delivered[r.Header.Get("Ce-Id")]++
		s.mu.Unlock()
	} else {
		s.mu.Lock()
		s.failed["function answered "+strconv.Itoa(resp.StatusCode)]++
		s.mu.Unlock()
	}
	w.WriteHeader(resp.StatusCode)
}

func (s *service) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.delivered)
}

func (s *service) failures(reason string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed[reason]
}

// load publishes events with unique ids at a steady rate over HTTP, each
// retried (same id: publishing is idempotent) until it is answered 2xx.
type load struct {
	url  string
	stop chan struct{}
	wg   sync.WaitGroup
	seq  atomic.Int64

	mu      sync.Mutex
	acked   map[string]bool
	answers map[string]int // status code or error, for the report
}

// publishers bounds the publish requests in flight.
const publishers = 64

func startLoad(t *testing.T, publishURL string, perSecond int) *load {
	t.Helper()
	l := &load{url: publishURL, stop: make(chan struct{}), acked: map[string]bool{}, answers: map[string]int{}}
	client := &http.Client{Timeout: 15 * time.Second}
	sem := make(chan struct{}, publishers)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tk := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tk.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tk.C:
			}
			select {
			case sem <- struct{}{}:
			case <-l.stop:
				return
			}
			id := "e-" + strconv.FormatInt(l.seq.Add(1), 10)
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer func() { <-sem }()
				l.publish(client, id)
			}()
		}
	}()
	t.Cleanup(l.finish)
	return l
}

// publish sends one event until it is stored, or gives up 60s after the
// load stopped; an event never answered 2xx is not counted as published.
func (l *load) publish(client *http.Client, id string) {
	var deadline <-chan time.Time
	for {
		req, err := http.NewRequest(http.MethodPost, l.url+"/publish", strings.NewReader(`{"id":"`+id+`"}`))
		if err != nil {
			panic(err)
		}
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Id", id)
		req.Header.Set("Ce-Source", "shop")
		req.Header.Set("Ce-Type", "order.created.v1")
		req.Header.Set("Content-Type", "application/json")
		answer := ""
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answer = strconv.Itoa(resp.StatusCode)
		} else {
			answer = "error"
		}
		l.mu.Lock()
		l.answers[answer]++
		if err == nil && resp.StatusCode/100 == 2 {
			l.acked[id] = true
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		if deadline == nil {
			select {
			case <-l.stop:
				deadline = time.After(60 * time.Second)
			default:
			}
		}
		select {
		case <-deadline:
			return
		case <-time.After(50 * time.Millisecond): // a client's retry pause
		}
	}
}

// finish stops publishing and waits for the publishes in flight.
func (l *load) finish() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

func (l *load) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// scenario is one fault run: NATS in a child process, the streams, one
// Subscription of the function, its consumer, a publisher child, the
// function and its service.
type scenario struct {
	t        *testing.T
	nats     *natsServer
	js       jetstream.JetStream
	streams  stream.Config
	sub      *v1alpha2.Subscription
	manifest string
	fn       *function
	svc      *service
	pubURL   string
}

// subscriptionManifest is the Subscription of s.sub, for the event bridge
// children.
const subscriptionManifest = `apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata: {name: orders, namespace: default}
spec:
  sink: http://fn.default.svc.cluster.local/
  source: shop
  types: [order.created.v1]
  config: {maxInFlightMessages: "32", maxDeliver: "100", backoffInitial: 20ms, backoffMax: 500ms}
`

// subscriptionConfig is generous with attempts so that no fault of the
// suite can use them up: a dead letter is then a bug.
var subscriptionConfig = map[string]v1alpha2.ConfigValue{
	"maxInFlightMessages": "32", "maxDeliver": "100", "backoffInitial": "20ms", "backoffMax": "500ms",
}

// ackWait is short so that events held by a killed dispatcher come back soon.
const ackWait = time.Second

func newScenario(t *testing.T, replicas int) *scenario {
	t.Helper()
	if testing.Short() {
		t.Skip("the fault suite runs child processes for tens of seconds")
	}
	s := &scenario{t: t, nats: startNATS(t), streams: stream.DefaultConfig()}
	s.js = connect(t, s.nats.url())
	ctx := context.Background()
	require.NoError(t, stream.Ensure(ctx, s.js, s.streams))
	s.sub = &v1alpha2.Subscription{
		TypeMeta:   metav1.TypeMeta{APIVersion: "eventing.kyma-project.io/v1alpha2", Kind: "Subscription"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders"},
		Spec: v1alpha2.SubscriptionSpec{
			Sink: "http://fn.default.svc.cluster.local/", Source: "shop", Types: []string{"order.created.v1"},
			Config: subscriptionConfig,
		},
	}
	s.manifest = filepath.Join(t.TempDir(), "subscriptions.yaml")
	require.NoError(t, os.WriteFile(s.manifest, []byte(subscriptionManifest), 0o600))
	// The consumer exists before the first publish, as the reconciler makes it.
	cc, err := stream.ConsumerConfig(s.sub, stream.ConsumerSettings{AckWait: ackWait})
	require.NoError(t, err)
	_, err = stream.EnsureConsumer(ctx, s.js, s.streams.EventStream, cc)
	require.NoError(t, err)

	s.fn = startFunction(t, replicas)
	s.svc = startService(t, s.fn)
	pub := startChild(t, "publisher", roleBridge, nil, s.bridgeArgs("publisher")...)
	s.pubURL = "http://" + pub.waitOutput(t, servingOn("publisher"))
	return s
}

func servingOn(server string) *regexp.Regexp {
	return regexp.MustCompile(`"server":"` + server + `","address":"([^"]+)"`)
}

// bridgeArgs are the event bridge flags for one component.
func (s *scenario) bridgeArgs(component string) []string {
	return []string{
		"-components=" + component, "-subscriptions=" + s.manifest, "-nats-url=" + s.nats.url(),
		"-resolve=fn.default=" + s.svc.srv.URL, "-ack-wait=" + ackWait.String(), "-request-timeout=2s",
		"-listen=127.0.0.1:0", "-admin-listen=", "-metrics-listen=", "-log-level=info",
	}
}

// startDispatcherProcess runs the dispatcher as its own process, as in a
// cluster (readiness is then the Service's: it answers 503 at zero).
func (s *scenario) startDispatcherProcess() *child {
	s.t.Helper()
	return startChild(s.t, "dispatcher", roleBridge, nil, s.bridgeArgs("dispatcher")...)
}

// startDispatcher runs the dispatcher in the test process with the pool's
// readiness, as kfn dev does (and as EndpointSlices tell it in a cluster).
func (s *scenario) startDispatcher(requestTimeout time.Duration) {
	s.t.Helper()
	svcURL := s.svc.srv.URL
	d, err := dispatcher.New(s.js, dispatcher.Config{Streams: s.streams, RequestTimeout: requestTimeout},
		dispatcher.WithEndpoints(s.fn),
		dispatcher.WithResolver(dispatcher.ResolverFunc(func(sink v1alpha2.Sink) (string, error) {
			return svcURL + sink.URL.EscapedPath(), nil
		})))
	require.NoError(s.t, err)
	require.NoError(s.t, d.Upsert(s.sub))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Start(ctx); close(done) }()
	s.t.Cleanup(func() { cancel(); <-done })
}

// waitDelivered waits until n more events than now were delivered.
func (s *scenario) waitDelivered(more int) {
	s.t.Helper()
	target := s.svc.count() + more
	require.Eventually(s.t, func() bool { return s.svc.count() >= target }, deliverBound, tick,
		"%d events delivered", target)
}

// waitPublished waits until n more events than now were acknowledged.
func (s *scenario) waitPublished(l *load, more int) {
	s.t.Helper()
	target := l.ackedCount() + more
	require.Eventually(s.t, func() bool { return l.ackedCount() >= target }, deliverBound, tick,
		"%d events published", target)
}

// verify stops the load and checks the promises: every event answered 2xx
// is delivered at least once, nothing is dead-lettered, the backlog
// empties. It reports duplicates and the failures the faults caused.
func (s *scenario) verify(l *load) {
	t := s.t
	t.Helper()
	l.finish()
	l.mu.Lock()
	acked := make([]string, 0, len(l.acked))
	for id := range l.acked {
		acked = append(acked, id)
	}
	answers := fmt.Sprint(l.answers)
	sent := l.seq.Load()
	l.mu.Unlock()
	require.NotEmpty(t, acked)

	missing := func() []string {
		s.svc.mu.Lock()
		defer s.svc.mu.Unlock()
		var out []string
		for _, id := range acked {
			if s.svc.delivered[id] == 0 {
				out = append(out, id)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(missing()) == 0 }, deliverBound, 50*time.Millisecond,
		"every acknowledged event delivered")
	if m := missing(); len(m) > 0 {
		t.Fatalf("%d of %d acknowledged events lost, for example %v", len(m), len(acked), m[:min(len(m), 10)])
	}

	ctx := context.Background()
	info, err := s.deadLetters(ctx)
	require.NoError(t, err)
	require.Zero(t, info, "dead letters: none of these faults is a cause to give up an event")
	cons, err := s.js.Consumer(ctx, s.streams.EventStream, stream.ConsumerName(s.sub.Namespace, s.sub.Name))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0
	}, deliverBound, 50*time.Millisecond, "the backlog empties")

	s.svc.mu.Lock()
	dups, extra := 0, 0
	for _, n := range s.svc.delivered {
		if n > 1 {
			dups++
			extra += n - 1
		}
	}
	failed := fmt.Sprint(s.svc.failed)
	s.svc.mu.Unlock()
	t.Logf("sent %d ids, %d acknowledged, all delivered; %d delivered more than once (%d extra deliveries); publish answers %s; failed deliveries %s",
		sent, len(acked), dups, extra, answers, failed)
}

func (s *scenario) deadLetters(ctx context.Context) (uint64, error) {
	dl, err := s.js.Stream(ctx, s.streams.DeadLetterStream)
	if err != nil {
		return 0, fmt.Errorf("dead-letter stream: %w", err)
	}
	info, err := dl.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("dead-letter stream info: %w", err)
	}
	return info.State.Msgs, nil
}
