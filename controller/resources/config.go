package resources

import kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"

// Defaults of Config.
const (
	// DefaultRegistrySecretName is the Secret (in a Function's namespace)
	// whose keys .npmrc and pip.conf configure dependency installs; Kyma's
	// name.
	DefaultRegistrySecretName = "serverless-package-registry-config"
	// DefaultHPACPUUtilization is the CPU target of the HorizontalPodAutoscaler, in percent of requests.
	DefaultHPACPUUtilization int32 = 50
)

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
}

// DefaultConfig returns the defaults, with kfn's image name.
func DefaultConfig() Config {
	return Config{
		RegistrySecretName: DefaultRegistrySecretName,
		GitFetchImage:      "kfn/kfn:latest",
		GitFetchCommand:    []string{"/usr/local/bin/controller", "fetch-source"},
		ScalerAddress:      "kfn-scaler.kfn-system.svc.cluster.local:9090",
		HPACPUUtilization:  DefaultHPACPUUtilization,
	}
}
