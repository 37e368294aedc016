package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/test/node/install"
	"github.com/kfn-dev/kfn/test/node/singlenode"
)

// skipEnv skips the whole suite when set to 1: the only way to run make
// test without the node (for example on a machine without root).
const skipEnv = "KFN_SKIP_CLUSTER"

// binEnv and imagesEnv name directories that test/node/assets.sh and
// test/node/images.sh printed, when they ran before the tests.
const (
	binEnv    = "KFN_CLUSTER_BIN"
	imagesEnv = "KFN_CLUSTER_IMAGES"
)

// setupTimeout bounds building the binaries and images (cold: about 20
// minutes on 2 cores), starting the node and installing KEDA and kfn.
const setupTimeout = 45 * time.Minute

// platform is the running cluster that every test of the package uses.
var platform *env

// env is the single-node cluster with KEDA and kfn installed, and what the
// tests need to reach it.
type env struct {
	cluster *singlenode.Cluster
	// client knows Functions and Subscriptions.
	client client.Client
	// root is the checkout (for bin/kfn and charts).
	root string
	// publisher and gateway are the base URLs of kfn's Services.
	publisher, gateway string
	// recorder receives what the test functions report.
	recorder *recorder
	// archives are the image archives the node runs (kfn's, the
	// runtimes', the cluster's own).
	archives []string
}

func TestMain(m *testing.M) {
	singlenode.RunWatchdog()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv(skipEnv) == "1" {
		fmt.Printf("e2e/cluster: SKIPPED (%s=1): no kfn pod was run on a real node\n", skipEnv)
		return 0
	}
	if os.Geteuid() != 0 {
		fmt.Fprintf(os.Stderr, "e2e/cluster: the single-node cluster needs root (containers, a bridge, iptables); run as root, or set %s=1 to skip it\n", skipEnv)
		return 1
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	setupCtx, setupCancel := context.WithTimeout(ctx, setupTimeout)
	e, cfg, wd, err := setUp(setupCtx)
	setupCancel()
	if cfg != nil {
		defer func() {
			if err := singlenode.Down(*cfg); err != nil {
				fmt.Fprintln(os.Stderr, "e2e/cluster: tear down:", err)
			}
			// Only now: had this process died before, the watchdog
			// would have torn the cluster down.
			wd.Dismiss()
		}()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/cluster:", err)
		return 1
	}
	defer e.recorder.close()
	platform = e
	code := m.Run()
	coldStarts.print(os.Stdout)
	return code
}

// setUp builds the binaries and images (once per version; kfn's images on
// every run), starts the node, installs KEDA and kfn, and returns the
// cluster's configuration and its watchdog as soon as there is something
// to tear down.
func setUp(ctx context.Context) (*env, *singlenode.Config, *singlenode.Watchdog, error) {
	start := time.Now()
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "e2e/cluster %6.1fs: "+format+"\n", append([]any{time.Since(start).Seconds()}, a...)...)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, nil, nil, err
	}
	// make test-cluster builds both before go test (its -timeout then
	// bounds the tests only); a plain go test builds them here.
	bin, images := os.Getenv(binEnv), os.Getenv(imagesEnv)
	if bin == "" {
		logf("building the cluster's binaries (test/node/assets.sh)")
		if bin, err = script(ctx, root, "test/node/assets.sh"); err != nil {
			return nil, nil, nil, err
		}
	}
	if images == "" {
		logf("building the images (test/node/images.sh)")
		if images, err = script(ctx, root, "test/node/images.sh", bin); err != nil {
			return nil, nil, nil, err
		}
	}
	archives, err := filepath.Glob(filepath.Join(images, "*.tar"))
	if err != nil || len(archives) == 0 {
		return nil, nil, nil, fmt.Errorf("no image archives in %s", images)
	}
	logf("building bin/kfn")
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(root, "bin")+"/", "./cmd/kfn")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, nil, nil, fmt.Errorf("go build ./cmd/kfn: %w: %s", err, out)
	}

	cfg := singlenode.DefaultConfig(bin, filepath.Join(filepath.Dir(bin), "data"))
	wd, err := singlenode.StartWatchdog(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := singlenode.Up(ctx, cfg, archives, logf)
	if err != nil {
		wd.Dismiss() // Up tore down what it started
		return nil, nil, nil, err
	}
	// From here on, run tears the cluster down and then dismisses the
	// watchdog, which does it only if this process dies first.
	if err := install.Platform(ctx, c, filepath.Join(root, "charts", "kfn"), logf, reserveBankSource); err != nil {
		return nil, &cfg, wd, err
	}
	e, err := newEnv(ctx, c, root)
	if err != nil {
		return nil, &cfg, wd, err
	}
	e.archives = archives
	logf("ready: node, CoreDNS, KEDA and kfn")
	return e, &cfg, wd, nil
}

// script runs a script of the checkout and returns the last line it prints
// (a directory); its progress goes to stderr.
func script(ctx context.Context, root, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(root, name), args...)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dir := lines[len(lines)-1]
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return "", fmt.Errorf("%s printed %q, not a directory", name, dir)
	}
	return dir, nil
}

func newEnv(ctx context.Context, c *singlenode.Cluster, root string) (*env, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, serverlessv1alpha2.AddToScheme, eventingv1alpha2.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	cl, err := client.New(c.REST, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	e := &env{cluster: c, client: cl, root: root}
	if e.publisher, err = serviceURL(ctx, c, "kfn-publisher"); err != nil {
		return nil, err
	}
	if e.gateway, err = serviceURL(ctx, c, "kfn-gateway"); err != nil {
		return nil, err
	}
	if e.recorder, err = startRecorder(c.Config.NodeIP); err != nil {
		return nil, err
	}
	return e, nil
}

// serviceURL is http://<cluster IP>:<first port> of one of kfn's Services:
// the host reaches cluster IPs through kube-proxy's rules, as a pod does.
func serviceURL(ctx context.Context, c *singlenode.Cluster, name string) (string, error) {
	svc, err := c.Clientset.CoreV1().Services(install.Namespace).Get(ctx, name, metav1GetOptions)
	if err != nil {
		return "", fmt.Errorf("service %s: %w", name, err)
	}
	if len(svc.Spec.Ports) == 0 || svc.Spec.ClusterIP == "" {
		return "", errors.New("service " + name + " has no cluster IP or port")
	}
	return fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port), nil
}
