package faults

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/stream"
	"github.com/kfn-dev/kfn/runtimes"
)

// bins are the binaries the suite runs, built once.
var bins struct {
	once                       sync.Once
	err                        error
	eventbridge, nats, hostDir string
}

func build(t *testing.T) {
	t.Helper()
	bins.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
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

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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

// harness is one platform in processes: NATS, publisher, dispatcher, function.
type harness struct {
	t                           *testing.T
	dir                         string
	natsPort, pubPort, fnPort   int
	nats, publisher, dispatcher *proc
	function                    *proc
	record, slow, manifest      string

	published atomic.Int64 // events the publisher answered 204 for
	mu        sync.Mutex
	acked     []string // their ids
}

// function is the handler: it records the id of each event it finishes,
// after a delay while the file named by SLOW exists.
const function = `const fs = require("fs");
module.exports = {
  main: async (event) => {
    if (fs.existsSync(process.env.SLOW)) await new Promise((r) => setTimeout(r, 1500));
    fs.appendFileSync(process.env.RECORD, event.data.id + "\n");
    return "ok";
  },
};
`

func newHarness(t *testing.T) *harness {
	t.Helper()
	build(t)
	h := &harness{t: t, dir: t.TempDir(), natsPort: freePort(t), pubPort: freePort(t), fnPort: freePort(t)}
	h.record, h.slow = filepath.Join(h.dir, "delivered"), filepath.Join(h.dir, "slow")
	require.NoError(t, os.WriteFile(h.record, nil, 0o644))
	fnDir := filepath.Join(h.dir, "fn")
	require.NoError(t, os.MkdirAll(fnDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(fnDir, "handler.js"), []byte(function), 0o644))
	h.manifest = filepath.Join(h.dir, "subscriptions.yaml")
	require.NoError(t, os.WriteFile(h.manifest, []byte(`apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata: {name: orders, namespace: default}
spec:
  sink: http://fn.default.svc.cluster.local
  source: shop
  types: [order.created.v1]
  config: {maxInFlightMessages: "20", maxDeliver: "1000", backoffInitial: 20ms, backoffMax: 200ms}
`), 0o644))
	h.startNATS()
	h.publisher = start(t, "publisher", []string{bins.eventbridge, "-components=publisher", "-subscriptions=" + h.manifest, "-nats-url=" + h.natsURL(),
		"-listen=127.0.0.1:" + strconv.Itoa(h.pubPort), "-admin-listen=", "-metrics-listen=", "-log-level=warn"}, nil)
	h.startDispatcher()
	h.startFunction()
	// The consumer starts with the events published after it (DeliverNew,
	// as Kyma's do): the flow must not begin before the dispatcher made it.
	h.await("the dispatcher created the Subscription's consumer", func() bool {
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
		_, err = js.Consumer(ctx, stream.DefaultConfig().EventStream, stream.ConsumerName("default", "orders"))
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

func (h *harness) startDispatcher() {
	h.dispatcher = start(h.t, "dispatcher", []string{bins.eventbridge, "-components=dispatcher", "-subscriptions=" + h.manifest,
		"-nats-url=" + h.natsURL(), fmt.Sprintf("-resolve=fn.default=http://127.0.0.1:%d", h.fnPort),
		"-ack-wait=2s", "-request-timeout=1s", "-listen=", "-admin-listen=", "-metrics-listen=", "-log-level=info"}, nil)
}

func (h *harness) startFunction() {
	rt, err := runtimes.Lookup("nodejs22")
	require.NoError(h.t, err)
	vars, err := rt.Env(runtimes.Config{FunctionName: "fn", Namespace: "default", FunctionDir: filepath.Join(h.dir, "fn"), Port: h.fnPort})
	require.NoError(h.t, err)
	env := []string{"RECORD=" + h.record, "SLOW=" + h.slow}
	for _, v := range vars {
		env = append(env, v.Name+"="+v.Value)
	}
	argv := rt.Command(bins.hostDir)
	argv[0] = "node"
	h.function = start(h.t, "function", argv, env)
	h.await("the function is ready", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", h.fnPort))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (h *harness) await(what string, cond func() bool) {
	h.t.Helper()
	require.Eventually(h.t, cond, 60*time.Second, 10*time.Millisecond, what)
}

// flow publishes events at about rate per second over HTTP until stop is
// closed, retrying each until the publisher answers 204 (its idempotency
// by source and id makes that safe); it returns when the last is stored.
func (h *harness) flow(rate int, stop <-chan struct{}) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		client := &http.Client{Timeout: 5 * time.Second}
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			id := strconv.Itoa(i)
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
						break
					}
				}
				select {
				case <-time.After(50 * time.Millisecond): // the publisher is answering 503 while NATS is away
				case <-stop:
					return // this id was never acknowledged: not owed
				}
			}
			h.mu.Lock()
			h.acked = append(h.acked, id)
			h.mu.Unlock()
			h.published.Add(1)
		}
	}()
	return func() { <-done }
}

// delivered counts, per id, how often the function finished it.
func (h *harness) delivered() map[string]int {
	f, err := os.Open(h.record)
	require.NoError(h.t, err)
	defer f.Close()
	got := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if id := strings.TrimSpace(sc.Text()); id != "" {
			got[id]++
		}
	}
	return got
}

// awaitPublished waits until n more events were acknowledged than now.
func (h *harness) awaitPublished(n int64) {
	h.t.Helper()
	target := h.published.Load() + n
	h.await(fmt.Sprintf("%d more events published", n), func() bool { return h.published.Load() >= target })
}

// check is the suite's verdict: every acknowledged event reached the
// function at least once, none was dead-lettered; duplicates are reported.
// When events are missing it says which, what the dead-letter stream holds
// and what the consumer still owes, so a failure in CI can be told apart
// from a slow machine.
func (h *harness) check() {
	h.t.Helper()
	h.mu.Lock()
	acked := append([]string(nil), h.acked...)
	h.mu.Unlock()
	require.NotEmpty(h.t, acked)
	var got map[string]int
	missing := func() []string {
		got = h.delivered()
		var out []string
		for _, id := range acked {
			if got[id] == 0 {
				out = append(out, id)
			}
		}
		return out
	}
	var lost []string
	assert.Eventually(h.t, func() bool { lost = missing(); return len(lost) == 0 }, 90*time.Second, 50*time.Millisecond,
		"every acknowledged event reaches the function")
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
		h.t.Errorf("%d of %d acknowledged events never reached the function, first %v", len(lost), len(acked), lost[:min(len(lost), 10)])
		if cons, err := js.Consumer(ctx, streams.EventStream, stream.ConsumerName("default", "orders")); err == nil {
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
	dups := 0
	for _, n := range got {
		dups += n - 1
	}
	h.t.Logf("%d events acknowledged by the publisher, all delivered; %d duplicate deliveries", len(acked), dups)
}
