package plan

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/contract/host"
	"github.com/kfn-dev/kfn/runtimes"
)

// ErrInvalidFunction is wrapped by every error [For] returns: the Function
// cannot be run as written (unknown runtime, no image, bad resources, a Git
// source whose commit is not resolved yet). The message says what to fix.
var ErrInvalidFunction = errors.New("invalid function")

// ErrUnresolvedCommit is wrapped (with ErrInvalidFunction) when a Git
// Function has no resolved commit for its current url and reference.
var ErrUnresolvedCommit = errors.New("git reference not resolved to a commit")

// Port is the TCP port a function's host listens on in a pod (host.Port).
const Port int32 = host.Port

// HealthPath is the path of the startup and liveness probes: 200 while the
// host serves, whether or not its handler loaded (host.HealthPath).
const HealthPath = host.HealthPath

// ReadyPath is the path of the readiness probe: 200 once the handler is
// loaded (host.ReadyPath, runtimes/README.md).
const ReadyPath = host.ReadyPath

// MaxStartup is how long a host may take to load its handler before the
// startup probe gives up and the container is restarted (host.MaxStartup).
const MaxStartup = host.MaxStartup

// ShutdownMargin is added to the handler timeout to get the termination
// grace period: the host finishes the calls in flight, bounded by the
// timeout, and exits within 5 s after that (runtimes/README.md).
const ShutdownMargin = 5 * time.Second

// Config is the platform configuration a Plan depends on. The zero value
// is usable except for Images, which must name an image for every runtime
// a Function uses without runtimeImageOverride.
type Config struct {
	// Images maps a runtime name (nodejs22, python312, ...) to its image.
	Images map[string]string
	// DefaultProfile is the resource preset of a Function that names none;
	// empty means v1alpha2.DefaultProfile ("L").
	DefaultProfile string
	// PublisherAddress is the URL emitCloudEvent posts to
	// (PUBLISHER_PROXY_ADDRESS); empty leaves it unset.
	PublisherAddress string
	// TraceCollectorEndpoint is the OTLP/HTTP traces URL
	// (TRACE_COLLECTOR_ENDPOINT); empty leaves it unset.
	TraceCollectorEndpoint string
	// DependencyCacheAddress is the dependency cache's base URL
	// (KFN_DEPENDENCY_CACHE, http://<publisher>/_kfn/dependencies), given
	// to the pods of Functions whose dependencies have a hash; empty: no
	// cache, every pod installs its dependencies.
	DependencyCacheAddress string
	// ImageRegistries are the registries, or registry paths, that a
	// spec.runtimeImageOverride must be from (ImageAllowed says how they
	// match); nil allows any image. The images of Images are the
	// platform's own and are not checked.
	ImageRegistries []string
}

// Plan is everything needed to run one Function, as data.
type Plan struct {
	// Name, Namespace and UID identify the Function.
	Name      string
	Namespace string
	UID       types.UID

	// Runtime is the catalog entry of spec.runtime.
	Runtime runtimes.Runtime
	// Image is the runtime image: spec.runtimeImageOverride, else the
	// configured image of the runtime.
	Image string
	// PlatformImage reports that Image is the platform's own image of the
	// runtime (Config.Images), not another from spec.runtimeImageOverride,
	// which may be older than what the platform asks of a host.
	PlatformImage bool
	// Command is the argv that starts the host inside the image
	// (Runtime.Command(runtimes.ImageHostDir)). Local mode uses
	// Runtime.Command with the directory runtimes.WriteHost returned.
	Command []string
	// Host is what the host is told about the function, with the pod's
	// directories; Env is computed from it. Local mode copies it, changes
	// FunctionDir, DepsDir, Port or ListenFD, and calls [Plan.EnvFor].
	Host runtimes.Config
	// UserEnv is the Function's spec.env, valueFrom included, in order.
	UserEnv []corev1.EnvVar
	// Env is the container environment: the platform's variables
	// (runtimes.Runtime.Env of Host), each replaced in place by a user
	// variable of the same name (a user may set FUNC_TIMEOUT, for example),
	// then the other user variables in their order.
	Env []corev1.EnvVar
	// Port is the port the host listens on.
	Port int32
	// Startup, Readiness and Liveness are the HTTP probes of the host. The
	// host listens once it tried to load the handler, so Startup holds
	// Liveness off for up to MaxStartup (a slow import is not killed);
	// Readiness asks for a loaded handler, so a pod whose handler did not
	// load takes no traffic and never replaces a working version.
	Startup   Probe
	Readiness Probe
	Liveness  Probe
	// TerminationGracePeriod is how long a stopping replica may take: the
	// handler timeout plus ShutdownMargin.
	TerminationGracePeriod time.Duration

	// Resources are the container's requests and limits.
	Resources corev1.ResourceRequirements
	// Profile is the preset name, or v1alpha2.ProfileCustom.
	Profile string

	// Deprecation is Kyma's warning for a Function on a deprecated
	// runtime (v1alpha2.Runtime.DeprecationWarning), "" otherwise. The
	// Function runs all the same.
	Deprecation string
	// Notes are what the user should know of how the Function was read
	// that does not stop it: a resource preset label that is not used.
	Notes []string

	// Source is the function's code.
	Source Source
	// Dependencies is the function's dependency set.
	Dependencies Dependencies
	// SecretMounts are Secrets mounted read-only, in spec order.
	SecretMounts []v1alpha2.SecretMount
	// ServiceAccountToken is true when the Function asks for a token of
	// its namespace's default ServiceAccount
	// (v1alpha2.AnnotationServiceAccountToken): the function container,
	// and only it, gets one. False: the pod has no token.
	ServiceAccountToken bool

	// Selector are the labels that select the Function's pods.
	Selector map[string]string
	// Labels are the pod labels, as Kyma's: the Function's spec.labels,
	// Selector, and v1alpha2.LabelAppName the Function's name (each later
	// one wins).
	Labels map[string]string
	// Annotations are the pod annotations, as Kyma's: Istio's
	// holdApplicationUntilProxyStarts, spec.annotations over it, and
	// Istio's native sidecar over both.
	Annotations map[string]string

	// PodSecurityContext and ContainerSecurityContext are the restricted
	// Pod Security Standard's defaults (DefaultPodSecurityContext,
	// DefaultContainerSecurityContext) with spec.podSecurityContext and
	// spec.containerSecurityContext merged over them field by field; every
	// container of the pod, init containers included, gets the container's.
	PodSecurityContext       *corev1.PodSecurityContext
	ContainerSecurityContext *corev1.SecurityContext

	// Scaling is the replica range.
	Scaling Scaling
	// Autoscaler is who owns the replica count. It depends on the cluster
	// (KEDA, Subscriptions, autoscalers of the user's), so For leaves it
	// empty and the controller sets it with SetAutoscaler; see
	// DeploymentReplicas.
	Autoscaler Autoscaler
}

// Probe is an HTTP GET probe of the host.
type Probe struct {
	Path             string
	Port             int32
	Period           time.Duration
	Timeout          time.Duration
	FailureThreshold int32
}
