package function

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kfn-dev/kfn/controller/pool"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("invalid controller config")

// Defaults of Config.
const (
	// DefaultGitPollInterval is how often a Git reference is re-resolved.
	DefaultGitPollInterval = 5 * time.Minute
	// DefaultFieldManager is the server-side apply field manager.
	DefaultFieldManager = "kfn-function-controller"
	// DefaultResync is how often every Function is reconciled even when
	// nothing changed, which repairs children nobody watches (ScaledObjects).
	DefaultResync = 10 * time.Minute
	// DefaultKEDACheckInterval is how often the controller looks for KEDA's
	// CRDs in the cluster.
	DefaultKEDACheckInterval = 30 * time.Second
	// DefaultWorkers is how many Functions are reconciled concurrently.
	DefaultWorkers = 8
	// MaxWarmPoolSize bounds Config.WarmPoolSize (pool.MaxSize).
	MaxWarmPoolSize = pool.MaxSize
)

// Config is the Function controller's configuration. Use DefaultConfig and
// change what differs.
type Config struct {
	// Plan configures the run plan: runtime images, default preset,
	// publisher and trace collector addresses.
	Plan plan.Config
	// FieldManager names the controller in server-side apply.
	FieldManager string
	// Resources configures the objects built for a Function: the Git
	// fetch image, the registry Secret, the scaler's address and
	// authentication, the HPA's CPU target.
	Resources resources.Config
	// GitPollInterval is how often a Git reference is re-resolved.
	GitPollInterval time.Duration
	// GitEgress is where resolving a Git Function's reference may connect
	// (its URL and the redirects its server answers). Its zero value, the
	// default, refuses loopback, link-local (the cloud metadata address),
	// multicast and unspecified addresses; NewReconciler adds the API
	// server's addresses (its Service's and the one the controller talks
	// to) when Deny is nil. Tests whose repositories are on loopback set
	// AllowLoopback.
	GitEgress egress.Policy
	// Resync is how often each Function is reconciled without a change.
	Resync time.Duration
	// KEDACheckInterval is how often the controller checks whether KEDA's
	// CRDs are installed.
	KEDACheckInterval time.Duration
	// Workers is how many Functions are reconciled at once.
	Workers int
	// WarmPool runs the warm pool (package controller/pool), which keeps
	// standby pods for Functions that scale to zero.
	WarmPool bool
	// WarmPoolSize is how many standby pods the warm pool keeps per
	// namespace and shape of Function that scales to zero, unless the
	// namespace's pool.AnnotationSize says otherwise: the most the pool's
	// demand policy keeps (pool.Config.Size).
	WarmPoolSize int
	// WarmPoolMaxStandby bounds the standby pods of all namespaces
	// together (pool.Config.MaxStandby).
	WarmPoolMaxStandby int
	// WarmPoolIdle is how long a namespace's pool keeps a standby pod
	// after its Functions last woke or joined it (pool.Config.Idle).
	WarmPoolIdle time.Duration
}

// DefaultConfig returns the defaults, with kfn's image names.
// The images' registry (docker.io/kfn) is the only one a
// runtimeImageOverride may name (plan.Config.ImageRegistries).
func DefaultConfig() Config {
	images := map[string]string{
		"nodejs20":  "kfn/runtime-nodejs22:latest",
		"nodejs22":  "kfn/runtime-nodejs22:latest",
		"nodejs24":  "kfn/runtime-nodejs24:latest",
		"nodejs26":  "kfn/runtime-nodejs26:latest",
		"python312": "kfn/runtime-python312:latest",
		"python314": "kfn/runtime-python314:latest",
	}
	return Config{
		Plan: plan.Config{
			Images:           images,
			PublisherAddress: "http://kfn-publisher.kfn-system.svc.cluster.local/publish",
			ImageRegistries:  plan.RegistriesOf(images),
		},
		FieldManager:       DefaultFieldManager,
		Resources:          resources.DefaultConfig(),
		GitPollInterval:    DefaultGitPollInterval,
		Resync:             DefaultResync,
		KEDACheckInterval:  DefaultKEDACheckInterval,
		Workers:            DefaultWorkers,
		WarmPoolMaxStandby: pool.DefaultMaxStandby,
		WarmPoolIdle:       pool.DefaultIdle,
	}
}

// Validate reports the first setting the controller cannot work with; the
// error wraps ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.FieldManager == "":
		return fmt.Errorf("%w: field manager must not be empty", ErrInvalidConfig)
	case c.Resources.GitFetchImage == "" || len(c.Resources.GitFetchCommand) == 0:
		return fmt.Errorf("%w: git fetch image and command must not be empty", ErrInvalidConfig)
	case c.GitPollInterval < time.Second:
		return fmt.Errorf("%w: git poll interval %s: want >= 1s", ErrInvalidConfig, c.GitPollInterval)
	case c.Resources.HPACPUUtilization < 1:
		return fmt.Errorf("%w: HPA CPU utilization %d: want >= 1", ErrInvalidConfig, c.Resources.HPACPUUtilization)
	case c.Resync < time.Second:
		return fmt.Errorf("%w: resync %s: want >= 1s", ErrInvalidConfig, c.Resync)
	case c.Workers < 1:
		return fmt.Errorf("%w: workers %d: want >= 1", ErrInvalidConfig, c.Workers)
	case c.WarmPoolSize < 0 || c.WarmPoolSize > MaxWarmPoolSize:
		return fmt.Errorf("%w: warm pool size %d: want 0..%d", ErrInvalidConfig, c.WarmPoolSize, MaxWarmPoolSize)
	case c.WarmPoolMaxStandby < 1 || c.WarmPoolMaxStandby > pool.MaxMaxStandby:
		return fmt.Errorf("%w: warm pool's most standby pods %d: want 1..%d", ErrInvalidConfig, c.WarmPoolMaxStandby, pool.MaxMaxStandby)
	case c.WarmPoolIdle < time.Minute:
		return fmt.Errorf("%w: warm pool idle %s: want >= 1m", ErrInvalidConfig, c.WarmPoolIdle)
	case c.KEDACheckInterval < 100*time.Millisecond:
		return fmt.Errorf("%w: KEDA check interval %s: want >= 100ms", ErrInvalidConfig, c.KEDACheckInterval)
	}
	if a := c.Resources.ScalerAuthentication; a != nil {
		if a.Kind != "TriggerAuthentication" && a.Kind != "ClusterTriggerAuthentication" {
			return fmt.Errorf("%w: scaler authentication kind %q: want TriggerAuthentication or ClusterTriggerAuthentication", ErrInvalidConfig, a.Kind)
		}
		if errs := validation.IsDNS1123Subdomain(a.Name); len(errs) > 0 {
			return fmt.Errorf("%w: scaler authentication name %q: %s", ErrInvalidConfig, a.Name, strings.Join(errs, "; "))
		}
	}
	if a := c.Plan.DependencyCacheAddress; a != "" {
		if u, err := url.Parse(a); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			return fmt.Errorf("%w: dependency cache address %q: want an http(s) URL without a query (http://kfn-publisher.kfn-system.svc.cluster.local/_kfn/dependencies), or empty for none", ErrInvalidConfig, a)
		}
	}
	for rt, img := range c.Plan.Images {
		if img == "" {
			return fmt.Errorf("%w: empty image for runtime %s", ErrInvalidConfig, rt)
		}
	}
	if len(c.Plan.ImageRegistries) == 0 {
		return fmt.Errorf("%w: no allowed image registries: name at least one (ghcr.io/kfn-dev), or * to allow any image", ErrInvalidConfig)
	}
	for _, r := range c.Plan.ImageRegistries {
		if plan.NormalizeRegistry(r) == "" || strings.ContainsAny(r, "@ ") {
			return fmt.Errorf("%w: allowed image registry %q: want a registry host or path (ghcr.io/kfn-dev), or * for any", ErrInvalidConfig, r)
		}
	}
	v := c.Resources.Volumes
	for name, q := range map[string]resource.Quantity{"function directory": v.FunctionDir, "dependencies": v.Dependencies, "tmp": v.Tmp} {
		if q.Cmp(resources.MinVolumeLimit) < 0 {
			return fmt.Errorf("%w: %s volume limit %s: want >= %s", ErrInvalidConfig, name, q.String(), resources.MinVolumeLimit.String())
		}
	}
	return nil
}
