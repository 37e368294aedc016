package faults

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/test/testcluster"
	"github.com/kfn-dev/kfn/test/testenv"
	"github.com/kfn-dev/kfn/test/testport"
)

// cluster is the API server of every test: each test has a namespace of
// its own there, with the Subscription, the function's Service and its
// EndpointSlice, whose readiness the harness sets as the kubelet and the
// EndpointSlice controller would.
var cluster *testcluster.Cluster

// kubeconfig is the file that points the event bridge's processes at cluster.
var kubeconfig string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every test skips: no API server
	}
	os.Exit(testcluster.Main(m, writeKubeconfig, testcluster.WithScheme(eventingv1alpha2.AddToScheme)))
}

// writeKubeconfig keeps the cluster and writes its kubeconfig for the
// processes the tests start.
func writeKubeconfig(c *testcluster.Cluster) (func(), error) {
	dir, err := os.MkdirTemp("", "kfn-faults-kubeconfig-")
	if err != nil {
		return nil, err
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, c.KubeConfig, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cluster = c
	return func() { os.RemoveAll(dir) }, nil
}

// bins are the binaries the suite runs, built once.
var bins struct {
	once                       sync.Once
	err                        error
	eventbridge, nats, hostDir string
}

func build(t *testing.T) {
	t.Helper()
	bins.once.Do(func() {
		root := filepath.Join("..", "..") // go test runs a package's tests in its directory
		dir, err := os.MkdirTemp("", "kfn-faults-")
		if err != nil {
			bins.err = err
			return
		}
		bins.eventbridge, bins.nats = filepath.Join(dir, "eventbridge"), filepath.Join(dir, "nats-server")
		for _, b := range [][2]string{{bins.eventbridge, "./cmd/eventbridge"}, {bins.nats, "github.com/nats-io/nats-server/v2"}} {
			cmd := exec.Command("go", "build", "-o", b[0], b[1])
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				bins.err = fmt.Errorf("build %s: %w\n%s", b[1], err, out)
				return
			}
		}
		bins.hostDir, bins.err = runtimes.WriteHost(filepath.Join(dir, "host"))
	})
	require.NoError(t, bins.err)
}

// proc is a child process of the test.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

func start(t *testing.T, name string, argv, env []string) *proc {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	log := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(log)
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL} // never outlive the test
	require.NoError(t, cmd.Start())
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: log}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			b, _ := os.ReadFile(log)
			s := string(b)
			if len(s) > 3000 {
				s = s[len(s)-3000:]
			}
			t.Logf("%s log (tail):\n%s", name, s)
		}
	})
	return p
}

// kill sends SIGKILL to the process group and waits for the exit.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not die", p.name)
	}
}

// stop sends SIGTERM (a graceful stop, as a scale-down does) and waits.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop within 30s of SIGTERM", p.name)
	}
}

// harness is one platform in processes: NATS, publisher (with the
// Subscription reconciler), dispatcher, function; and, in the API server,
// the Subscription, the function's Service and its EndpointSlice.
type harness struct {
	t                           *testing.T
	dir, ns                     string
	natsPort, pubPort, fnPort   int
	dispatcherMetrics           int
	nats, publisher, dispatcher *proc
	function                    *proc
	record, slow                string
	slice                       *discoveryv1.EndpointSlice

	published atomic.Int64 // events the publisher answered 204 for
	mu        sync.Mutex
	acked     []string // their ids
}

// maxInFlight is the Subscription's maxInFlightMessages: at most this many
// events are unacknowledged at any moment, so a kill can cut at most this
// many deliveries short, and only those can be delivered twice.
const maxInFlight = 20

// function is the handler. Just before it answers an event it records
// "answered <id>" if the dispatcher is still waiting for the answer, or
// "abandoned <id>" if the dispatcher already went away (after its request
// timeout); the record comes first, so an answer the dispatcher got is
// always recorded. While the file named by SLOW exists it is too slow: it
// does not answer until the dispatcher gives up (its request timeout is
// 1 s; at most 5 s).
const function = `const fs = require("fs");
module.exports = {
  main: async (event) => {
    const id = event.data.id;
    let gone = false;
    const closed = new Promise((resolve) => event.extensions.response.once("close", () => { gone = true; resolve(); }));
    if (fs.existsSync(process.env.SLOW)) {
      let timer;
      await Promise.race([closed, new Promise((resolve) => { timer = setTimeout(resolve, 5000); })]);
      clearTimeout(timer);
    }
    fs.appendFileSync(process.env.RECORD, (gone ? "abandoned " : "answered ") + id + "\n");
    return "ok";
  },
};
`

func newHarness(t *testing.T) *harness {
	t.Helper()
	build(t)
	h := &harness{t: t, dir: t.TempDir(), natsPort: testport.Port(t), pubPort: testport.Port(t), fnPort: testport.Port(t), dispatcherMetrics: testport.Port(t)}
	h.record, h.slow = filepath.Join(h.dir, "delivered"), filepath.Join(h.dir, "slow")
	require.NoError(t, os.WriteFile(h.record, nil, 0o644))
	fnDir := filepath.Join(h.dir, "fn")
	require.NoError(t, os.MkdirAll(fnDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(fnDir, "handler.js"), []byte(function), 0o644))
	h.createResources()
	h.startNATS()
	// The reconciler makes the consumer: its ack wait is how soon the
	// events of a killed dispatcher come again.
	h.publisher = start(t, "publisher", []string{bins.eventbridge, "-components=publisher,reconciler", "-leader-election=false",
		"-ack-wait=2s", "-nats-url=" + h.natsURL(), "-listen=127.0.0.1:" + strconv.Itoa(h.pubPort), "-admin-listen=", "-metrics-listen=",
		"-log-level=warn"}, []string{"KUBECONFIG=" + kubeconfig})
	h.startDispatcher()
	h.startFunction()
	// The consumer starts with the events published after it (DeliverNew,
	// as Kyma's do): the flow must not begin before the reconciler made it.
	h.await("the reconciler created the Subscription's consumer", func() bool {
		nc, err := nats.Connect(h.natsURL())
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = js.Consumer(ctx, stream.DefaultConfig().EventStream, stream.ConsumerName(h.ns, "orders"))
		return err == nil
	})
	h.await("the publisher is ready", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", h.pubPort))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return h
}

// createResources creates the test's namespace and in it the Subscription,
// the function's Service and its EndpointSlice, with one endpoint that is
// not ready yet (the function is not started).
func (h *harness) createResources() {
	ctx := context.Background()
	c := cluster.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "faults-"}}
	require.NoError(h.t, c.Create(ctx, ns))
	h.ns = ns.Name
	require.NoError(h.t, c.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "fn"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}))
	h.slice = &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: h.ns, Name: "fn-pod", Labels: map[string]string{discoveryv1.LabelServiceName: "fn"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.213.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}},
	}
	require.NoError(h.t, c.Create(ctx, h.slice))
	// The API server outlives the test and has no namespace controller to
	// delete what the namespace holds: without this, the dispatchers of the
	// next tests would serve this Subscription too.
	subscription := &eventingv1alpha2.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "orders"}}
	h.t.Cleanup(func() { _ = c.Delete(context.Background(), subscription) })
	require.NoError(h.t, c.Create(ctx, &eventingv1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "orders"},
		Spec: eventingv1alpha2.SubscriptionSpec{
			Sink: "http://fn." + h.ns + ".svc.cluster.local", Source: "shop", Types: []string{"order.created.v1"},
			Config: map[string]eventingv1alpha2.ConfigValue{
				"maxInFlightMessages": eventingv1alpha2.ConfigValue(strconv.Itoa(maxInFlight)),
				"maxDeliver":          "100", "backoffInitial": "20ms", "backoffMax": "500ms",
			},
		},
	}))
}

// setReady sets the readiness of the function's one endpoint, as the
// EndpointSlice controller does when the pod's readiness changes.
func (h *harness) setReady(ready bool) {
	h.t.Helper()
	patch := client.MergeFrom(h.slice.DeepCopy())
	h.slice.Endpoints[0].Conditions.Ready = ptr.To(ready)
	require.NoError(h.t, cluster.Client.Patch(context.Background(), h.slice, patch), "set the function's endpoint ready=%v", ready)
}

func (h *harness) natsURL() string { return fmt.Sprintf("nats://127.0.0.1:%d", h.natsPort) }

// startNATS runs nats-server with JetStream on its store under dir (the
// same store after a restart) and waits until it accepts connections.
func (h *harness) startNATS() {
	h.nats = start(h.t, "nats", []string{bins.nats, "-js", "-a", "127.0.0.1", "-p", strconv.Itoa(h.natsPort),
		"-sd", filepath.Join(h.dir, "nats")}, nil)
	h.await("NATS accepts connections", func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", h.natsPort), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// awaitNoNATS waits until nothing accepts connections on NATS's port.
func (h *harness) awaitNoNATS() {
	h.await("NATS is gone", func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", h.natsPort), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
}

// startDispatcher runs the dispatcher as in a cluster: Subscriptions from
// the API server, readiness of the sink from its EndpointSlices; only the
// address it posts to is the function's local port.
func (h *harness) startDispatcher() {
	h.dispatcher = h.startDispatcherReplica("dispatcher", h.dispatcherMetrics)
}

// startDispatcherReplica runs one more dispatcher process, with its
// metrics on metricsPort.
func (h *harness) startDispatcherReplica(name string, metricsPort int) *proc {
	return start(h.t, name, []string{bins.eventbridge, "-components=dispatcher", "-nats-url=" + h.natsURL(),
		fmt.Sprintf("-resolve=fn.%s=http://127.0.0.1:%d", h.ns, h.fnPort), "-allow-loopback-sinks",
		"-request-timeout=1s", "-listen=", "-admin-listen=", fmt.Sprintf("-metrics-listen=127.0.0.1:%d", metricsPort),
		"-metrics-auth=none", // the harness reads the counters; who may: eventbridge TestRunInACluster
		"-log-level=debug"}, []string{"KUBECONFIG=" + kubeconfig})
}

// startFunction runs the function and, once it answers its health check,
// makes its endpoint ready.
func (h *harness) startFunction() {
	rt, err := runtimes.Lookup("nodejs22")
	require.NoError(h.t, err)
	vars, err := rt.Env(runtimes.Config{FunctionName: "fn", Namespace: h.ns, FunctionDir: filepath.Join(h.dir, "fn"), Port: h.fnPort})
	require.NoError(h.t, err)
	env := []string{"RECORD=" + h.record, "SLOW=" + h.slow}
	for _, v := range vars {
		env = append(env, v.Name+"="+v.Value)
	}
	argv := rt.Command(bins.hostDir)
	argv[0] = testenv.LookPath(h.t, "node")
	h.function = start(h.t, "function", argv, env)
	h.await("the function is ready", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", h.fnPort))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	h.setReady(true)
}

// notPulling counts the dispatcher's log lines saying that it saw the
// sink without a ready endpoint and stopped pulling. Like every helper a
// condition of await calls, it returns its error: conditions run in
// Eventually's goroutine, where nothing may stop the test.
func (h *harness) notPulling() (int, error) {
	b, err := os.ReadFile(h.dispatcher.log)
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), "sink has no ready endpoint, not pulling"), nil
}

// failedAttempts is the dispatcher's count of failed delivery attempts.
func (h *harness) failedAttempts() int {
	h.t.Helper()
	n, err := h.counter(h.dispatcherMetrics, "kfn_eventbridge_delivery_failures_total")
	require.NoError(h.t, err)
	return n
}

// counter reads the Subscription's counter name from the metrics of the
// dispatcher process serving them on port; 0 before the first count. It
// returns its error, as notPulling does.
func (h *harness) counter(port int, name string) (int, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	series := fmt.Sprintf(`%s{namespace=%q,subscription="orders"} `, name, h.ns)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", line, err)
			}
			return int(n), nil
		}
	}
	return 0, nil
}

// serving reports whether a process answers on its metrics port.
func (h *harness) serving(port int) bool {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (h *harness) await(what string, cond func() bool) {
	h.t.Helper()
	require.Eventually(h.t, cond, 60*time.Second, 10*time.Millisecond, what)
}

// resendEvery: the flow sends every resendEvery-th event a second time
// once it was acknowledged, as a client does when the answer is lost on its
// way. The publisher's de-duplication by source and id must store it once,
// or the function answers it twice.
const resendEvery = 4

// flow publishes events at about rate per second over HTTP until stop is
// closed, retrying each until the publisher answers 204 (its idempotency
// by source and id makes that safe) and sending every resendEvery-th one
// again; it returns when the last is stored.
func (h *harness) flow(rate int, stop <-chan struct{}) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		client := &http.Client{Timeout: 5 * time.Second}
		// publish sends id until the publisher answers 204; false when
		// stop came first.
		publish := func(id string) bool {
			for {
				req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/publish", h.pubPort), strings.NewReader(`{"id":"`+id+`"}`))
				req.Header.Set("Ce-Specversion", "1.0")
				req.Header.Set("Ce-Id", id)
				req.Header.Set("Ce-Source", "shop")
				req.Header.Set("Ce-Type", "order.created.v1")
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusNoContent {
						return true
					}
				}
				select {
				case <-time.After(50 * time.Millisecond): // the publisher is answering 503 while NATS is away
				case <-stop:
					return false
				}
			}
		}
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			id := strconv.Itoa(i)
			if !publish(id) {
				return // this id was never acknowledged: not owed
			}
			h.mu.Lock()
			h.acked = append(h.acked, id)
			h.mu.Unlock()
			h.published.Add(1)
			if i%resendEvery == 0 && !publish(id) {
				return
			}
		}
	}()
	return func() { <-done }
}

// deliveries is what the function recorded: per id, how often it answered
// and how often the dispatcher went away before the answer.
type deliveries struct{ answered, abandoned map[string]int }

func (h *harness) delivered() (deliveries, error) {
	f, err := os.Open(h.record)
	if err != nil {
		return deliveries{}, err
	}
	defer f.Close()
	got := deliveries{answered: map[string]int{}, abandoned: map[string]int{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		what, id, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch {
		case !ok: // a line cut short by a kill
		case what == "answered":
			got.answered[id]++
		case what == "abandoned":
			got.abandoned[id]++
		}
	}
	return got, sc.Err()
}

// awaitPublished waits until n more events were acknowledged than now.
func (h *harness) awaitPublished(n int64) {
	h.t.Helper()
	target := h.published.Load() + n
	h.await(fmt.Sprintf("%d more events published", n), func() bool { return h.published.Load() >= target })
}

// check is the suite's verdict: every acknowledged event was answered by
// the function at least once (a delivery the dispatcher gave up on does
// not count), every event whose delivery was abandoned was delivered
// again, none was dead-lettered, and there were at most maxDuplicates
// answers beyond the first of each event (the bound each test documents). When events
// are missing it says which, what the dead-letter stream holds and what
// the consumer still owes, so a failure in CI can be told apart from a
// slow machine. It returns what the function recorded.
func (h *harness) check(maxDuplicates int) deliveries {
	h.t.Helper()
	h.mu.Lock()
	acked := append([]string(nil), h.acked...)
	h.mu.Unlock()
	require.NotEmpty(h.t, acked)
	missing := func(got deliveries) []string {
		var out []string
		for _, id := range acked {
			if got.answered[id] == 0 {
				out = append(out, id)
			}
		}
		return out
	}
	assert.Eventually(h.t, func() bool {
		got, err := h.delivered()
		return err == nil && len(missing(got)) == 0
	}, 90*time.Second, 50*time.Millisecond, "every acknowledged event reaches the function and is answered")
	got, err := h.delivered() // the record only grows: what Eventually saw, or what there is after it gave up
	require.NoError(h.t, err)
	lost := missing(got)
	nc, err := nats.Connect(h.natsURL())
	require.NoError(h.t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(h.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	streams := stream.DefaultConfig()
	admin, err := deadletter.NewAdmin(js, streams)
	require.NoError(h.t, err)
	letters, err := admin.List(ctx, deadletter.Filter{})
	require.NoError(h.t, err)
	if len(lost) > 0 {
		h.t.Errorf("%d of %d acknowledged events were never answered by the function, first %v", len(lost), len(acked), lost[:min(len(lost), 10)])
		var cut []string
		for _, id := range lost {
			if got.abandoned[id] > 0 {
				cut = append(cut, id)
			}
		}
		if len(cut) > 0 {
			h.t.Errorf("%d of them had a delivery the dispatcher gave up on (timed out) and never came again, first %v", len(cut), cut[:min(len(cut), 10)])
		}
		if cons, err := js.Consumer(ctx, streams.EventStream, stream.ConsumerName(h.ns, "orders")); err == nil {
			if info, err := cons.Info(ctx); err == nil {
				h.t.Logf("consumer: %d pending, %d unacknowledged, %d redelivered, delivered up to stream sequence %d, acknowledged up to %d",
					info.NumPending, info.NumAckPending, info.NumRedelivered, info.Delivered.Stream, info.AckFloor.Stream)
			}
		}
	}
	for _, l := range letters[:min(len(letters), 5)] {
		h.t.Errorf("dead letter: event %s after %d attempt(s), status %d: %s", l.ID, l.Attempts, l.Status, l.Error)
	}
	if h.t.Failed() {
		h.t.FailNow()
	}
	dups, twice := 0, 0
	for _, n := range got.answered {
		if n > 1 {
			dups += n - 1
			twice++
		}
	}
	abandoned := 0
	for _, n := range got.abandoned {
		abandoned += n
	}
	h.t.Logf("%d events acknowledged by the publisher, all answered; %d deliveries abandoned by the dispatcher and made again; %d duplicate answers (%d events), bound %d",
		len(acked), abandoned, dups, twice, maxDuplicates)
	assert.LessOrEqual(h.t, dups, maxDuplicates, "answers beyond the first, over this fault's bound")
	return got
}
