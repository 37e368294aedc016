package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Runtime names the language runtime a Function runs on.
// +kubebuilder:validation:Enum=nodejs20;nodejs22;nodejs24;python312
type Runtime string

// The runtimes kfn serves. NodeJS20 is accepted but deprecated, as in Kyma.
const (
	NodeJS20  Runtime = "nodejs20"
	NodeJS22  Runtime = "nodejs22"
	NodeJS24  Runtime = "nodejs24"
	Python312 Runtime = "python312"
)

// Runtimes lists every runtime the API accepts, newest Node.js first.
var Runtimes = []Runtime{NodeJS24, NodeJS22, Python312, NodeJS20}

// IsNodeJS reports whether r is one of the Node.js runtimes.
func (r Runtime) IsNodeJS() bool { return len(r) > 6 && r[:6] == "nodejs" }

// IsPython reports whether r is one of the Python runtimes.
func (r Runtime) IsPython() bool { return len(r) > 6 && r[:6] == "python" }

// Deprecated reports whether r is accepted only for compatibility.
func (r Runtime) Deprecated() bool { return r == NodeJS20 }

// FunctionSpec is the desired state of a Function.
//
// +kubebuilder:validation:XValidation:rule="!has(self.source.inline) || !has(self.source.inline.dependencies) || !self.runtime.startsWith('nodejs') || (self.source.inline.dependencies.trim().size() == 0 || (self.source.inline.dependencies.trim().startsWith('{') && self.source.inline.dependencies.trim().endsWith('}')))",message="a Node.js Function's dependencies must be a package.json document, starting with '{' and ending with '}'",fieldPath=".source.inline.dependencies"
type FunctionSpec struct {
	// Runtime is the language runtime of the Function: nodejs22, nodejs24,
	// python312, or nodejs20 (deprecated).
	Runtime Runtime `json:"runtime"`

	// RuntimeImageOverride replaces the runtime image the platform would use.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	RuntimeImageOverride string `json:"runtimeImageOverride,omitempty"`

	// Source is the Function's code: exactly one of inline and gitRepository.
	// +kubebuilder:validation:XValidation:rule="has(self.gitRepository) != has(self.inline)",message="use exactly one of spec.source.inline and spec.source.gitRepository"
	Source Source `json:"source"`

	// PodSecurityContext is merged over kfn's secure pod defaults (non-root,
	// user and group 1000, seccomp RuntimeDefault). Settings that would break
	// the restricted Pod Security Standard are refused.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.runAsNonRoot) || self.runAsNonRoot",message="must not be false: Function pods run as non-root",fieldPath=".runAsNonRoot"
	// +kubebuilder:validation:XValidation:rule="!has(self.runAsUser) || self.runAsUser != 0",message="must not be 0 (root)",fieldPath=".runAsUser"
	// +kubebuilder:validation:XValidation:rule="!has(self.seccompProfile) || self.seccompProfile.type != 'Unconfined'",message="Unconfined is not allowed; use RuntimeDefault or Localhost",fieldPath=".seccompProfile.type"
	// +kubebuilder:validation:XValidation:rule="!has(self.windowsOptions) || !has(self.windowsOptions.hostProcess) || !self.windowsOptions.hostProcess",message="host processes are not allowed",fieldPath=".windowsOptions.hostProcess"
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// ContainerSecurityContext is merged over kfn's secure container defaults
	// (no privilege escalation, all capabilities dropped, read-only root
	// filesystem). Settings that would break the restricted Pod Security
	// Standard are refused.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.privileged) || !self.privileged",message="privileged Functions are not allowed",fieldPath=".privileged"
	// +kubebuilder:validation:XValidation:rule="!has(self.allowPrivilegeEscalation) || !self.allowPrivilegeEscalation",message="must not be true: Functions run without privilege escalation",fieldPath=".allowPrivilegeEscalation"
	// +kubebuilder:validation:XValidation:rule="!has(self.runAsNonRoot) || self.runAsNonRoot",message="must not be false: Function pods run as non-root",fieldPath=".runAsNonRoot"
	// +kubebuilder:validation:XValidation:rule="!has(self.runAsUser) || self.runAsUser != 0",message="must not be 0 (root)",fieldPath=".runAsUser"
	// +kubebuilder:validation:XValidation:rule="!has(self.capabilities) || !has(self.capabilities.add) || self.capabilities.add.size() == 0 || (self.capabilities.add.size() == 1 && self.capabilities.add[0] == 'NET_BIND_SERVICE')",message="only NET_BIND_SERVICE may be added",fieldPath=".capabilities.add"
	// +kubebuilder:validation:XValidation:rule="!has(self.seccompProfile) || self.seccompProfile.type != 'Unconfined'",message="Unconfined is not allowed; use RuntimeDefault or Localhost",fieldPath=".seccompProfile.type"
	// +kubebuilder:validation:XValidation:rule="!has(self.procMount) || self.procMount == 'Default'",message="only Default is allowed",fieldPath=".procMount"
	// +kubebuilder:validation:XValidation:rule="!has(self.windowsOptions) || !has(self.windowsOptions.hostProcess) || !self.windowsOptions.hostProcess",message="host processes are not allowed",fieldPath=".windowsOptions.hostProcess"
	ContainerSecurityContext *corev1.SecurityContext `json:"containerSecurityContext,omitempty"`

	// Env are environment variables of the Function's container, as static
	// values or references to ConfigMaps, Secrets and fields. Names the
	// runtime reserves are refused.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:XValidation:rule="self.all(e, !(e.name in ['FUNC_RUNTIME','FUNC_HANDLER','FUNC_PORT','FUNC_HANDLER_SOURCE','FUNC_HANDLER_DEPENDENCIES','MOD_NAME','NODE_PATH','PYTHONPATH']) && !e.name.startsWith('KFN_'))",message="these names are reserved and cannot be used: FUNC_RUNTIME, FUNC_HANDLER, FUNC_PORT, FUNC_HANDLER_SOURCE, FUNC_HANDLER_DEPENDENCIES, MOD_NAME, NODE_PATH, PYTHONPATH and any name starting with KFN_"
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.name.matches('^[-._a-zA-Z][-._a-zA-Z0-9]*$'))",message="a name must consist of letters, digits, '_', '-' or '.', and must not start with a digit"
	// +listType=map
	// +listMapKey=name
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
	// Function. With scaleConfig, the autoscaler owns it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default:=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Template is deprecated and refused: use spec.labels and spec.annotations.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.labels) && !has(self.annotations)",message="spec.template is not supported: use spec.labels and spec.annotations to label and annotate the Function's pods"
	Template *Template `json:"template,omitempty"`

	// SecretMounts mount Secrets of the Function's namespace read-only into
	// the container.
	// +optional
	// +listType=map
	// +listMapKey=secretName
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(m, self.exists_one(o, o.mountPath == m.mountPath))",message="mount paths must be unique"
	SecretMounts []SecretMount `json:"secretMounts,omitempty"`

	// Labels are added to the Function's pods.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k.startsWith('serverless.kyma-project.io/'))",message="keys starting with serverless.kyma-project.io/ are reserved"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$') && k.split('/')[k.split('/').size()-1].size() <= 63 && k.size() <= 317)",message="a key must be a qualified name: an optional DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) < 64)",message="label values cannot be longer than 63 characters"
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations are added to the Function's pods.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k.startsWith('serverless.kyma-project.io/'))",message="keys starting with serverless.kyma-project.io/ are reserved"
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k == 'proxy.istio.io/config')",message="the key proxy.istio.io/config is not allowed"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$') && k.split('/')[k.split('/').size()-1].size() <= 63 && k.size() <= 317)",message="a key must be a qualified name: an optional DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	Annotations map[string]string `json:"annotations,omitempty"`
}

// EnvVar is a corev1.EnvVar whose name is bounded in length, so the API
// server can afford the CEL rules on spec.env. Its JSON form is identical
// to corev1.EnvVar.
type EnvVar struct {
	// Name of the environment variable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
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
	// +kubebuilder:validation:MaxLength=1048576
	Source string `json:"source"`

	// Dependencies is package.json for Node.js or requirements.txt for Python.
	// +optional
	// +kubebuilder:validation:MaxLength=262144
	Dependencies string `json:"dependencies,omitempty"`
}

// GitRepositorySource is code fetched from a Git repository.
//
// +kubebuilder:validation:XValidation:rule="has(self.baseDir) && self.baseDir.trim().size() != 0",message="baseDir is required and cannot be empty"
// +kubebuilder:validation:XValidation:rule="has(self.reference) && self.reference.trim().size() != 0",message="reference is required and cannot be empty"
type GitRepositorySource struct {
	// URL of the repository: http(s)://, git://, ssh:// or the SSH form
	// user@host:path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https?|git|ssh)://[^\\\\s/?#]+(/[^\\\\s]*)?$') || self.matches('^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\\\\s]+$')",message="must be an http(s)://, git:// or ssh:// URL, or the SSH form user@host:path"
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
	// +kubebuilder:validation:MaxLength=1024
	BaseDir string `json:"baseDir,omitempty"`

	// Reference is a branch, tag or commit.
	// +optional
	// +kubebuilder:validation:MaxLength=256
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
	// +kubebuilder:validation:MaxLength=253
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

	// Function is the Function container's resources.
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.profile) != has(self.resources)",message="use either profile or resources, not both"
	// +kubebuilder:validation:XValidation:rule="!has(self.profile) || self.profile in ['XS','S','M','L','XL']",message="must be one of XS, S, M, L, XL",fieldPath=".profile"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.requests) || !('cpu' in self.resources.requests) || quantity(string(self.resources.requests['cpu'])).compareTo(quantity('10m')) >= 0",message="requests.cpu must be at least 10m",fieldPath=".resources"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.requests) || !('memory' in self.resources.requests) || quantity(string(self.resources.requests['memory'])).compareTo(quantity('16Mi')) >= 0",message="requests.memory must be at least 16Mi",fieldPath=".resources"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.requests) || !has(self.resources.limits) || !('cpu' in self.resources.requests) || !('cpu' in self.resources.limits) || quantity(string(self.resources.requests['cpu'])).compareTo(quantity(string(self.resources.limits['cpu']))) <= 0",message="requests.cpu must not exceed limits.cpu",fieldPath=".resources"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.requests) || !has(self.resources.limits) || !('memory' in self.resources.requests) || !('memory' in self.resources.limits) || quantity(string(self.resources.requests['memory'])).compareTo(quantity(string(self.resources.limits['memory']))) <= 0",message="requests.memory must not exceed limits.memory",fieldPath=".resources"
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

// ScaleConfig is the Function's autoscaling range and, as kfn additions,
// its queue-depth scaling knobs.
//
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="minReplicas must be less than or equal to maxReplicas"
type ScaleConfig struct {
	// MinReplicas is the fewest pods. 0 lets the Function scale to zero
	// (needs KEDA in the cluster); Kyma accepts only 1 and more.
	// +kubebuilder:validation:Minimum=0
	MinReplicas *int32 `json:"minReplicas"`

	// MaxReplicas is the most pods.
	// +kubebuilder:validation:Minimum=1
	MaxReplicas *int32 `json:"maxReplicas"`

	// TargetBacklog is how many waiting events one replica is expected to
	// absorb when scaling on queue depth (kfn addition; default 10).
	// +optional
	// +kubebuilder:validation:Minimum=1
	TargetBacklog *int32 `json:"targetBacklog,omitempty"`

	// TargetConcurrency is how many concurrent HTTP requests through the
	// gateway one replica is expected to serve (kfn addition; default 10).
	// +optional
	// +kubebuilder:validation:Minimum=1
	TargetConcurrency *int32 `json:"targetConcurrency,omitempty"`

	// CooldownPeriod is how many seconds without work pass before a Function
	// with minReplicas 0 is scaled to zero (kfn addition; default 300, as KEDA).
	// +optional
	// +kubebuilder:validation:Minimum=0
	CooldownPeriod *int32 `json:"cooldownPeriod,omitempty"`
}

// SecretMount mounts a Secret read-only into the Function's container.
type SecretMount struct {
	// SecretName is a Secret in the Function's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.'"
	SecretName string `json:"secretName"`

	// MountPath is the absolute directory the Secret's keys appear in.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must be an absolute path"
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '..')",message="must not contain '..'"
	// +kubebuilder:validation:XValidation:rule="!self.contains(':')",message="must not contain ':'"
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
