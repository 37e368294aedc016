package resources

import (
	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Defaults of Config.
const (
	// DefaultRegistrySecretName is the Secret (in a Function's namespace)
	// whose keys .npmrc and pip.conf configure dependency installs; Kyma's
	// name.
	DefaultRegistrySecretName = "serverless-package-registry-config"
	// DefaultHPACPUUtilization is the CPU target of the HorizontalPodAutoscaler, in percent of requests.
	DefaultHPACPUUtilization int32 = 50
)

// Default size limits of a Function pod's emptyDir volumes
// (Config.Volumes), as quantities. A pod whose volume outgrows its limit is
// evicted by the kubelet, and the Deployment makes a new one.
const (
	// DefaultFunctionDirLimit bounds the function's directory: the source
	// the host copies from the ConfigMap (at most 1 MiB), or a Git
	// Function's directory, plus what the function writes there.
	DefaultFunctionDirLimit = "256Mi"
	// DefaultDependenciesLimit bounds the installed dependencies
	// (node_modules, Python packages): generous for heavy Python packages.
	DefaultDependenciesLimit = "1Gi"
	// DefaultTmpLimit bounds /tmp, which also holds the package managers'
	// caches during the install and a Git Function's clone.
	DefaultTmpLimit = "1Gi"
)

// MinVolumeLimit is the smallest volume size limit the controller's
// configuration accepts.
var MinVolumeLimit = resource.MustParse("1Mi")

// VolumeLimits are the size limits of a Function pod's emptyDir volumes.
type VolumeLimits struct {
	// FunctionDir is the function's directory (source, fetched files).
	FunctionDir resource.Quantity
	// Dependencies is the installed dependencies' directory.
	Dependencies resource.Quantity
	// Tmp is /tmp of every container of the pod.
	Tmp resource.Quantity
}

// Config is the platform configuration the builders depend on beyond the
// plan. Use DefaultConfig and change what differs; the controller's
// configuration validates it.
type Config struct {
	// RegistrySecretName is the optional Secret in a Function's namespace
	// whose keys .npmrc and pip.conf the dependency install uses.
	RegistrySecretName string
	// GitFetchImage is the image of the init container that fetches a Git
	// Function's source: kfn's own server image.
	GitFetchImage string
	// GitFetchCommand is the argv prefix in GitFetchImage that runs the
	// fetch ("controller fetch-source"); flags are appended.
	GitFetchCommand []string
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
	// GitKnownHosts are the installation's SSH known hosts (known_hosts
	// format): the host keys an SSH Git server may present, besides those
	// its Function's Secret pins (gitsource.Auth). The fetch-source
	// container of a Function with key credentials finds them beside the
	// Secret's files.
	GitKnownHosts string
	// Volumes are the size limits of the pods' emptyDir volumes; a zero
	// limit leaves that volume unbounded (the controller's configuration
	// refuses one).
	Volumes VolumeLimits
}

// DefaultConfig returns the defaults, with kfn's image name.
func DefaultConfig() Config {
	return Config{
		RegistrySecretName: DefaultRegistrySecretName,
		GitFetchImage:      "kfn/kfn:latest",
		GitFetchCommand:    []string{"/usr/local/bin/controller", "fetch-source"},
		ScalerAddress:      "kfn-scaler.kfn-system.svc.cluster.local:9090",
		HPACPUUtilization:  DefaultHPACPUUtilization,
		Volumes: VolumeLimits{
			FunctionDir:  quantity(DefaultFunctionDirLimit),
			Dependencies: quantity(DefaultDependenciesLimit),
			Tmp:          quantity(DefaultTmpLimit),
		},
	}
}

// quantity parses s with its canonical form cached (Quantity.String
// caches it on first use), so that two defaults compare equal whether or
// not one was printed.
func quantity(s string) resource.Quantity {
	q := resource.MustParse(s)
	_ = q.String()
	return q
}
