package function

import (
	"errors"
	"fmt"
	"strings"
	"time"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kfn-dev/kfn/controller/plan"
)

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("invalid controller config")

// Defaults of Config.
const (
	// DefaultRegistrySecretName is the Secret (in a Function's namespace)
	// whose keys .npmrc and pip.conf configure dependency installs; Kyma's
	// name.
	DefaultRegistrySecretName = "serverless-package-registry-config"
	// DefaultGitPollInterval is how often a Git reference is re-resolved.
	DefaultGitPollInterval = 5 * time.Minute
	// DefaultHPACPUUtilization is the CPU target of the HorizontalPodAutoscaler, in percent of requests.
	DefaultHPACPUUtilization int32 = 50
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
)

// Config is the Function controller's configuration. Use DefaultConfig and
// change what differs.
type Config struct {
	// Plan configures the run plan: runtime images, default preset,
	// publisher and trace collector addresses.
	Plan plan.Config
	// FieldManager names the controller in server-side apply.
	FieldManager string
	// RegistrySecretName is the optional Secret in a Function's namespace
	// whose keys .npmrc and pip.conf the dependency install uses.
	RegistrySecretName string
	// GitFetchImage is the image of the init container that fetches a Git
	// Function's source: kfn's own server image.
	GitFetchImage string
	// GitFetchCommand is the argv prefix in GitFetchImage that runs the
	// fetch ("controller fetch-source"); flags are appended.
	GitFetchCommand []string
	// GitPollInterval is how often a Git reference is re-resolved.
	GitPollInterval time.Duration
	// ScalerAddress is kfn's KEDA external scaler (host:port), written into
	// every ScaledObject.
	ScalerAddress string
	// ScalerAuthentication, when set, is the KEDA TriggerAuthentication or
	// ClusterTriggerAuthentication every ScaledObject's trigger names, which
	// gives KEDA the CA (caCert) and client certificate (tlsClientCert,
	// tlsClientKey) of a scaler that serves TLS. Nil: plain gRPC.
	ScalerAuthentication *kedav1alpha1.AuthenticationRef
	// HPACPUUtilization is the HorizontalPodAutoscaler's CPU target in
	// percent of the requests.
	HPACPUUtilization int32
	// Resync is how often each Function is reconciled without a change.
	Resync time.Duration
	// KEDACheckInterval is how often the controller checks whether KEDA's
	// CRDs are installed.
	KEDACheckInterval time.Duration
	// Workers is how many Functions are reconciled at once.
	Workers int
}

// DefaultConfig returns the defaults, with kfn's image names.
func DefaultConfig() Config {
	return Config{
		Plan: plan.Config{
			Images: map[string]string{
				"nodejs20":  "kfn/runtime-nodejs22:latest",
				"nodejs22":  "kfn/runtime-nodejs22:latest",
				"nodejs24":  "kfn/runtime-nodejs24:latest",
				"nodejs26":  "kfn/runtime-nodejs26:latest",
				"python312": "kfn/runtime-python312:latest",
				"python314": "kfn/runtime-python314:latest",
			},
			PublisherAddress: "http://kfn-publisher.kfn-system.svc.cluster.local/publish",
		},
		FieldManager:       DefaultFieldManager,
		RegistrySecretName: DefaultRegistrySecretName,
		GitFetchImage:      "kfn/kfn:latest",
		GitFetchCommand:    []string{"/usr/local/bin/controller", "fetch-source"},
		GitPollInterval:    DefaultGitPollInterval,
		ScalerAddress:      "kfn-scaler.kfn-system.svc.cluster.local:9090",
		HPACPUUtilization:  DefaultHPACPUUtilization,
		Resync:             DefaultResync,
		KEDACheckInterval:  DefaultKEDACheckInterval,
		Workers:            DefaultWorkers,
	}
}

// Validate reports the first setting the controller cannot work with; the
// error wraps ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.FieldManager == "":
		return fmt.Errorf("%w: field manager must not be empty", ErrInvalidConfig)
	case c.GitFetchImage == "" || len(c.GitFetchCommand) == 0:
		return fmt.Errorf("%w: git fetch image and command must not be empty", ErrInvalidConfig)
	case c.GitPollInterval < time.Second:
		return fmt.Errorf("%w: git poll interval %s: want >= 1s", ErrInvalidConfig, c.GitPollInterval)
	case c.HPACPUUtilization < 1:
		return fmt.Errorf("%w: HPA CPU utilization %d: want >= 1", ErrInvalidConfig, c.HPACPUUtilization)
	case c.Resync < time.Second:
		return fmt.Errorf("%w: resync %s: want >= 1s", ErrInvalidConfig, c.Resync)
	case c.Workers < 1:
		return fmt.Errorf("%w: workers %d: want >= 1", ErrInvalidConfig, c.Workers)
	case c.KEDACheckInterval < 100*time.Millisecond:
		return fmt.Errorf("%w: KEDA check interval %s: want >= 100ms", ErrInvalidConfig, c.KEDACheckInterval)
	}
	if a := c.ScalerAuthentication; a != nil {
		if a.Kind != "TriggerAuthentication" && a.Kind != "ClusterTriggerAuthentication" {
			return fmt.Errorf("%w: scaler authentication kind %q: want TriggerAuthentication or ClusterTriggerAuthentication", ErrInvalidConfig, a.Kind)
		}
		if errs := validation.IsDNS1123Subdomain(a.Name); len(errs) > 0 {
			return fmt.Errorf("%w: scaler authentication name %q: %s", ErrInvalidConfig, a.Name, strings.Join(errs, "; "))
		}
	}
	for rt, img := range c.Plan.Images {
		if img == "" {
			return fmt.Errorf("%w: empty image for runtime %s", ErrInvalidConfig, rt)
		}
	}
	return nil
}
