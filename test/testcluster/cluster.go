package testcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kfn-dev/kfn/internal/tail"
)

// outputTail is how much of each process's last output a start error quotes.
const outputTail = 8 << 10

// Cluster is a running kube-apiserver backed by its own etcd, with CRDs
// installed. Its fields are set by [Start] and must not be changed.
type Cluster struct {
	// Config reaches the API server as a member of system:masters.
	Config *rest.Config
	// KubeConfig is Config as a kubeconfig file, for programs run by a test.
	KubeConfig []byte
	// Scheme holds client-go's built-in types, apiextensions.k8s.io/v1, and
	// the types registered with [WithScheme].
	Scheme *runtime.Scheme
	// Client talks to the API server with Scheme, without a cache: a write
	// is visible to the next read.
	Client client.Client
	// CRDs are the CustomResourceDefinitions installed at start; each one
	// is established (served) by the time Start returns.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	env      *envtest.Environment
	dir      string
	watchdog *watchdog
	stopOnce sync.Once
	stopErr  error
}

// Start starts etcd and kube-apiserver, installs kfn's CRDs (see
// [DefaultCRDDir]) and those of [WithCRDPaths], and returns when they are
// served. If the binaries are missing it builds them first, which takes
// minutes once per version (see package doc).
//
// The caller must call [Cluster.Stop]. Even if it never does, etcd and the
// API server die with the test process. An error wraps [ErrInvalidOption]
// for a bad option; a failure to start quotes the last output of etcd and
// the API server, and nothing is left running after it.
func Start(opts ...Option) (*Cluster, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	scheme, err := newScheme(o.addToScheme)
	if err != nil {
		return nil, err
	}
	crdPaths, err := crdPaths(o)
	if err != nil {
		return nil, err
	}
	assets := o.assetsDir
	if assets == "" {
		if assets, err = resolveAssets(); err != nil {
			return nil, err
		}
	}

	dir, err := os.MkdirTemp("", "kfn-testcluster-")
	if err != nil {
		return nil, fmt.Errorf("create cluster directory: %w", err)
	}
	wd, err := startWatchdog(dir)
	if err != nil {
		return nil, errors.Join(err, removeDir(dir))
	}
	out := &output{etcd: tail.New(outputTail), apiServer: tail.New(outputTail)}
	env, err := newEnvironment(o, scheme, crdPaths, assets, dir, out)
	if err != nil {
		return nil, errors.Join(err, wd.kill())
	}

	c := &Cluster{Scheme: scheme, env: env, dir: dir, watchdog: wd}
	cfg, err := env.Start()
	if err != nil {
		err = fmt.Errorf("start envtest with binaries from %s: %w%s", assets, err, out)
		return nil, errors.Join(err, c.Stop())
	}
	// envtest makes the webhook serving certificates in os.TempDir, and
	// removes them only in Stop.
	if certs := env.WebhookInstallOptions.LocalServingCertDir; certs != "" {
		if err := wd.removeOnKill(certs); err != nil {
			return nil, errors.Join(err, c.Stop())
		}
	}
	c.Config = cfg
	c.KubeConfig = env.KubeConfig
	c.CRDs = env.CRDs
	c.Client, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create client: %w", err), c.Stop())
	}
	return c, nil
}

// New starts a cluster as [Start] does, for the calling test or benchmark:
// it fails t if the cluster does not start, and stops the cluster when t
// and its subtests are done.
func New(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	c, err := Start(opts...)
	if err != nil {
		t.Fatalf("start test cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop test cluster: %v", err)
		}
	})
	return c
}

// Stop stops the API server and etcd and removes their data. When Stop
// returns, both processes have exited, whether or not it returns an error.
// It is safe to call more than once and from several goroutines; later
// calls return the first call's error.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		envErr := c.env.Stop()
		if envErr != nil {
			// A process that did not stop in time: the watchdog kills
			// whatever is left and removes the directory.
			c.stopErr = errors.Join(fmt.Errorf("stop envtest: %w", envErr), c.watchdog.kill())
			return
		}
		c.stopErr = errors.Join(c.watchdog.dismiss(), removeDir(c.dir))
	})
	return c.stopErr
}

func removeDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove cluster directory: %w", err)
	}
	return nil
}

// newEnvironment configures envtest to keep etcd's data and the API
// server's certificates in dir, where the watchdog looks for them, and to
// write their output to out.
func newEnvironment(o *options, scheme *runtime.Scheme, crdPaths []string, assets, dir string, out *output) (*envtest.Environment, error) {
	etcdDir := filepath.Join(dir, "etcd")
	apiServerDir := filepath.Join(dir, "kube-apiserver")
	for _, d := range []string{etcdDir, apiServerDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("create cluster directory: %w", err)
		}
	}
	return &envtest.Environment{
		Scheme:                   scheme,
		CRDDirectoryPaths:        crdPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: o.startTimeout,
		ControlPlane: envtest.ControlPlane{
			Etcd: &envtest.Etcd{
				Path:    filepath.Join(assets, "etcd"),
				DataDir: etcdDir,
				Out:     outputWriter(out.etcd, os.Stdout),
				Err:     outputWriter(out.etcd, os.Stderr),
			},
			APIServer: &envtest.APIServer{
				Path:    filepath.Join(assets, "kube-apiserver"),
				CertDir: apiServerDir,
				Out:     outputWriter(out.apiServer, os.Stdout),
				Err:     outputWriter(out.apiServer, os.Stderr),
			},
		},
	}, nil
}

// newScheme returns a scheme with client-go's built-in types,
// apiextensions.k8s.io/v1 and the caller's types.
func newScheme(addToScheme []func(*runtime.Scheme) error) (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	builders := append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme}, addToScheme...)
	for _, add := range builders {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return s, nil
}

// crdPaths lists the CRD files and directories to install: kfn's directory
// if it exists, then the caller's.
func crdPaths(o *options) ([]string, error) {
	var paths []string
	if o.kfnCRDs {
		root, err := moduleRoot()
		if err != nil {
			return nil, fmt.Errorf("find kfn CRDs in %s: %w (or start with WithoutKfnCRDs)", DefaultCRDDir, err)
		}
		dir := filepath.Join(root, DefaultCRDDir)
		if _, err := os.Stat(dir); err == nil {
			paths = append(paths, dir)
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("find kfn CRDs: %w", err)
		}
	}
	return append(paths, o.crdPaths...), nil
}

// AddUser returns a configuration that reaches the API server as a user
// of that name and groups, authenticated by a client certificate the API
// server's client CA signed; RBAC grants it nothing until a binding does.
func (c *Cluster) AddUser(name string, groups ...string) (*rest.Config, error) {
	u, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("add user %s: %w", name, err)
	}
	return u.Config(), nil
}
