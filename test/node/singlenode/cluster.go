package singlenode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cluster is a running single-node cluster. Its fields are set by [Up].
type Cluster struct {
	// Config is what the cluster was started with.
	Config Config
	// REST reaches the API server as a member of system:masters.
	REST *rest.Config
	// Clientset is a client of REST.
	Clientset kubernetes.Interface
	// Client is a controller-runtime client of REST with client-go's
	// scheme, without a cache.
	Client client.Client
}

// Up starts a single-node cluster: it removes what an earlier run left
// (see [Down]), makes the certificates, the bridge and the guard rules,
// starts etcd, the API server, the controller manager, the scheduler,
// containerd (and imports images, the pause image among them), the kubelet
// and kube-proxy, then CoreDNS and the NetworkPolicy enforcer
// (kube-network-policies), and returns when the node is Ready. logf reports each
// step (nil: quiet).
//
// On error everything it started is stopped again and the error quotes the
// failing component's log. The cluster runs until [Down], whether or not
// the calling process lives on.
func Up(ctx context.Context, cfg Config, images []string, logf func(format string, args ...any)) (*Cluster, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := Preflight(cfg); err != nil {
		return nil, err
	}
	if err := Down(cfg); err != nil {
		return nil, fmt.Errorf("remove the previous cluster: %w", err)
	}
	c, err := up(ctx, cfg, images, logf)
	if err != nil {
		return nil, errors.Join(err, Down(cfg))
	}
	return c, nil
}

func up(ctx context.Context, cfg Config, images []string, logf func(string, ...any)) (*Cluster, error) {
	start := time.Now()
	for _, d := range []string{cfg.StateDir, cfg.DataDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	if err := SaveConfig(cfg); err != nil {
		return nil, err
	}
	if err := writePKI(cfg.path("pki"), cfg); err != nil {
		return nil, err
	}
	if err := writeKubeconfigs(cfg); err != nil {
		return nil, err
	}
	first := cfg.firstNode()
	if err := writeCNIConfig(cfg, first); err != nil {
		return nil, err
	}
	if err := setUpNetwork(cfg); err != nil {
		return nil, err
	}
	if err := makeCgroupParent(cgroupParent); err != nil {
		return nil, err
	}

	logf("starting etcd and kube-apiserver")
	if err := startAll(cfg, etcdProcess); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, cfg, "etcd", time.Minute, etcdHealthy(cfg)); err != nil {
		return nil, err
	}
	if err := startAll(cfg, apiServerProcess); err != nil {
		return nil, err
	}
	c, err := connect(cfg)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, cfg, "kube-apiserver", 2*time.Minute, c.apiReady); err != nil {
		return nil, err
	}

	logf("starting the controller manager, the scheduler and containerd")
	if err := startAll(cfg, controllerManagerProcess, schedulerProcess); err != nil {
		return nil, err
	}
	if err := startNode(cfg, first, containerdProcess); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, cfg, "containerd", time.Minute, containerdReady(first)); err != nil {
		return nil, err
	}
	if len(images) > 0 {
		logf("importing %d image archives into containerd", len(images))
		if err := c.ImportImages(ctx, images...); err != nil {
			return nil, err
		}
	}

	logf("starting the kubelet and kube-proxy")
	if err := startNode(cfg, first, kubeletProcess, kubeProxyProcess); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, cfg, "kubelet", 2*time.Minute, c.nodeReady(cfg.NodeName)); err != nil {
		return nil, err
	}
	logf("node %s is Ready (%s); starting CoreDNS and the NetworkPolicy enforcer", cfg.NodeName, time.Since(start).Round(100*time.Millisecond))
	if err := c.installAddons(ctx); err != nil {
		return nil, err
	}
	// After the addons: they grant the enforcer its permissions.
	if err := startNode(cfg, first, networkPolicyProcess); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, cfg, "kube-network-policies", time.Minute, networkPolicyServing(first)); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, cfg, "kubelet", 2*time.Minute, c.coreDNSReady); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, c.Describe(ctx, "kube-system"))
	}
	if err := waitFor(ctx, cfg, "kube-controller-manager", time.Minute, c.defaultServiceAccount); err != nil {
		return nil, err
	}
	logf("cluster ready (%s)", time.Since(start).Round(100*time.Millisecond))
	return c, nil
}

// Connect returns a client of the cluster that Up started with cfg, for a
// process other than the one that called Up.
func Connect(cfg Config) (*Cluster, error) {
	c, err := connect(cfg)
	if err != nil {
		return nil, err
	}
	if err := c.apiReady(context.Background()); err != nil {
		return nil, fmt.Errorf("no cluster at %s: %w", cfg.APIServerURL(), err)
	}
	return c, nil
}

func connect(cfg Config) (*Cluster, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.KubeconfigPath())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", cfg.KubeconfigPath(), err)
	}
	rc.QPS, rc.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	cl, err := client.New(rc, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return &Cluster{Config: cfg, REST: rc, Clientset: cs, Client: cl}, nil
}

// startAll builds and starts each process in turn.
func startAll(cfg Config, builders ...func(Config) (process, error)) error {
	for _, b := range builders {
		p, err := b(cfg)
		if err != nil {
			return err
		}
		if err := cfg.start(p); err != nil {
			return err
		}
	}
	return nil
}

// startNode builds and starts each of node n's processes in turn, in its
// network namespace, with their logs and ids in its directory.
func startNode(cfg Config, n nodeSpec, builders ...func(Config, nodeSpec) (process, error)) error {
	for _, b := range builders {
		p, err := b(cfg, n)
		if err != nil {
			return err
		}
		if err := n.procs(cfg).start(n.wrap(p)); err != nil {
			return err
		}
	}
	return nil
}

// waitFor polls check every 200 ms until it succeeds, d passes, or the
// component named by name exits; the error then quotes its log.
func waitFor(ctx context.Context, cfg Config, name string, d time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		if !cfg.running(name) {
			return fmt.Errorf("%s exited: %v\n--- %s ---\n%s", name, last, cfg.logPath(name), tail(cfg.logPath(name), 4096))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %v\n--- %s ---\n%s", name, d, last, cfg.logPath(name), tail(cfg.logPath(name), 4096))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func etcdHealthy(cfg Config) func(context.Context) error {
	url := "http://127.0.0.1:" + strconv.Itoa(cfg.EtcdPort) + "/health"
	return func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd health: %s", resp.Status)
		}
		return nil
	}
}

// networkPolicyServing checks that the enforcer serves its metrics, which
// it starts doing with its dataplane; it then enforces every policy once
// its informers have synced.
func networkPolicyServing(n nodeSpec) func(context.Context) error {
	url := "http://" + net.JoinHostPort(n.IP, networkPolicyMetricsPort) + "/metrics"
	return func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("kube-network-policies metrics: %s", resp.Status)
		}
		return nil
	}
}

func (c *Cluster) apiReady(ctx context.Context) error {
	body, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("readyz: %w: %s", err, strings.TrimSpace(string(body)))
	}
	return nil
}

func containerdReady(n nodeSpec) func(context.Context) error {
	return func(ctx context.Context) error {
		conn, err := (&net.Dialer{}).DialContext(ctx, "unix", n.socket())
		if err != nil {
			return err
		}
		return conn.Close()
	}
}

// nodeReady checks that the Node name is Ready.
func (c *Cluster) nodeReady(name string) func(context.Context) error {
	return func(ctx context.Context) error {
		n, err := c.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s not ready: %s: %s", name, cond.Reason, cond.Message)
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", name)
	}
}

// defaultServiceAccount waits for the controller manager to make the
// default namespace's ServiceAccount, without which no pod is admitted.
func (c *Cluster) defaultServiceAccount(ctx context.Context) error {
	_, err := c.Clientset.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
	return err
}

// ImportImages imports OCI or Docker image archives into the node's
// containerd, in the namespace the kubelet uses. An image with the name of
// one already there replaces it; pods started afterwards run the new one.
func (c *Cluster) ImportImages(ctx context.Context, archives ...string) error {
	return importImages(ctx, c.Config, c.Config.firstNode(), archives)
}

// importsAtOnce is how many archives importImages imports at once: an
// import is reading, decompressing and writing layers, which overlap.
const importsAtOnce = 4

// importImages imports image archives into node n's containerd, several
// at once.
func importImages(ctx context.Context, cfg Config, n nodeSpec, archives []string) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(importsAtOnce)
	for _, a := range archives {
		g.Go(func() error {
			cmd := exec.CommandContext(ctx, ctrBinary(cfg), "--address", n.socket(), "--namespace", "k8s.io",
				"images", "import", a)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("import %s: %w: %s", a, err, tail2(string(out)))
			}
			return nil
		})
	}
	return g.Wait()
}

// ctrBinary is containerd's command-line client, next to containerd.
func ctrBinary(cfg Config) string {
	return filepath.Join(filepath.Dir(cfg.ContainerdBin), "ctr")
}

// makeCgroupParent creates the cgroup the kubelet puts pods under, in every
// hierarchy (the kubelet refuses a cgroup root that does not exist). A new
// cpuset cgroup needs its CPUs and memory nodes copied from its parent.
func makeCgroupParent(name string) error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
				return fmt.Errorf("set %s of cgroup %s: %w", f, dir, err)
			}
		}
	}
	return nil
}
