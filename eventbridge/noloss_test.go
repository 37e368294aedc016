package eventbridge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// buildEventBridge builds cmd/eventbridge into a temporary directory, as
// the image builds it: without cgo, also in the race detector's run (which
// needs cgo for itself), so that the build cache has its packages.
func buildEventBridge(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "eventbridge")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/eventbridge")
	cmd.Dir = ".." // go test runs a package's tests in its directory
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "build eventbridge: %s", out)
	return bin
}

// dispatcherProcess is the event bridge's dispatcher in its own process.
type dispatcherProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startDispatcher(t *testing.T, bin string, args ...string) *dispatcherProcess {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdout = os.Stderr
	logs, err := os.Create(filepath.Join(t.TempDir(), "dispatcher.log"))
	require.NoError(t, err)
	cmd.Stderr = logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test
	require.NoError(t, cmd.Start())
	p := &dispatcherProcess{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		logs.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("dispatcher log (tail):\n%s", tail(string(b), 4000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (p *dispatcherProcess) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the dispatcher did not die")
	}
}

// TestNoEventLostWhenTheDispatcherIsKilled publishes 10,000 events through
// the publisher while the dispatcher, a separate process, is killed with
// SIGKILL twice and the sink fails 20% of the requests at random: every
// event id arrives at least once, none is dead-lettered, and at most the
// in-flight window per kill arrives twice (only deliveries a kill cut short
// between the sink's answer and the acknowledgement come again). Every
// tenth event is published twice, as a client whose answer was lost does:
// the publisher's de-duplication must store it once.
func TestNoEventLostWhenTheDispatcherIsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the event bridge binary")
	}
	const (
		total       = 10000
		kills       = 2
		maxInFlight = 64 // the Subscription's maxInFlightMessages
		resendEvery = 10
	)
	bin := buildEventBridge(t)
	ns := natstest.Start(t)
	js := ns.JetStream()
	streams := stream.DefaultConfig() // file storage, as in production
	ctx := context.Background()
	require.NoError(t, jsstream.Ensure(ctx, js, streams))

	// The sink: 20% of requests fail; ids answered 2xx are delivered.
	var (
		mu        sync.Mutex
		delivered = make(map[string]int, total)
		requests  atomic.Int64
		failed    atomic.Int64
	)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if rand.IntN(5) == 0 {
			failed.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		delivered[r.Header.Get("Ce-Id")]++
		mu.Unlock()
	}))
	defer sink.Close()
	countDelivered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered)
	}

	sub := &v1alpha2.Subscription{
		TypeMeta:   metav1.TypeMeta{APIVersion: "eventing.kyma-project.io/v1alpha2", Kind: "Subscription"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders"},
		Spec: v1alpha2.SubscriptionSpec{
			Sink: "http://orders.default.svc.cluster.local/", Source: "shop", Types: []string{"order.created.v1"},
			Config: map[string]v1alpha2.ConfigValue{
				"maxInFlightMessages": v1alpha2.ConfigValue(strconv.Itoa(maxInFlight)), "maxDeliver": "30", "backoffInitial": "10ms", "backoffMax": "50ms",
			},
		},
	}
	manifest := filepath.Join(t.TempDir(), "subscriptions.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata: {name: orders, namespace: default}
spec:
  sink: %s
  source: shop
  types: [order.created.v1]
  config: {maxInFlightMessages: "%d", maxDeliver: "30", backoffInitial: 10ms, backoffMax: 50ms}
`, sub.Spec.Sink, maxInFlight)), 0o600))
	// The consumer exists before the first publish, as the reconciler makes it.
	cc, err := jsstream.ConsumerConfig(sub, stream.ConsumerSettings{AckWait: time.Second})
	require.NoError(t, err)
	_, err = jsstream.EnsureConsumer(ctx, js, streams.EventStream, cc)
	require.NoError(t, err)

	args := []string{
		"-components=dispatcher", "-subscriptions=" + manifest, "-nats-url=" + ns.URL(),
		"-resolve=orders.default=" + sink.URL, "-allow-loopback-sinks", "-ack-wait=1s", "-request-timeout=2s",
		"-admin-listen=", "-metrics-listen=", "-listen=", "-log-level=warn",
	}
	proc := startDispatcher(t, bin, args...)

	// The publisher, over HTTP, with retries on anything but 204 (its
	// idempotency makes retries safe).
	p, err := publisher.New(eventstore.New(js, streams.EventStream), publisher.Config{})
	require.NoError(t, err)
	pub := httptest.NewServer(p)
	defer pub.Close()
	var published atomic.Int64
	g := new(errgroup.Group)
	const publishers = 8
	for w := range publishers {
		g.Go(func() error {
			client := &http.Client{Timeout: 10 * time.Second}
			publish := func(i int) error {
				for attempt := 0; ; attempt++ {
					req, _ := http.NewRequest(http.MethodPost, pub.URL+"/publish", strings.NewReader(`{"n":`+strconv.Itoa(i)+`}`))
					req.Header.Set("Ce-Specversion", "1.0")
					req.Header.Set("Ce-Id", strconv.Itoa(i))
					req.Header.Set("Ce-Source", "shop")
					req.Header.Set("Ce-Type", "order.created.v1")
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err == nil {
						resp.Body.Close()
						if resp.StatusCode == http.StatusNoContent {
							return nil
						}
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
					if attempt == 20 {
						return fmt.Errorf("publish %d: %w", i, err)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			for i := w; i < total; i += publishers {
				if err := publish(i); err != nil {
					return err
				}
				published.Add(1)
				if i%resendEvery == 0 {
					if err := publish(i); err != nil { // a client that did not see the 204
						return err
					}
				}
				time.Sleep(5 * time.Millisecond) // about 1,500 events/s: both kills land mid-stream
			}
			return nil
		})
	}

	// Kill the dispatcher twice mid-stream, each time starting a new one.
	for _, at := range []int{total / 5, total / 2}[:kills] {
		require.Eventually(t, func() bool { return countDelivered() >= at }, 60*time.Second, 5*time.Millisecond, "delivered %d before kill", at)
		proc.kill(t)
		t.Logf("killed the dispatcher with %d delivered, %d published", countDelivered(), published.Load())
		proc = startDispatcher(t, bin, args...)
	}
	require.NoError(t, g.Wait())
	require.Equal(t, int64(total), published.Load())

	require.Eventually(t, func() bool { return countDelivered() == total }, 90*time.Second, 10*time.Millisecond,
		"every event delivered at least once")
	mu.Lock()
	dups := 0
	for i := range total {
		n := delivered[strconv.Itoa(i)]
		require.NotZero(t, n, "event %d lost", i)
		dups += n - 1
	}
	mu.Unlock()
	t.Logf("%d events, %d requests, %d failed by the sink, %d duplicates after %d kills (bound %d)", total, requests.Load(), failed.Load(), dups, kills, kills*maxInFlight)
	assert.LessOrEqual(t, dups, kills*maxInFlight, "duplicates beyond the in-flight window per kill")

	dl, err := js.Stream(ctx, streams.DeadLetterStream)
	require.NoError(t, err)
	info, err := dl.Info(ctx)
	require.NoError(t, err)
	assert.Zero(t, info.State.Msgs, "nothing dead-lettered")
	c, err := js.Consumer(ctx, streams.EventStream, cc.Durable)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ci, err := c.Info(ctx)
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0
	}, 10*time.Second, 10*time.Millisecond, "the backlog is empty")
}
