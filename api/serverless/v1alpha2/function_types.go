package v1alpha2

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Runtime names the language runtime a Function runs on.
// +kubebuilder:validation:Enum=nodejs20;nodejs22;nodejs24;nodejs26;python312;python314
type Runtime string

// The runtimes kfn serves. NodeJS20, NodeJS22 and Python312 run but are
// deprecated, as Kyma's schedule has them (Deprecated). NodeJS26 and
// Python314 are Kyma's newest, with its newer handler API (main(req, res),
// main() with Flask, the sdk module).
const (
	NodeJS20  Runtime = "nodejs20"
	NodeJS22  Runtime = "nodejs22"
	NodeJS24  Runtime = "nodejs24"
	NodeJS26  Runtime = "nodejs26"
	Python312 Runtime = "python312"
	Python314 Runtime = "python314"
)

// Runtimes lists every runtime the API accepts: the main(event, context)
// ones, newest Node.js first, then Kyma's newest, then nodejs20, past its
// end of life.
var Runtimes = []Runtime{NodeJS24, NodeJS22, Python312, NodeJS26, Python314, NodeJS20}

// IsNodeJS reports whether r is one of the Node.js runtimes.
func (r Runtime) IsNodeJS() bool { return len(r) > 6 && r[:6] == "nodejs" }

// IsPython reports whether r is one of the Python runtimes.
func (r Runtime) IsPython() bool { return len(r) > 6 && r[:6] == "python" }

// Deprecated reports whether r is deprecated: it runs, and a Function on
// it says so in its status (DeprecationWarning), as in Kyma.
func (r Runtime) Deprecated() bool { _, ok := deprecations[r]; return ok }

// deprecation is a deprecated runtime's place in Kyma's runtime
// deprecation schedule (serverless docs/user/00-90-runtime-deprecation-schedule.md).
type deprecation struct {
	// endOfLife is the month Kyma plans to remove the runtime.
	endOfLife string
	// successor is the runtime to move to.
	successor Runtime
}

var deprecations = map[Runtime]deprecation{
	NodeJS20:  {endOfLife: "April 2026", successor: NodeJS24},
	NodeJS22:  {endOfLife: "November 2026", successor: NodeJS24},
	Python312: {endOfLife: "March 2027", successor: Python314},
}

// EndOfLife returns the month Kyma's schedule ends a deprecated runtime
// ("November 2026"), or "".
func (r Runtime) EndOfLife() string { return deprecations[r].endOfLife }

// Successor returns the runtime a deprecated one's Functions should move
// to, or "".
func (r Runtime) Successor() Runtime { return deprecations[r].successor }

// DeprecationWarning returns what ConfigurationReady says of a Function on
// a deprecated runtime: Kyma's message (Busola shows a Function whose
// message has "Warning" as WARNING), then when Kyma plans to remove it and
// what to move to; "" for a runtime that is not deprecated.
func (r Runtime) DeprecationWarning() string {
	d, ok := deprecations[r]
	if !ok {
		return ""
	}
	next := fmt.Sprintf("%s runs the same handlers", d.successor)
	if d.successor == Python314 {
		next = "python314 has Kyma's newer handler API (main() with Flask and the sdk module)"
	}
	return fmt.Sprintf("Warning: function configured, runtime %s is deprecated and will be removed in the future (end of life: %s; %s)", r, d.endOfLife, next)
}

// FunctionSpec is the desired state of a Function.
type FunctionSpec struct {
	// Runtime is the language runtime of the Function: nodejs22, nodejs24,
	// python312 (handlers main(event, context)), nodejs26, python314
	// (Kyma's newer handler API: main(req, res) and main() with Flask, and
	// the sdk module), or nodejs20. nodejs20, nodejs22 and python312 are
	// deprecated (end of life April 2026, November 2026, March 2027): they
	// run, and the status says so.
	Runtime Runtime `json:"runtime"`

	// RuntimeImageOverride replaces the runtime image the platform would use.
	// +optional
	RuntimeImageOverride string `json:"runtimeImageOverride,omitempty"`

	// Source is the Function's code: exactly one of inline and gitRepository.
	// +kubebuilder:validation:XValidation:rule="has(self.gitRepository) != has(self.inline)",message="use exactly one of spec.source.inline and spec.source.gitRepository"
	Source Source `json:"source"`

	// PodSecurityContext is merged over kfn's secure pod defaults (non-root,
	// user and group 1000, seccomp RuntimeDefault). Settings that would break
	// the restricted Pod Security Standard are refused, and so are SELinux
	// options and sysctls, which a Function has no use for.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.runAsNonRoot) || self.runAsNonRoot",message="must not be false: Function pods run as non-root",fieldPath=".runAsNonRoot"
	// +kubebuilder:validation:XValidation:rule="!has(self.runAsUser) || self.runAsUser != 0",message="must not be 0 (root)",fieldPath=".runAsUser"
	// +kubebuilder:validation:XValidation:rule="!has(self.seccompProfile) || self.seccompProfile.type != 'Unconfined'",message="Unconfined is not allowed; use RuntimeDefault or Localhost",fieldPath=".seccompProfile.type"
	// +kubebuilder:validation:XValidation:rule="!has(self.appArmorProfile) || self.appArmorProfile.type != 'Unconfined'",message="Unconfined is not allowed; use RuntimeDefault or Localhost",fieldPath=".appArmorProfile.type"
	// +kubebuilder:validation:XValidation:rule="!has(self.windowsOptions) || !has(self.windowsOptions.hostProcess) || !self.windowsOptions.hostProcess",message="host processes are not allowed",fieldPath=".windowsOptions.hostProcess"
	// +kubebuilder:validation:XValidation:rule="!has(self.seLinuxOptions)",message="SELinux options are not allowed",fieldPath=".seLinuxOptions"
	// +kubebuilder:validation:XValidation:rule="!has(self.sysctls) || self.sysctls.size() == 0",message="sysctls are not allowed",fieldPath=".sysctls"
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// ContainerSecurityContext is merged over kfn's secure container defaults
	// (no privilege escalation, all capabilities dropped, read-only root
	// filesystem). Settings that would break the restricted Pod Security
	// Standard are refused (a capabilities.drop replaces the default's, so
	// it must drop ALL), and so are SELinux options.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.privileged) || !self.privileged",message="privileged Functions are not allowed",fieldPath=".privileged"
	// +kubebuilder:validation:XValidation:rule="!has(self.allowPrivilegeEscalation) || !self.allowPrivilegeEscalation",message="must not be true: Functions run without privilege escalation",fieldPath=".allowPrivilegeEscalation"
	// +kubebuilder:validation:XValidation:rule="!has(self.runAsNonRoot) || self.runAsNonRoot",message="must not be false: Function pods run as non-root",fieldPath=".runAsNonRoot"
	// +kubebuilder:validation:XValidation:rule="!has(self.runAsUser) || self.runAsUser != 0",message="must not be 0 (root)",fieldPath=".runAsUser"
	// +kubebuilder:validation:XValidation:rule="!has(self.capabilities) || !has(self.capabilities.add) || self.capabilities.add.size() == 0 || (self.capabilities.add.size() == 1 && self.capabilities.add[0] == 'NET_BIND_SERVICE')",message="only NET_BIND_SERVICE may be added",fieldPath=".capabilities.add"
	// +kubebuilder:validation:XValidation:rule="!has(self.capabilities) || !has(self.capabilities.drop) || 'ALL' in self.capabilities.drop",message="must drop ALL: it replaces the default, which does",fieldPath=".capabilities.drop"
	// +kubebuilder:validation:XValidation:rule="!has(self.seccompProfile) || self.seccompProfile.type != 'Unconfined'",message="Unconfined is not allowed; use RuntimeDefault or Localhost",fieldPath=".seccompProfile.type"
	// +kubebuilder:validation:XValidation:rule="!has(self.appArmorProfile) || self.appArmorProfile.type != 'Unconfined'",message="Unconfined is not allowed; use RuntimeDefault or Localhost",fieldPath=".appArmorProfile.type"
	// +kubebuilder:validation:XValidation:rule="!has(self.procMount) || self.procMount == 'Default'",message="only Default is allowed",fieldPath=".procMount"
	// +kubebuilder:validation:XValidation:rule="!has(self.windowsOptions) || !has(self.windowsOptions.hostProcess) || !self.windowsOptions.hostProcess",message="host processes are not allowed",fieldPath=".windowsOptions.hostProcess"
	// +kubebuilder:validation:XValidation:rule="!has(self.seLinuxOptions)",message="SELinux options are not allowed",fieldPath=".seLinuxOptions"
	ContainerSecurityContext *corev1.SecurityContext `json:"containerSecurityContext,omitempty"`

	// Env are environment variables of the Function's container, as static
	// values or references to ConfigMaps, Secrets and fields. The names
	// Kyma reserves are refused; other problems (an invalid name, a name
	// starting with KFN_) show as ConfigurationReady False. A name defined
	// twice is used as Kubernetes does: the last definition wins.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(e, !(e.name in ['FUNC_RUNTIME','FUNC_HANDLER','FUNC_PORT','FUNC_HANDLER_SOURCE','FUNC_HANDLER_DEPENDENCIES','MOD_NAME','NODE_PATH','PYTHONPATH']))",message="these names are reserved and cannot be used: FUNC_RUNTIME, FUNC_HANDLER, FUNC_PORT, FUNC_HANDLER_SOURCE, FUNC_HANDLER_DEPENDENCIES, MOD_NAME, NODE_PATH, PYTHONPATH"
	Env []EnvVar `json:"env,omitempty"`

	// ResourceConfiguration sets the Function's compute resources, by preset
	// profile or explicitly.
	// +optional
	ResourceConfiguration *ResourceConfiguration `json:"resourceConfiguration,omitempty"`

	// ScaleConfig turns on autoscaling between minReplicas and maxReplicas.
	// Kyma accepts minReplicas >= 1 and scales on CPU; kfn also accepts
	// minReplicas 0 (scale to zero, on queue depth, with KEDA) and the
	// optional queue-depth knobs below.
	// +optional
	ScaleConfig *ScaleConfig `json:"scaleConfig,omitempty"`

	// Replicas is the exact number of pods when no autoscaler manages the
	// Function. With scaleConfig, the autoscaler owns it. At most
	// MaxReplicas.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default:=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Template is deprecated and refused: use spec.labels and spec.annotations.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.labels) && !has(self.annotations)",message="spec.template is not supported: use spec.labels and spec.annotations to label and annotate the Function's pods"
	Template *Template `json:"template,omitempty"`

	// SecretMounts mount Secrets of the Function's namespace read-only into
	// the container. Secret names and mount paths must be unique; a problem
	// with them shows as ConfigurationReady False.
	// +optional
	SecretMounts []SecretMount `json:"secretMounts,omitempty"`

	// Labels are added to the Function's pods. Keys starting with
	// serverless.kyma-project.io/ are refused; keys and values Kubernetes
	// would refuse on a pod show as ConfigurationReady False.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k.startsWith('serverless.kyma-project.io/'))",message="keys starting with serverless.kyma-project.io/ are reserved"
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations are added to the Function's pods. Keys starting with
	// serverless.kyma-project.io/ and proxy.istio.io/config are refused, and
	// so are the older AppArmor and seccomp annotations set to unconfined
	// (the restricted Pod Security Standard refuses them too);
	// annotations Kubernetes would refuse on a pod show as
	// ConfigurationReady False.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k.startsWith('serverless.kyma-project.io/'))",message="keys starting with serverless.kyma-project.io/ are reserved"
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k == 'proxy.istio.io/config')",message="the key proxy.istio.io/config is not allowed"
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k.startsWith('container.apparmor.security.beta.kubernetes.io/') && self[k] == 'unconfined')",message="an AppArmor annotation must not be unconfined: use runtime/default or localhost/<profile>"
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k.contains('seccomp.security.alpha.kubernetes.io/') && self[k] == 'unconfined')",message="a seccomp annotation must not be unconfined: use runtime/default or localhost/<profile>"
	Annotations map[string]string `json:"annotations,omitempty"`
}

// EnvVar is an environment variable of the Function's container. Its JSON
// form is identical to corev1.EnvVar.
type EnvVar struct {
	// Name of the environment variable.
	Name string `json:"name"`

	// Value of the variable; ignored when valueFrom is set.
	// +optional
	Value string `json:"value,omitempty"`

	// ValueFrom reads the value from a ConfigMap, Secret, field or resource.
	// +optional
	ValueFrom *corev1.EnvVarSource `json:"valueFrom,omitempty"`
}

// Source is the Function's code: exactly one of Inline and GitRepository.
type Source struct {
	// GitRepository takes the code and dependencies from a directory of a
	// Git repository at a reference.
	// +optional
	GitRepository *GitRepositorySource `json:"gitRepository,omitempty"`

	// Inline holds the code and dependencies in the Function itself.
	// +optional
	Inline *InlineSource `json:"inline,omitempty"`
}

// InlineSource is code and dependencies written in the Function.
type InlineSource struct {
	// Source is the handler's code (handler.js or handler.py).
	// +kubebuilder:validation:MinLength=1
	Source string `json:"source"`

	// Dependencies is package.json for Node.js (a JSON object: starting
	// with '{' and ending with '}') or requirements.txt for Python.
	// +optional
	Dependencies string `json:"dependencies,omitempty"`
}

// GitRepositorySource is code fetched from a Git repository.
//
// +kubebuilder:validation:XValidation:rule="has(self.baseDir) && self.baseDir.trim().size() != 0",message="baseDir is required and cannot be empty"
// +kubebuilder:validation:XValidation:rule="has(self.reference) && self.reference.trim().size() != 0",message="reference is required and cannot be empty"
type GitRepositorySource struct {
	// URL of the repository: http(s)://, git://, ssh:// or the SSH form
	// user@host:path. Another form shows as ConfigurationReady False.
	URL string `json:"url"`

	// Auth names the Secret with the credentials. Required for SSH.
	// +optional
	Auth *RepositoryAuth `json:"auth,omitempty"`

	Repository `json:",inline"`
}

// Repository is a directory of a Git repository at a reference.
type Repository struct {
	// BaseDir is the directory of the repository that holds the code.
	// +optional
	BaseDir string `json:"baseDir,omitempty"`

	// Reference is a branch, tag or commit.
	// +optional
	Reference string `json:"reference,omitempty"`
}

// RepositoryAuthType is how kfn authenticates to a Git repository.
// +kubebuilder:validation:Enum=basic;key
type RepositoryAuthType string

// The repository authentication methods.
const (
	// RepositoryAuthBasic reads the Secret keys username and password (or a token as password).
	RepositoryAuthBasic RepositoryAuthType = "basic"
	// RepositoryAuthSSHKey reads the Secret key ssh-privatekey (legacy: key).
	RepositoryAuthSSHKey RepositoryAuthType = "key"
)

// RepositoryAuth names the Secret with a repository's credentials.
type RepositoryAuth struct {
	// Type is basic (username and password) or key (an SSH private key).
	Type RepositoryAuthType `json:"type"`

	// SecretName is a Secret in the Function's namespace.
	// +kubebuilder:validation:XValidation:rule="self.trim().size() != 0",message="secretName is required and cannot be empty"
	SecretName string `json:"secretName"`
}

// Template is deprecated: it exists so that old manifests get a clear error.
type Template struct {
	// Labels is deprecated: use FunctionSpec.Labels.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations is deprecated: use FunctionSpec.Annotations.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ResourceConfiguration holds the Function's resources and the deprecated
// build resources.
type ResourceConfiguration struct {
	// Build is accepted for compatibility with Kyma and ignored: kfn does not
	// build images.
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.profile) != has(self.resources)",message="use either profile or resources, not both"
	// +kubebuilder:validation:XValidation:rule="!has(self.profile) || self.profile in ['local-dev','slow','normal','fast']",message="must be one of local-dev, slow, normal, fast",fieldPath=".profile"
	Build *ResourceRequirements `json:"build,omitempty"`

	// Function is the Function container's resources. Requests and
	// limits below Kyma's minimum (10m CPU, 16Mi memory) and requests above
	// limits show as ConfigurationReady False.
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.profile) != has(self.resources)",message="use either profile or resources, not both"
	// +kubebuilder:validation:XValidation:rule="!has(self.profile) || self.profile in ['XS','S','M','L','XL']",message="must be one of XS, S, M, L, XL",fieldPath=".profile"
	Function *ResourceRequirements `json:"function,omitempty"`
}

// ResourceRequirements is either a preset profile or explicit resources.
type ResourceRequirements struct {
	// Profile is the name of a preset: XS, S, M, L or XL for functions.
	// +optional
	Profile string `json:"profile,omitempty"`

	// Resources are explicit requests and limits.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// Caps on the counts a Function sets. The CRD holds every Function to
// them (and so does kfn dev's offline admission), so that none asks the
// cluster, or kfn dev's machine, for more than it can hold: replicas of
// 2^31 made its ReplicaSet create pods until the namespace's ResourceQuota,
// if it has one, refused them. A namespace's total is its ResourceQuota's.
// Kyma sets none of these. The lists and maps a Function sets (env,
// secretMounts, labels, annotations) are bounded by the size of the object
// (etcd's 1.5 MiB) only, as in Kyma, whose manifests with many of them
// stay valid (testdata/valid/many-labels.yaml).
const (
	// MaxReplicas bounds spec.replicas, scaleConfig.minReplicas and
	// scaleConfig.maxReplicas.
	MaxReplicas = 100
	// MaxTargetBacklog bounds scaleConfig.targetBacklog: a Subscription's
	// largest backlog (eventing's MaxMaxBacklog).
	MaxTargetBacklog = 1000000
	// MaxTargetConcurrency bounds scaleConfig.targetConcurrency.
	MaxTargetConcurrency = 10000
	// MaxCooldownPeriod bounds scaleConfig.cooldownPeriod: a day.
	MaxCooldownPeriod = 86400
)

// ScaleConfig is the Function's autoscaling range and, as kfn additions,
// its queue-depth scaling knobs. A minReplicas above maxReplicas shows as
// ConfigurationReady False.
type ScaleConfig struct {
	// MinReplicas is the fewest pods. 0 lets the Function scale to zero
	// (needs KEDA in the cluster); Kyma accepts only 1 and more. At most
	// MaxReplicas.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MinReplicas *int32 `json:"minReplicas"`

	// MaxReplicas is the most pods, at most MaxReplicas.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxReplicas *int32 `json:"maxReplicas"`

	// TargetBacklog is how many waiting events one replica is expected to
	// absorb when scaling on queue depth (kfn addition; default 10), at
	// most MaxTargetBacklog.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	TargetBacklog *int32 `json:"targetBacklog,omitempty"`

	// TargetConcurrency is how many concurrent HTTP requests through the
	// gateway one replica is expected to serve (kfn addition; default 10),
	// at most MaxTargetConcurrency.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	TargetConcurrency *int32 `json:"targetConcurrency,omitempty"`

	// CooldownPeriod is how many seconds without work pass before a Function
	// with minReplicas 0 is scaled to zero (kfn addition; default 300, as
	// KEDA), at most MaxCooldownPeriod (a day).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	CooldownPeriod *int32 `json:"cooldownPeriod,omitempty"`
}

// SecretMount mounts a Secret read-only into the Function's container.
type SecretMount struct {
	// SecretName is a Secret in the Function's namespace (a DNS-1123
	// subdomain).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`

	// MountPath is the absolute directory the Secret's keys appear in
	// (without '..' or ':').
	// +kubebuilder:validation:MinLength=1
	MountPath string `json:"mountPath"`
}

// FunctionStatus is the observed state of a Function.
type FunctionStatus struct {
	// ObservedGeneration is the generation the controller last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Runtime is the runtime the Function runs on.
	// +optional
	Runtime Runtime `json:"runtime,omitempty"`
	// RuntimeImage is the image the Function's pods run.
	// +optional
	RuntimeImage string `json:"runtimeImage,omitempty"`
	// Replicas is the number of non-terminated pods of the Function.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// PodSelector selects the Function's pods (for the scale subresource).
	// +optional
	PodSelector string `json:"podSelector,omitempty"`
	// FunctionResourceProfile is the preset in use, or "custom".
	// +optional
	FunctionResourceProfile string `json:"functionResourceProfile,omitempty"`
	// Conditions are ConfigurationReady and Running, as in Kyma's current
	// API, and BuildReady, deprecated, a copy of ConfigurationReady kept for
	// clients of Kyma's build-based releases.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// GitRepository is the repository, directory, reference and resolved
	// commit of a Git Function.
	// +optional
	GitRepository *GitRepositoryStatus `json:"gitRepository,omitempty"`
	// Commit is deprecated: see gitRepository.commit.
	// +optional
	Commit string `json:"commit,omitempty"`
	// Repository (baseDir, reference) is deprecated: see gitRepository.
	Repository `json:",inline"`
}

// GitRepositoryStatus is the Git source a Function runs.
type GitRepositoryStatus struct {
	// URL of the repository.
	URL string `json:"url"`
	// Repository is the directory and reference.
	Repository `json:",inline"`
	// Commit is the commit the reference resolved to.
	// +optional
	Commit string `json:"commit,omitempty"`
}

// Function runs a piece of code on a language runtime, scaled by the
// platform and triggered by HTTP requests or events.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.podSelector
// +kubebuilder:resource:categories={all,kyma-serverless},shortName={fn,fns}
// +kubebuilder:printcolumn:name="Configured",type="string",JSONPath=".status.conditions[?(@.type=='ConfigurationReady')].status"
// +kubebuilder:printcolumn:name="Running",type="string",JSONPath=".status.conditions[?(@.type=='Running')].status"
// +kubebuilder:printcolumn:name="Runtime",type="string",JSONPath=".spec.runtime"
// +kubebuilder:printcolumn:name="Version",type="integer",JSONPath=".metadata.generation"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type Function struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec FunctionSpec `json:"spec"`
	// Status is the observed state, written by the controller.
	// +optional
	Status FunctionStatus `json:"status,omitempty"`
}

// FunctionList is a list of Functions.
//
// +kubebuilder:object:root=true
type FunctionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Functions.
	Items []Function `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Function{}, &FunctionList{})
}
