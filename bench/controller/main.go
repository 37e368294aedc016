// Command controller benchmarks kfn's Function controller: it starts a real
// kube-apiserver and etcd (internal/testcluster), runs the controller binary
// as a separate process against it, applies N Functions (default 1,000) and
// measures the time until every Function has its Deployment and Service and
// ConfigurationReady True, and the controller's peak resident memory
// (VmHWM from /proc). A list of counts measures each on a fresh API server
// and controller: the growth curve.
//
//	go run ./bench/controller [-functions 1000] [-workers 16] [-jsonl]
//	go run ./bench/controller -functions 100,1000,5000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/bench/result"
	"github.com/kfn-dev/kfn/controller/function"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/controller:", err)
		os.Exit(1)
	}
}

func run() error {
	counts := flag.String("functions", "1000", "how many Functions to apply; a comma-separated list measures each count on a fresh API server")
	workers := flag.Int("workers", 16, "controller --workers")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up on one count after this long")
	jsonl := flag.Bool("jsonl", false, "print the figures as JSON lines (package bench/result) on stdout and the text on stderr")
	flag.Parse()
	human, figures := io.Writer(os.Stdout), io.Writer(nil)
	if *jsonl {
		human, figures = os.Stderr, os.Stdout
	}
	out := result.NewWriter(figures)
	var ns []int
	for _, f := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-functions: %q is not a count >= 1", f)
		}
		ns = append(ns, n)
	}

	dir, err := os.MkdirTemp("", "kfn-bench-controller-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "controller")
	build := exec.Command("go", "build", "-o", bin, "./cmd/controller")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build controller: %w", err)
	}
	for _, n := range ns {
		m, err := measure(bin, dir, n, *workers, *timeout, human)
		if err != nil {
			return fmt.Errorf("%d Functions: %w", n, err)
		}
		figs := []result.Figure{
			{Name: "controller/functions/time", Unit: "s", Value: m.total.Seconds(), X: float64(n), XLabel: "Functions"},
			{Name: "controller/functions/peak-rss", Unit: "MiB", Value: mib(m.hwm), X: float64(n), XLabel: "Functions"},
		}
		if n == 1000 {
			figs = append(figs,
				result.Figure{Name: "controller/reconcile-1000", Unit: "s", Value: m.total.Seconds()},
				result.Figure{Name: "controller/peak-rss-1000", Unit: "MiB", Value: mib(m.hwm),
					Anchor: &result.Anchor{Name: "kfn controller idle, before the Functions", Value: mib(m.idle)}})
		}
		for _, f := range figs {
			if err := out.Emit(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// measurement is one count's result; memory in KiB.
type measurement struct {
	total          time.Duration
	idle, hwm, rss int64
}

// measure starts a fresh API server and controller, applies n Functions and
// waits until all are reconciled.
func measure(bin, dir string, n, workers int, timeout time.Duration, human io.Writer) (measurement, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	env, err := startAPIServer(ctx)
	if err != nil {
		return measurement{}, err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop API server:", err)
		}
	}()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		return measurement{}, err
	}
	cfg := env.Config
	cfg.QPS, cfg.Burst = 2000, 4000
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return measurement{}, err
	}
	const ns = "bench"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return measurement{}, err
	}

	logFile, err := os.Create(filepath.Join(dir, fmt.Sprintf("controller-%d.log", n)))
	if err != nil {
		return measurement{}, err
	}
	defer logFile.Close()
	ctl := exec.Command(bin, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--workers="+strconv.Itoa(workers), "--kube-api-qps=1000", "--kube-api-burst=2000")
	ctl.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	ctl.Stdout, ctl.Stderr = logFile, logFile
	if err := ctl.Start(); err != nil {
		return measurement{}, fmt.Errorf("start controller: %w", err)
	}
	defer func() {
		_ = ctl.Process.Signal(os.Interrupt)
		_ = ctl.Wait()
	}()
	idle, err := waitRSS(ctl.Process.Pid)
	if err != nil {
		return measurement{}, err
	}

	fmt.Fprintf(human, "applying %d Functions (controller pid %d, %d workers)\n", n, ctl.Process.Pid, workers)
	start := time.Now()
	if err := createFunctions(ctx, c, ns, n); err != nil {
		return measurement{}, err
	}
	created := time.Since(start)
	var deps, svcs, ready int
	for {
		deps, svcs, ready, err = progress(ctx, c, ns)
		if err != nil {
			return measurement{}, err
		}
		if deps >= n && svcs >= n && ready >= n {
			break
		}
		select {
		case <-ctx.Done():
			return measurement{}, fmt.Errorf("timed out after %s: %d Deployments, %d Services, %d ConfigurationReady of %d (log: %s)", time.Since(start).Round(time.Millisecond), deps, svcs, ready, n, tail(logFile.Name()))
		case <-time.After(500 * time.Millisecond):
		}
	}
	total := time.Since(start)
	hwm, rss, err := memory(ctl.Process.Pid)
	if err != nil {
		return measurement{}, err
	}
	fmt.Fprintf(human, "functions:              %d\n", n)
	fmt.Fprintf(human, "all created by:         %s\n", created.Round(time.Millisecond))
	fmt.Fprintf(human, "all reconciled after:   %s (target for 1,000 < 60s: %s)\n", total.Round(time.Millisecond), verdict(total < 60*time.Second))
	fmt.Fprintf(human, "controller RSS idle:    %.1f MiB\n", mib(idle))
	fmt.Fprintf(human, "controller RSS now:     %.1f MiB\n", mib(rss))
	fmt.Fprintf(human, "controller peak RSS:    %.1f MiB (VmHWM; target for 1,000 < 150 MiB: %s)\n", mib(hwm), verdict(mib(hwm) < 150))
	return measurement{total: total, idle: idle, hwm: hwm, rss: rss}, nil
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func mib(kb int64) float64 { return float64(kb) / 1024 }

func createFunctions(ctx context.Context, c client.Client, ns string, n int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn := &v1alpha2.Function{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fn-%04d", i), Namespace: ns},
					Spec: v1alpha2.FunctionSpec{
						Runtime: v1alpha2.NodeJS22,
						Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{
							Source: fmt.Sprintf("module.exports = { main: () => 'hello %d' };\n", i),
						}},
						Env: []v1alpha2.EnvVar{{Name: "INDEX", Value: strconv.Itoa(i)}},
					},
				}
				if err := c.Create(ctx, fn); err != nil {
					errs <- fmt.Errorf("create %s: %w", fn.Name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func progress(ctx context.Context, c client.Client, ns string) (deps, svcs, ready int, err error) {
	dl := &appsv1.DeploymentList{}
	if err := c.List(ctx, dl, client.InNamespace(ns)); err != nil {
		return 0, 0, 0, err
	}
	sl := &corev1.ServiceList{}
	if err := c.List(ctx, sl, client.InNamespace(ns)); err != nil {
		return 0, 0, 0, err
	}
	fl := &v1alpha2.FunctionList{}
	if err := c.List(ctx, fl, client.InNamespace(ns)); err != nil {
		return 0, 0, 0, err
	}
	for _, f := range fl.Items {
		if meta.IsStatusConditionTrue(f.Status.Conditions, string(v1alpha2.ConditionConfigurationReady)) {
			ready++
		}
	}
	return len(dl.Items), len(sl.Items), ready, nil
}

// memory returns VmHWM and VmRSS of pid in KiB.
func memory(pid int) (hwm, rss int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read controller memory: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			hwm = v
		case "VmRSS:":
			rss = v
		}
	}
	if hwm == 0 {
		return 0, 0, errors.New("no VmHWM in /proc status")
	}
	return hwm, rss, nil
}

// waitRSS waits until the controller has started (its RSS stops growing
// for a second) and returns that RSS.
func waitRSS(pid int) (int64, error) {
	var last int64
	for range 40 {
		_, rss, err := memory(pid)
		if err != nil {
			return 0, err
		}
		if rss == last {
			return rss, nil
		}
		last = rss
		time.Sleep(500 * time.Millisecond)
	}
	return last, nil
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

// startAPIServer starts etcd and kube-apiserver with kfn's CRDs. It uses
// envtest directly rather than internal/testcluster because 1,000
// ClusterIP Services need a service range larger than envtest's default
// /24. The binaries come from KUBEBUILDER_ASSETS or hack/envtest-assets.sh
// (which builds them once, as make test does).
func startAPIServer(ctx context.Context) (*envtest.Environment, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		out, err := exec.CommandContext(ctx, "hack/envtest-assets.sh").Output()
		if err != nil {
			return nil, fmt.Errorf("find envtest binaries (run from the repository root): %w", err)
		}
		assets = strings.TrimSpace(string(out))
	}
	scheme := runtime.NewScheme()
	if err := function.AddToScheme(scheme); err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		Scheme:                scheme,
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join("charts", "kfn", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.96.0.0/16")
	if _, err := env.Start(); err != nil {
		return nil, fmt.Errorf("start API server: %w", err)
	}
	return env, nil
}
