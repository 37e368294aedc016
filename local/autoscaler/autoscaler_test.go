package autoscaler_test

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/kfn-dev/kfn/local/autoscaler"
)

func TestDesired(t *testing.T) {
	tests := map[string]struct {
		current       int
		total, target float64
		min, max      int
		want          int
	}{
		"backlog of 45, 10 each":       {current: 1, total: 45, target: 10, min: 0, max: 10, want: 5},
		"capped at max":                {current: 1, total: 1000, target: 10, min: 0, max: 3, want: 3},
		"no backlog keeps one":         {current: 3, total: 0, target: 10, min: 0, max: 5, want: 1},
		"min above one":                {current: 3, total: 0, target: 10, min: 2, max: 5, want: 2},
		"within tolerance stays":       {current: 2, total: 21, target: 10, min: 1, max: 5, want: 2},
		"just outside tolerance grows": {current: 2, total: 23, target: 10, min: 1, max: 5, want: 3},
		"no target keeps current":      {current: 2, total: 50, target: 0, min: 1, max: 5, want: 2},
		"from zero":                    {current: 0, total: 15, target: 10, min: 0, max: 5, want: 2},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.want, autoscaler.Desired(tt.current, tt.total, tt.target, tt.min, tt.max, 0.1))
		})
	}
}

// scripted is an ExternalScaler whose answers the test sets. The real
// scaler is not used here because these tests need exact control over
// activity and metric values and over time; the kfn dev end-to-end test runs
// the autoscaler against the real scaler.
type scripted struct {
	externalscaler.UnimplementedExternalScalerServer
	mu      sync.Mutex
	active  bool
	backlog float64
	push    chan bool
	failing bool
	polls   int // IsActive calls
}

func (s *scripted) IsActive(context.Context, *externalscaler.ScaledObjectRef) (*externalscaler.IsActiveResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.polls++
	if s.failing {
		return nil, context.DeadlineExceeded
	}
	return &externalscaler.IsActiveResponse{Result: s.active}, nil
}

func (s *scripted) StreamIsActive(_ *externalscaler.ScaledObjectRef, stream externalscaler.ExternalScaler_StreamIsActiveServer) error {
	for {
		select {
		case v := <-s.push:
			if err := stream.Send(&externalscaler.IsActiveResponse{Result: v}); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (s *scripted) GetMetricSpec(context.Context, *externalscaler.ScaledObjectRef) (*externalscaler.GetMetricSpecResponse, error) {
	return &externalscaler.GetMetricSpecResponse{MetricSpecs: []*externalscaler.MetricSpec{{MetricName: "backlog", TargetSizeFloat: 10}}}, nil
}

func (s *scripted) GetMetrics(context.Context, *externalscaler.GetMetricsRequest) (*externalscaler.GetMetricsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &externalscaler.GetMetricsResponse{MetricValues: []*externalscaler.MetricValue{{MetricName: "backlog", MetricValueFloat: s.backlog}}}, nil
}

// polled returns how often IsActive was called.
func (s *scripted) polled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls
}

func (s *scripted) set(active bool, backlog float64) {
	s.mu.Lock()
	s.active, s.backlog = active, backlog
	s.mu.Unlock()
}

func dial(t *testing.T, srv externalscaler.ExternalScalerServer) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	externalscaler.RegisterExternalScalerServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// workload is what a target scales: its replicas, and how often it was
// told to scale.
type workload struct {
	n      atomic.Int32
	scaled atomic.Int32
}

func (w *workload) target(minR, maxR int, cooldown time.Duration) autoscaler.Target {
	return autoscaler.Target{
		Ref:      &externalscaler.ScaledObjectRef{Name: "fn", Namespace: "default", ScalerMetadata: map[string]string{"functionName": "fn"}},
		Min:      minR,
		Max:      maxR,
		Cooldown: cooldown,
		Replicas: func() int { return int(w.n.Load()) },
		Scale:    func(_ context.Context, n int) error { w.scaled.Add(1); w.n.Store(int32(n)); return nil },
	}
}

func TestPushActivationStartsFromZeroAtOnce(t *testing.T) {
	srv := &scripted{push: make(chan bool, 1)}
	a, err := autoscaler.New(dial(t, srv), autoscaler.Config{PollingInterval: time.Hour})
	require.NoError(t, err)
	defer a.Stop()
	w := &workload{}
	a.Set(context.Background(), []autoscaler.Target{w.target(0, 5, time.Hour)})
	srv.push <- true
	require.Eventually(t, func() bool { return w.n.Load() == 1 }, 5*time.Second, time.Millisecond,
		"a pushed activation scales from zero without waiting for a poll")
}

func TestScalesOutOnBacklogAndBackToZero(t *testing.T) {
	srv := &scripted{push: make(chan bool)}
	a, err := autoscaler.New(dial(t, srv), autoscaler.Config{PollingInterval: 10 * time.Millisecond, ScaleDownStabilization: 50 * time.Millisecond})
	require.NoError(t, err)
	defer a.Stop()
	w := &workload{}
	a.Set(context.Background(), []autoscaler.Target{w.target(0, 4, 200*time.Millisecond)})

	srv.set(true, 35)
	require.Eventually(t, func() bool { return w.n.Load() == 4 }, 5*time.Second, 5*time.Millisecond, "35 waiting at 10 each: 4 replicas")
	srv.set(true, 12)
	require.Eventually(t, func() bool { return w.n.Load() == 2 }, 5*time.Second, 5*time.Millisecond, "scale down after the stabilization window")
	srv.set(false, 0)
	require.Eventually(t, func() bool { return w.n.Load() == 0 }, 5*time.Second, 5*time.Millisecond, "back to zero after the cooldown")
}

func TestScalerErrorsKeepReplicas(t *testing.T) {
	srv := &scripted{push: make(chan bool), failing: true}
	a, err := autoscaler.New(dial(t, srv), autoscaler.Config{PollingInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	defer a.Stop()
	w := &workload{}
	w.n.Store(3)
	a.Set(context.Background(), []autoscaler.Target{w.target(0, 5, time.Millisecond)})
	// Each poll past the 1 ms cooldown would scale an inactive target to
	// zero: twenty failed polls show that errors are not read as inactive.
	require.Eventually(t, func() bool { return srv.polled() >= 20 }, 5*time.Second, time.Millisecond,
		"the autoscaler polls the failing scaler")
	assert.Zero(t, w.scaled.Load(), "a failing scaler never scales (KEDA's fallback keeps replicas)")
	assert.Equal(t, int32(3), w.n.Load())
}

func TestNewRefusesWhatItCannotUse(t *testing.T) {
	conn := dial(t, &scripted{push: make(chan bool)})
	tests := map[string]struct {
		conn    grpc.ClientConnInterface
		cfg     autoscaler.Config
		opts    []autoscaler.Option
		wantErr error
	}{
		"no connection":        {cfg: autoscaler.Config{}, wantErr: autoscaler.ErrInvalidConfig},
		"negative interval":    {conn: conn, cfg: autoscaler.Config{PollingInterval: -1}, wantErr: autoscaler.ErrInvalidConfig},
		"negative window":      {conn: conn, cfg: autoscaler.Config{ScaleDownStabilization: -1}, wantErr: autoscaler.ErrInvalidConfig},
		"negative tolerance":   {conn: conn, cfg: autoscaler.Config{Tolerance: -0.1}, wantErr: autoscaler.ErrInvalidConfig},
		"nil option":           {conn: conn, opts: []autoscaler.Option{nil}, wantErr: autoscaler.ErrInvalidOption},
		"nil logger":           {conn: conn, opts: []autoscaler.Option{autoscaler.WithLogger(nil)}, wantErr: autoscaler.ErrInvalidOption},
		"defaults and options": {conn: conn, opts: []autoscaler.Option{autoscaler.WithLogger(slog.New(slog.DiscardHandler))}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, err := autoscaler.New(tc.conn, tc.cfg, tc.opts...)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			a.Stop()
		})
	}
}
