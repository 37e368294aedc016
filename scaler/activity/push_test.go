package activity_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/contract/trigger"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/internal/natsinflight"
	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/scaler/server"
	"github.com/kfn-dev/kfn/test/scalertest"
)

// atZero is the gateway's view of Functions that exist and have no ready
// backend, and get none: their requests are held until they end.
type atZero struct{}

var never = make(chan struct{})

func (atZero) Known(string, string) bool                    { return true }
func (atZero) Ready(string, string) (bool, <-chan struct{}) { return false, never }
func (atZero) Pick(string, string) (string, error)          { return "", errors.New("no ready backend") }

// busyReports counts the in-flight reports that reach the scaler with a
// request in them, and passes every report on.
type busyReports struct {
	*activity.Scaler
	busy atomic.Int64
}

func (r *busyReports) ReportInFlight(src string, counts map[types.NamespacedName]int, ttl time.Duration) {
	if len(counts) > 0 {
		r.busy.Add(1)
	}
	r.Scaler.ReportInFlight(src, counts, ttl)
}

// activations reads a StreamIsActive stream as KEDA does and records when
// each true arrived.
type activations struct {
	mu  sync.Mutex
	got []time.Time
}

func (a *activations) before(t time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, at := range a.got {
		if at.Before(t) {
			n++
		}
	}
	return n
}

func (a *activations) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.got)
}

// While a Function at zero stays active because the gateway holds a
// request for it, and the gateway reports that request every interval
// over NATS (the path of a cluster), StreamIsActive sends one true: a
// true per report would postpone KEDA's cool-down for as long as
// requests come. The next true is the next inactive->active transition.
func TestOneActivationWhileTheGatewayKeepsReporting(t *testing.T) {
	n := scalertest.StartNATS(t)
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), nil, activity.WithActivationHold(0))
	require.NoError(t, err)
	require.NoError(t, core.Refresh(context.Background()))
	reports := &busyReports{Scaler: core}
	stop, err := natsinflight.Subscribe(scalertest.Connect(t, n.Server.ClientURL()), reports)
	require.NoError(t, err)
	t.Cleanup(stop)

	// The scaler's gRPC server and KEDA's client of it.
	srv, err := server.New(core)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-served) })
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	keda := pb.NewExternalScalerClient(conn)
	ref := &pb.ScaledObjectRef{Name: fn.Name, Namespace: fn.Namespace,
		ScalerMetadata: map[string]string{trigger.KeyFunctionNamespace: fn.Namespace, trigger.KeyFunctionName: fn.Name}}
	stream, err := keda.StreamIsActive(ctx, ref)
	require.NoError(t, err)
	trues := &activations{}
	received := make(chan struct{})
	go func() {
		defer close(received)
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			if r.Result {
				trues.mu.Lock()
				trues.got = append(trues.got, time.Now())
				trues.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-received })

	// The event bridge's gateway, reporting over NATS every 100 ms, each
	// report valid for 500 ms (5 intervals): long enough on a loaded
	// machine, where a report that came too late would let the held
	// request lapse in the scaler and the Function flap.
	pub, err := natsinflight.NewPublisher(scalertest.Connect(t, n.Server.ClientURL()))
	require.NoError(t, err)
	g, err := gateway.New(atZero{}, gateway.Config{ReportInterval: 100 * time.Millisecond, HoldTimeout: time.Minute, Source: "gw-0"},
		gateway.WithInFlightReporter(pub))
	require.NoError(t, err)
	gwCtx, stopReports := context.WithCancel(context.Background())
	go func() { _ = g.Run(gwCtx) }()
	t.Cleanup(stopReports)
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	var requests sync.WaitGroup
	t.Cleanup(requests.Wait)
	hold := func() (leave func()) {
		rctx, leave := context.WithCancel(context.Background())
		requests.Add(1)
		go func() {
			defer requests.Done()
			req, _ := http.NewRequestWithContext(rctx, http.MethodGet, gw.URL+"/shop/orders/", nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		return leave
	}
	active := func() bool {
		r, err := keda.IsActive(context.Background(), ref)
		return err == nil && r.Result
	}

	leave := hold()
	defer leave()
	require.Eventually(t, func() bool { return trues.count() >= 1 }, 10*time.Second, time.Millisecond, "the held request activates the Function")
	// Active for ten more reports and refreshes.
	seen := reports.busy.Load()
	require.Eventually(t, func() bool {
		return core.Refresh(context.Background()) == nil && reports.busy.Load() >= seen+10
	}, 10*time.Second, 10*time.Millisecond, "the gateway reports the held request")
	require.True(t, active())

	// The request ends: the Function is inactive at the next refresh, and
	// a new request is the next transition, with its true.
	leave()
	require.Eventually(t, func() bool { return core.Refresh(context.Background()) == nil && !active() }, 10*time.Second, 10*time.Millisecond,
		"inactive once the request is over")
	again := time.Now()
	leaveAgain := hold()
	defer leaveAgain()
	require.Eventually(t, func() bool { return trues.count() >= 2 }, 10*time.Second, time.Millisecond, "the next request activates it again")
	assert.Equal(t, 1, trues.before(again), "one true while the Function stayed active")
}

// A report's zero count is no request: it activates nothing and counts
// nothing, and it replaces the source's earlier report as an empty one does.
func TestZeroInFlightIsNone(t *testing.T) {
	n := scalertest.StartNATS(t)
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), nil, activity.WithActivationHold(0))
	require.NoError(t, err)
	require.NoError(t, core.Refresh(context.Background()))
	_, activated, cancel := core.Watch(fn)
	defer cancel()

	core.ReportInFlight("gw-0", map[types.NamespacedName]int{fn: 0}, time.Minute)
	st, err := core.State(fn)
	require.NoError(t, err)
	assert.Equal(t, activity.State{}, st, "no request in flight, not active")
	select {
	case <-activated: // ReportInFlight announces before it returns
		t.Fatal("a zero count activated the Function")
	default:
	}

	core.ReportInFlight("gw-0", map[types.NamespacedName]int{fn: 2}, time.Minute)
	select {
	case <-activated:
	default:
		t.Fatal("two requests did not activate the Function")
	}
	core.ReportInFlight("gw-0", map[types.NamespacedName]int{fn: 0}, time.Minute)
	require.NoError(t, core.Refresh(context.Background()))
	st, err = core.State(fn)
	require.NoError(t, err)
	assert.Equal(t, activity.State{}, st, "the zero count replaced the two")
}
