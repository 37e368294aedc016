// Command scaler benchmarks kfn's KEDA external scaler, run as its own
// process (cmd/scaler) against a real kube-apiserver (test/testcluster)
// and an embedded NATS JetStream, with N Functions (default 1,000), each
// with one Subscription and its JetStream consumer, and one StreamIsActive
// stream open per Function, as KEDA holds one per external-push trigger.
//
//   - Activation latency: for T idle Functions in turn (default 200), the
//     time from publishing the Function's first event (the JetStream publish
//     call) to its StreamIsActive stream receiving true, p50 and p99; beside
//     the anchor of KEDA's polling, whose expected wait for an event arriving
//     at a random time is half the polling interval (p50) and 0.99 of it
//     (p99), for the 30 s default and the 1 s minimum.
//   - Cost: the scaler's CPU (utime+stime from /proc) and memory (VmRSS,
//     VmHWM) over a window with no calls, then over a window of KEDA-like
//     polling of every ScaledObject: IsActive every 30 s and both metrics
//     (GetMetrics) every 15 s, as KEDA's loop and the HPA through KEDA's
//     metrics server ask, spread evenly.
//
// Results are JSON lines on stdout, one per figure (progress goes to
// stderr). BENCH_QUICK=1 runs a short version (200 Functions, 50 trials, 5 s
// windows).
//
//	go run ./bench/scaler [-functions 1000] [-trials 200] [-window 30s]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/bench/figures"
	"github.com/kfn-dev/kfn/bench/procstat"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/contract/trigger"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/scaler/server"
	"github.com/kfn-dev/kfn/test/scalertest"
	"github.com/kfn-dev/kfn/test/testcluster"
)

const (
	namespace = "bench"
	source    = "bench"
)

type options struct {
	functions int
	trials    int
	window    time.Duration
	figures   string
}

func main() {
	o := options{functions: 1000, trials: 200, window: 30 * time.Second}
	if os.Getenv("BENCH_QUICK") == "1" {
		o = options{functions: 200, trials: 50, window: 5 * time.Second}
	}
	flag.IntVar(&o.functions, "functions", o.functions, "Functions (Subscriptions, consumers, ScaledObjects) the scaler serves")
	flag.IntVar(&o.trials, "trials", o.trials, "activation trials, one idle Function each (at most -functions)")
	flag.DurationVar(&o.window, "window", o.window, "length of each cost window (idle, then KEDA-like polling)")
	flag.StringVar(&o.figures, "figures", "", "also append the results as JSON lines (package bench/figures) to this file")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/scaler:", err)
		os.Exit(1)
	}
}

// line is one JSON line of results.
type line map[string]any

func emit(l line) {
	l["bench"] = "scaler"
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		fmt.Fprintln(os.Stderr, "bench/scaler:", err)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench/scaler: "+format+"\n", args...)
}

func eventType(i int) string { return fmt.Sprintf("fn%04d.created.v1", i) }
func fnName(i int) string    { return fmt.Sprintf("fn-%04d", i) }

func run(o options) error {
	if o.functions < 1 || o.trials < 1 || o.trials > o.functions || o.window <= 0 {
		return errors.New("need -functions >= 1, 1 <= -trials <= -functions, -window > 0")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "kfn-bench-scaler-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "scaler")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/scaler")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build scaler (run from the repository root): %w", err)
	}

	progress("starting the API server and NATS")
	cluster, err := testcluster.Start(testcluster.WithScheme(eventingv1alpha2.AddToScheme))
	if err != nil {
		return err
	}
	defer func() { _ = cluster.Stop() }()
	n, err := startNATS(ctx, dir)
	if err != nil {
		return err
	}
	defer n.stop()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, cluster.KubeConfig, 0o600); err != nil {
		return err
	}
	if err := cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}

	progress("creating %d Subscriptions and their consumers", o.functions)
	err = parallel(16, o.functions, func(i int) error {
		sub := scalertest.Subscription(namespace, fnName(i), fnName(i), source, eventType(i))
		if err := cluster.Client.Create(ctx, sub); err != nil {
			return fmt.Errorf("create subscription %d: %w", i, err)
		}
		return n.createConsumer(ctx, sub)
	})
	if err != nil {
		return err
	}

	grpcAddr, metricsAddr := freeAddr(), freeAddr()
	if grpcAddr == "" || metricsAddr == "" {
		return errors.New("no free port")
	}
	logFile, err := os.Create(filepath.Join(dir, "scaler.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	proc := exec.Command(bin, "-nats-url="+n.srv.ClientURL(), "-event-stream="+n.streams.EventStream,
		"-listen="+grpcAddr, "-metrics-listen="+metricsAddr, "-log-level=warn")
	proc.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	proc.Stdout, proc.Stderr = logFile, logFile
	if err := proc.Start(); err != nil {
		return fmt.Errorf("start scaler: %w", err)
	}
	defer func() {
		_ = proc.Process.Signal(os.Interrupt)
		_ = proc.Wait()
	}()
	pid := proc.Process.Pid

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := waitServing(ctx, conn); err != nil {
		return fmt.Errorf("%w (log: %s)", err, tail(logFile.Name()))
	}
	keda := pb.NewExternalScalerClient(conn)
	refs := make([]*pb.ScaledObjectRef, o.functions)
	for i := range refs {
		fn := types.NamespacedName{Namespace: namespace, Name: fnName(i)}
		refs[i] = &pb.ScaledObjectRef{Name: fn.Name, Namespace: fn.Namespace, ScalerMetadata: trigger.Metadata{
			ScalerAddress: grpcAddr, Function: fn, TargetBacklog: 10, TargetConcurrency: 10,
		}.Render()}
	}

	// One StreamIsActive per ScaledObject, as KEDA holds them.
	progress("opening %d StreamIsActive streams", o.functions)
	activations := make([]chan time.Time, o.functions)
	for i := range activations {
		activations[i] = make(chan time.Time, 4)
		s, err := keda.StreamIsActive(ctx, refs[i])
		if err != nil {
			return fmt.Errorf("stream %d: %w", i, err)
		}
		go func(ch chan<- time.Time) {
			for {
				r, err := s.Recv()
				if err != nil {
					return
				}
				if r.Result {
					ch <- time.Now()
				}
			}
		}(activations[i])
	}
	// Every Function idle (inactive, listening): the refresh loop runs every
	// second; two refreshes after the streams registered are enough.
	if err := waitIdle(ctx, keda, refs); err != nil {
		return err
	}
	time.Sleep(2500 * time.Millisecond)

	progress("activation: %d trials", o.trials)
	var lat []time.Duration
	misses := 0
	for i := range o.trials {
		start := time.Now()
		if err := n.publish(ctx, eventType(i)); err != nil {
			return err
		}
		select {
		case at := <-activations[i]:
			lat = append(lat, at.Sub(start))
		case <-time.After(5 * time.Second):
			misses++
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(lat) == 0 {
		return errors.New("no activation arrived")
	}
	p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
	emit(line{"name": "activation_push", "what": "publish first event -> StreamIsActive true (kfn scaler)",
		"functions": o.functions, "trials": o.trials, "missed": misses,
		"p50_ms": ms(p50), "p99_ms": ms(p99), "max_ms": ms(slices.Max(lat)),
		"target_p99_ms": 50, "met": p99 < 50*time.Millisecond && misses == 0})
	for _, interval := range []time.Duration{30 * time.Second, time.Second} {
		emit(line{"name": "activation_polling_anchor", "what": "KEDA polling IsActive, expected wait for an event at a random time",
			"pollingInterval_s": interval.Seconds(), "p50_ms": ms(interval / 2), "p99_ms": ms(time.Duration(0.99 * float64(interval)))})
	}

	progress("cost: %s idle", o.window)
	idle, err := measure(pid, o.window, nil)
	if err != nil {
		return err
	}
	emit(costLine("cost_idle", "no calls; refresh loop, listeners and open streams only", o, idle, 0))

	progress("cost: %s of KEDA-like polling", o.window)
	var calls, failures atomic.Int64
	load := func(ctx context.Context) { poll(ctx, keda, refs, &calls, &failures) }
	busy, err := measure(pid, o.window, load)
	if err != nil {
		return err
	}
	l := costLine("cost_polling", "IsActive every 30s and GetMetrics of both metrics every 15s per ScaledObject", o, busy, float64(calls.Load())/busy.wall.Seconds())
	l["call_errors"] = failures.Load()
	emit(l)
	const group = "scaler"
	return figures.Append(o.figures,
		figures.Figure{Group: group, Name: fmt.Sprintf("activation p50, first event -> StreamIsActive (%d Functions)", o.functions), Unit: "ms",
			Value: ms(p50), Anchor: "KEDA polling every 30 s (expected wait)", AnchorValue: ms(15 * time.Second)},
		figures.Figure{Group: group, Name: fmt.Sprintf("activation p99, first event -> StreamIsActive (%d Functions)", o.functions), Unit: "ms",
			Value: ms(p99), Anchor: "KEDA polling every 1 s (expected wait)", AnchorValue: ms(990 * time.Millisecond),
			Target: figures.Target{Max: 50, Text: "< 50 ms"}},
		figures.Figure{Group: group, Name: fmt.Sprintf("CPU under KEDA-like polling of %d ScaledObjects", o.functions), Unit: "cores",
			Value: busy.cpu.Seconds() / busy.wall.Seconds()},
		figures.Figure{Group: group, Name: fmt.Sprintf("peak RSS with %d ScaledObjects", o.functions), Unit: "MiB", Value: mib(busy.peakSeen)},
	)
}

// usage is what the scaler process used over a window.
type usage struct {
	wall, cpu          time.Duration
	rss, hwm, peakSeen int64 // KiB
}

// measure runs load (if any) for d and returns the process's CPU time and
// memory over it.
func measure(pid int, d time.Duration, load func(context.Context)) (usage, error) {
	cpu0, err := cpuTime(pid)
	if err != nil {
		return usage{}, err
	}
	_, rss0, err := procstat.Memory(pid)
	if err != nil {
		return usage{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	if load != nil {
		go load(ctx)
	}
	peak := rss0
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-t.C:
			if _, rss, err := procstat.Memory(pid); err == nil && rss > peak {
				peak = rss
			}
		}
	}
	wall := time.Since(start)
	cpu1, err := cpuTime(pid)
	if err != nil {
		return usage{}, err
	}
	hwm, rss, err := procstat.Memory(pid)
	if err != nil {
		return usage{}, err
	}
	return usage{wall: wall, cpu: cpu1 - cpu0, rss: rss, hwm: hwm, peakSeen: max(peak, rss)}, nil
}

func costLine(name, what string, o options, u usage, callsPerSecond float64) line {
	return line{"name": name, "what": what, "functions": o.functions, "streams": o.functions,
		"window_s": math.Round(u.wall.Seconds()*10) / 10, "calls_per_s": math.Round(callsPerSecond*10) / 10,
		"cpu_cores": math.Round(u.cpu.Seconds()/u.wall.Seconds()*1000) / 1000,
		"rss_mib":   mib(u.rss), "peak_rss_mib": mib(u.peakSeen), "hwm_mib": mib(u.hwm)}
}

// poll asks as KEDA and the HPA ask, for every ScaledObject, spread evenly
// over the periods, until ctx ends.
func poll(ctx context.Context, keda pb.ExternalScalerClient, refs []*pb.ScaledObjectRef, calls, failures *atomic.Int64) {
	var wg sync.WaitGroup
	every := func(period time.Duration, call func(context.Context) error) {
		for range refs {
			wg.Add(1)
		}
		for range refs {
			offset := time.Duration(rand.Int64N(int64(period)))
			go func() {
				defer wg.Done()
				select {
				case <-ctx.Done():
					return
				case <-time.After(offset):
				}
				t := time.NewTicker(period)
				defer t.Stop()
				for {
					cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					err := call(cctx)
					cancel()
					calls.Add(1)
					if err != nil && ctx.Err() == nil {
						failures.Add(1)
					}
					select {
					case <-ctx.Done():
						return
					case <-t.C:
					}
				}
			}()
		}
	}
	var idx atomic.Int64
	next := func() *pb.ScaledObjectRef { return refs[int(idx.Add(1)-1)%len(refs)] }
	every(30*time.Second, func(ctx context.Context) error { _, err := keda.IsActive(ctx, next()); return err })
	for _, m := range []string{server.MetricBacklog, server.MetricConcurrency} {
		every(15*time.Second, func(ctx context.Context) error {
			_, err := keda.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: next(), MetricName: m})
			return err
		})
	}
	wg.Wait()
}

func waitServing(ctx context.Context, conn *grpc.ClientConn) error {
	h := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: server.ServiceName})
		if err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("the scaler did not serve within 60s")
}

// waitIdle waits until every Function answers IsActive false.
func waitIdle(ctx context.Context, keda pb.ExternalScalerClient, refs []*pb.ScaledObjectRef) error {
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < len(refs); {
		r, err := keda.IsActive(ctx, refs[i])
		if err == nil && !r.Result {
			i++
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("function %d not idle within 60s: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(p*float64(len(s))))-1)]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Millisecond)*100) / 100 }

func mib(kb int64) float64 { return math.Round(float64(kb)/1024*10) / 10 }

// cpuTime returns the process's user+system CPU time (/proc/pid/stat).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command (which may hold spaces) in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("unreadable /proc stat")
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, nil
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}

func parallel(workers, n int, f func(int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// natsServer is an embedded NATS JetStream with kfn's streams (memory
// storage), in this process.
type natsServer struct {
	srv     *natsserver.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	streams stream.Config
}

func startNATS(ctx context.Context, dir string) (*natsServer, error) {
	srv, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT,
		JetStream: true, StoreDir: filepath.Join(dir, "nats"), NoLog: true, NoSigs: true})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats server not ready within 10s")
	}
	n := &natsServer{srv: srv, streams: stream.DefaultConfig()}
	n.streams.Storage = stream.StorageMemory
	if n.nc, err = nats.Connect(srv.ClientURL()); err != nil {
		n.stop()
		return nil, fmt.Errorf("connect to nats: %w", err)
	}
	if n.js, err = jetstream.New(n.nc); err != nil {
		n.stop()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if err := jsstream.Ensure(ctx, n.js, n.streams); err != nil {
		n.stop()
		return nil, fmt.Errorf("create streams: %w", err)
	}
	return n, nil
}

func (n *natsServer) stop() {
	if n.nc != nil {
		n.nc.Close()
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
}

// createConsumer creates the Subscription's consumer as the event bridge
// does.
func (n *natsServer) createConsumer(ctx context.Context, sub *eventingv1alpha2.Subscription) error {
	cfg, err := jsstream.ConsumerConfig(sub, stream.ConsumerSettings{})
	if err != nil {
		return fmt.Errorf("consumer config: %w", err)
	}
	if _, err := jsstream.EnsureConsumer(ctx, n.js, n.streams.EventStream, cfg); err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	return nil
}

// publish stores one event of eventType from source, as the publisher does.
func (n *natsServer) publish(ctx context.Context, eventType string) error {
	subject, err := eventingv1alpha2.EventSubject(source, eventType)
	if err != nil {
		return err
	}
	if _, err := n.js.Publish(ctx, subject, []byte(`{}`)); err != nil {
		return fmt.Errorf("publish %s: %w", subject, err)
	}
	return nil
}
