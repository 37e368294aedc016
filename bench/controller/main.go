// Command controller benchmarks kfn's Function controller: it starts a real
// kube-apiserver and etcd (test/testcluster), runs the controller binary
// as a separate process against it, applies N Functions (default 1,000) and
// measures the time until every Function has its Deployment and Service and
// ConfigurationReady True, the controller's peak resident memory (VmHWM
// from /proc), and its writes to the API server per Function (from the API
// server's apiserver_request_total: children applied and status written).
//
//	go run ./bench/controller [-functions 1000] [-workers 16]
package main

import (
	"context"
	"flag"
	"fmt"
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/bench/figures"
	"github.com/kfn-dev/kfn/bench/procstat"
	"github.com/kfn-dev/kfn/controller/function"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/controller:", err)
		os.Exit(1)
	}
}

func run() error {
	n := flag.Int("functions", 1000, "how many Functions to apply")
	workers := flag.Int("workers", 16, "controller --workers")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	figuresOut := flag.String("figures", "", "also append the results as JSON lines (package bench/figures) to this file")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	dir, err := os.MkdirTemp("", "kfn-bench-controller-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "controller")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/controller")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build controller: %w", err)
	}

	env, err := startAPIServer(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop API server:", err)
		}
	}()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		return err
	}
	cfg := env.Config
	cfg.QPS, cfg.Burst = 2000, 4000
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	const ns = "bench"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}

	logFile, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	ctl := exec.Command(bin, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--workers="+strconv.Itoa(*workers), "--kube-api-qps=1000", "--kube-api-burst=2000")
	ctl.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	ctl.Stdout, ctl.Stderr = logFile, logFile
	if err := ctl.Start(); err != nil {
		return fmt.Errorf("start controller: %w", err)
	}
	defer func() {
		_ = ctl.Process.Signal(os.Interrupt)
		_ = ctl.Wait()
	}()
	idle, err := waitRSS(ctl.Process.Pid)
	if err != nil {
		return err
	}

	before, err := apiWrites(ctx, cfg) // the API server's own, at start
	if err != nil {
		return err
	}
	fmt.Printf("applying %d Functions (controller pid %d, %d workers)\n", *n, ctl.Process.Pid, *workers)
	start := time.Now()
	if err := createFunctions(ctx, c, ns, *n); err != nil {
		return err
	}
	created := time.Since(start)
	var deps, svcs, ready int
	for {
		deps, svcs, ready, err = progress(ctx, c, ns, *n)
		if err != nil {
			return err
		}
		if deps >= *n && svcs >= *n && ready >= *n {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s: %d Deployments, %d Services, %d ConfigurationReady of %d (log: %s)", time.Since(start).Round(time.Millisecond), deps, svcs, ready, *n, tail(logFile.Name()))
		case <-time.After(500 * time.Millisecond):
		}
	}
	total := time.Since(start)
	hwm, rss, err := procstat.Memory(ctl.Process.Pid)
	if err != nil {
		return err
	}
	after, err := apiWrites(ctx, cfg)
	if err != nil {
		return err
	}
	writes := after - before
	fmt.Printf("functions:              %d\n", *n)
	fmt.Printf("all created by:         %s\n", created.Round(time.Millisecond))
	// DESIGN.md's targets are for 1,000 Functions; other counts are points
	// of the scaling curve.
	timeVerdict, memVerdict := "", ""
	if *n == 1000 {
		timeVerdict = fmt.Sprintf(" (target < 60s: %s)", verdict(total < 60*time.Second))
		memVerdict = fmt.Sprintf("; target < 150 MiB: %s", verdict(mib(hwm) < 150))
	}
	fmt.Printf("all reconciled after:   %s%s\n", total.Round(time.Millisecond), timeVerdict)
	fmt.Printf("controller RSS idle:    %.1f MiB\n", mib(idle))
	fmt.Printf("controller RSS now:     %.1f MiB\n", mib(rss))
	fmt.Printf("controller peak RSS:    %.1f MiB (VmHWM%s)\n", mib(hwm), memVerdict)
	fmt.Printf("API server writes:      %d, %.2f per Function (children applied, status written; DeploymentCreated, then rolling out, as no pods run here)\n", writes, float64(writes)/float64(*n))
	const group = "controller"
	var timeTarget, memTarget figures.Target
	if *n == 1000 {
		timeTarget = figures.Target{Max: 60, Text: "< 60 s"}
		memTarget = figures.Target{Max: 150, Text: "< 150 MiB"}
	}
	return figures.Append(*figuresOut,
		figures.Figure{Group: group, Name: fmt.Sprintf("%d Functions to Deployments and status", *n), Unit: "s", Value: total.Seconds(), Target: timeTarget,
			Series: "controller time to reconcile N Functions", X: float64(*n), XLabel: "Functions"},
		figures.Figure{Group: group, Name: fmt.Sprintf("peak RSS with %d Functions", *n), Unit: "MiB", Value: mib(hwm), Target: memTarget,
			Series: "controller peak RSS with N Functions", X: float64(*n), XLabel: "Functions"},
		figures.Figure{Group: group, Name: fmt.Sprintf("API server writes per Function, %d Functions", *n), Unit: "requests", Value: float64(writes) / float64(*n)},
	)
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

// progress counts the Deployments, Services and ConfigurationReady
// Functions. Deployments and Services are listed as metadata only, and the
// Functions only once all children exist: full lists of thousands of
// objects every poll would load the API server the controller is measured
// against, more the more Functions there are.
func progress(ctx context.Context, c client.Client, ns string, n int) (deps, svcs, ready int, err error) {
	count := func(gvk schema.GroupVersionKind) (int, error) {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(gvk)
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return 0, fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		return len(l.Items), nil
	}
	if deps, err = count(appsv1.SchemeGroupVersion.WithKind("DeploymentList")); err != nil {
		return 0, 0, 0, err
	}
	if svcs, err = count(corev1.SchemeGroupVersion.WithKind("ServiceList")); err != nil {
		return 0, 0, 0, err
	}
	if deps < n || svcs < n {
		return deps, svcs, 0, nil
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
	return deps, svcs, ready, nil
}

// waitRSS waits until the controller has started (its RSS stops growing
// for a second) and returns that RSS.
func waitRSS(pid int) (int64, error) {
	var last int64
	for range 40 {
		_, rss, err := procstat.Memory(pid)
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
// envtest directly rather than test/testcluster because 1,000
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
		CRDDirectoryPaths:     []string{filepath.Join("api", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.96.0.0/16")
	if _, err := env.Start(); err != nil {
		return nil, fmt.Errorf("start API server: %w", err)
	}
	return env, nil
}
