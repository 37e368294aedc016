package testcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// ErrInvalidOption is wrapped by every error that an [Option] returns, so
// callers can tell a mistake in the options from a failure to start.
var ErrInvalidOption = errors.New("invalid option")

// DefaultCRDDir is the directory, relative to the kfn module root, whose CRDs
// [Start] installs unless [WithoutKfnCRDs] is given. It may be missing or
// empty; then no kfn CRD is installed.
const DefaultCRDDir = "api/crds"

// defaultStartTimeout bounds the start of etcd and of the API server, each.
// envtest's own 20 s is too tight on a busy 2-core machine running several
// test binaries at once.
const defaultStartTimeout = 60 * time.Second

// Option configures [Start] and [New].
type Option func(*options) error

type options struct {
	assetsDir    string // tests only: binaries to use instead of resolveAssets
	crdPaths     []string
	kfnCRDs      bool
	addToScheme  []func(*runtime.Scheme) error
	startTimeout time.Duration
}

func newOptions(opts []Option) (*options, error) {
	o := &options{kfnCRDs: true}
	if v := os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"); v == "" {
		o.startTimeout = defaultStartTimeout
	}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// WithCRDPaths installs the CRDs found in these YAML or JSON files, or in the
// files of these directories, in addition to kfn's. Relative paths are taken
// from the working directory, which under go test is the package's directory.
// Every path must exist, or the option fails with [ErrInvalidOption].
func WithCRDPaths(paths ...string) Option {
	return func(o *options) error {
		for _, p := range paths {
			if p == "" {
				return fmt.Errorf("%w: empty CRD path", ErrInvalidOption)
			}
			abs, err := filepath.Abs(p)
			if err != nil {
				return fmt.Errorf("%w: CRD path %q: %w", ErrInvalidOption, p, err)
			}
			if _, err := os.Stat(abs); err != nil {
				return fmt.Errorf("%w: CRD path: %w", ErrInvalidOption, err)
			}
			o.crdPaths = append(o.crdPaths, abs)
		}
		return nil
	}
}

// WithoutKfnCRDs skips the CRDs in [DefaultCRDDir], for tests that want a
// cluster with only the CRDs they name.
func WithoutKfnCRDs() Option {
	return func(o *options) error {
		o.kfnCRDs = false
		return nil
	}
}

// WithScheme registers more types, such as kfn's API types, in the scheme
// that [Cluster.Client] uses. Each function is called once per [Start]; an
// error from it makes Start fail before any process is started.
func WithScheme(addToScheme ...func(*runtime.Scheme) error) Option {
	return func(o *options) error {
		for _, add := range addToScheme {
			if add == nil {
				return fmt.Errorf("%w: nil AddToScheme function", ErrInvalidOption)
			}
		}
		o.addToScheme = append(o.addToScheme, addToScheme...)
		return nil
	}
}

// WithStartTimeout bounds how long etcd and the API server may each take to
// become healthy. The default is 60 s, or KUBEBUILDER_CONTROLPLANE_START_TIMEOUT
// when that is set. d must be positive.
func WithStartTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: start timeout must be positive, got %s", ErrInvalidOption, d)
		}
		o.startTimeout = d
		return nil
	}
}
