package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/deps"
)

// ErrInvalidFunction is wrapped by every error [For] returns: the Function
// cannot be run as written (unknown runtime, no image, bad resources, a Git
// source whose commit is not resolved yet). The message says what to fix.
var ErrInvalidFunction = errors.New("invalid function")

// ErrUnresolvedCommit is wrapped (with ErrInvalidFunction) when a Git
// Function has no resolved commit for its current url and reference.
var ErrUnresolvedCommit = errors.New("git reference not resolved to a commit")

// Port is the TCP port a function's host listens on in a pod.
const Port int32 = runtimes.DefaultPort

// HealthPath is the path of the startup and liveness probes: 200 while the
// host serves, whether or not its handler loaded.
const HealthPath = runtimes.HealthPath

// ReadyPath is the path of the readiness probe: 200 once the handler is
// loaded (runtimes/README.md).
const ReadyPath = runtimes.ReadyPath

// MaxStartup is how long a host may take to load its handler before the
// startup probe gives up and the container is restarted: Kyma's bound
// (its startup probe allows 30 failures 5 s apart).
const MaxStartup = 150 * time.Second

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

// Source is a function's code: inline files, or a Git directory at a commit.
type Source struct {
	// Files maps a file name in the function directory to its content:
	// the handler (handler.js or handler.py) and, when the Function has
	// any, its dependency file (package.json, which also tells Node.js
	// whether handler.js is an ES module, or requirements.txt). Empty for
	// a Git source, whose files are fetched.
	Files map[string]string
	// Git is set for a Git source.
	Git *GitSource
	// Hash is a hex SHA-256 that changes exactly when the code the
	// function runs changes: the runtime and Files, or the Git URL,
	// directory and commit. Environment, resources and scaling are not
	// part of it.
	Hash string
}

// GitSource is a directory of a Git repository at a resolved commit.
type GitSource struct {
	// URL of the repository.
	URL string
	// BaseDir is the directory inside the repository, cleaned of leading
	// and trailing slashes ("" for the root).
	BaseDir string
	// Reference is the branch, tag or commit the user asked for.
	Reference string
	// Commit is the full hash Reference resolved to.
	Commit string
	// Auth names the credentials Secret; nil for a public repository.
	Auth *v1alpha2.RepositoryAuth
}

// Dependencies is a function's dependency set.
type Dependencies struct {
	// File is the dependency file name for the runtime: package.json or
	// requirements.txt.
	File string
	// Content is the inline dependency file; empty for a Git source.
	Content string
	// Needed reports whether something must be installed before the host
	// starts (runtimes/deps.Needed). Always false for a Git source: see
	// FromSource.
	Needed bool
	// FromSource is true for a Git source: the dependency file, if the
	// directory has one, comes with the fetched files and is installed
	// when present.
	FromSource bool
	// Hash is the installed set's cache key (deps.Key with no registry
	// configuration) when Needed, else "".
	Hash string
}

// Install reports whether running the function needs an install step.
func (d Dependencies) Install() bool { return d.Needed || d.FromSource }

// Probe is an HTTP GET probe of the host.
type Probe struct {
	Path             string
	Port             int32
	Period           time.Duration
	Timeout          time.Duration
	FailureThreshold int32
}

// Scaling is a Function's replica range.
type Scaling struct {
	// Autoscaled is true when an autoscaler owns the replica count
	// (spec.scaleConfig set); Replicas is then not applied.
	Autoscaled bool
	// Replicas is spec.replicas (default 1) for a Function that is not
	// autoscaled.
	Replicas int32
	// MinReplicas and MaxReplicas bound an autoscaled Function; both equal
	// Replicas otherwise.
	MinReplicas int32
	MaxReplicas int32
	// TargetBacklog, TargetConcurrency and CooldownPeriod (seconds) are the
	// queue-depth scaling knobs, defaults written out.
	TargetBacklog     int32
	TargetConcurrency int32
	CooldownPeriod    int32
}

// ScalesToZero reports whether the Function may run no replica at all.
func (s Scaling) ScalesToZero() bool { return s.Autoscaled && s.MinReplicas == 0 }

// Fixed returns the scaling of the same Function with scaleConfig left
// out: exactly Replicas, as Kyma runs every Function. The controller uses
// it when an autoscaler someone else made scales the Function through
// spec.replicas.
func (s Scaling) Fixed() Scaling {
	s.Autoscaled = false
	s.MinReplicas, s.MaxReplicas = s.Replicas, s.Replicas
	return s
}

// For computes the Plan of fn. It reads fn's spec, plus, for a Git source,
// status.gitRepository.commit, which counts only when status.gitRepository
// names the same URL, base directory and reference as the spec (the
// reconciler resolves the reference and records it there first). Every
// error wraps ErrInvalidFunction.
func For(fn *v1alpha2.Function, cfg Config) (Plan, error) {
	rt, err := runtimes.Lookup(string(fn.Spec.Runtime))
	if err != nil {
		return Plan{}, fmt.Errorf("%w: spec.runtime: %w", ErrInvalidFunction, err)
	}
	image := fn.Spec.RuntimeImageOverride
	if image != "" {
		if err := ImageAllowed(image, cfg.ImageRegistries); err != nil {
			return Plan{}, fmt.Errorf("%w: spec.runtimeImageOverride: %w", ErrInvalidFunction, err)
		}
	} else {
		image = cfg.Images[rt.Name]
	}
	if image == "" {
		return Plan{}, fmt.Errorf("%w: no image is configured for runtime %s: set spec.runtimeImageOverride or configure the controller's image for it", ErrInvalidFunction, rt.Name)
	}
	res, profile, err := fn.EffectiveResources(cfg.DefaultProfile)
	if err != nil {
		return Plan{}, fmt.Errorf("%w: spec.resourceConfiguration.function: %w", ErrInvalidFunction, err)
	}

	p := Plan{
		Name:      fn.Name,
		Namespace: fn.Namespace,
		UID:       fn.UID,
		Runtime:   rt,
		Image:     image,
		Command:   rt.Command(runtimes.ImageHostDir),
		UserEnv:   v1alpha2.ToCore(fn.Spec.Env),
		Port:      Port,
		// Every second, the shortest period Kubernetes allows: a pod woken
		// from zero is usually probed once before its host listens, and
		// the next probe is what makes it ready (a 2 s period made cold
		// starts on the real node 1.2 s or 2.7 s, bench/cluster).
		// Startup every second too: when it succeeds the kubelet probes
		// readiness at once, so it adds no probe period to a cold start.
		Startup:     Probe{Path: HealthPath, Port: Port, Period: time.Second, Timeout: time.Second, FailureThreshold: int32(MaxStartup / time.Second)},
		Readiness:   Probe{Path: ReadyPath, Port: Port, Period: time.Second, Timeout: time.Second, FailureThreshold: 3},
		Liveness:    Probe{Path: HealthPath, Port: Port, Period: 10 * time.Second, Timeout: 2 * time.Second, FailureThreshold: 3},
		Resources:   res,
		Profile:     profile,
		Deprecation: fn.Spec.Runtime.DeprecationWarning(),
		Selector:    fn.SelectorLabels(),
		Scaling:     scaling(fn),
	}
	if note := fn.PresetLabelNote(); note != "" {
		p.Notes = append(p.Notes, note)
	}
	token, note := fn.ServiceAccountToken()
	p.ServiceAccountToken = token
	if note != "" {
		p.Notes = append(p.Notes, note)
	}
	p.SecretMounts = slices.Clone(fn.Spec.SecretMounts)
	p.Labels, p.Annotations = podMetadata(fn, p.Selector)

	if err := p.setSource(fn); err != nil {
		return Plan{}, err
	}

	if err := p.setSecurityContexts(fn); err != nil {
		return Plan{}, err
	}
	if err := p.setHost(fn, cfg); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// setSecurityContexts merges the Function's security contexts over the
// restricted defaults.
func (p *Plan) setSecurityContexts(fn *v1alpha2.Function) error {
	var err error
	if p.PodSecurityContext, err = PodSecurityContext(fn.Spec.PodSecurityContext); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidFunction, err)
	}
	if p.ContainerSecurityContext, err = ContainerSecurityContext(fn.Spec.ContainerSecurityContext); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidFunction, err)
	}
	return nil
}

// setHost sets what the host is told (Host), the environment computed from
// it and the termination grace period its timeout sizes.
func (p *Plan) setHost(fn *v1alpha2.Function, cfg Config) error {
	rt := p.Runtime
	p.Host = runtimes.Config{
		FunctionName:           fn.Name,
		Namespace:              fn.Namespace,
		FunctionDir:            rt.FunctionDir(),
		Port:                   int(Port),
		Timeout:                userTimeout(p.UserEnv),
		PublisherAddress:       cfg.PublisherAddress,
		IdentityTokenFile:      path.Join(runtimes.PodIdentityDir, "token"),
		TraceCollectorEndpoint: cfg.TraceCollectorEndpoint,
	}
	if p.Source.Git == nil {
		// The ConfigMap is read-only; the host copies it into the
		// function's writable directory.
		p.Host.SourceDir = runtimes.PodSourceDir
	}
	if p.Dependencies.Install() {
		p.Host.DepsDir = runtimes.PodDepsDir
	}
	if p.Dependencies.Hash != "" {
		// A Git source's dependencies have no hash: they install as
		// before, without the cache.
		p.Host.DependencyCache = cfg.DependencyCacheAddress
	}
	if rt.Language == runtimes.NodeJS {
		// The libraries Kyma's images provide, in kfn's runtime images.
		p.Host.LibsDir = runtimes.ImageNodeLibsDir
	}
	if mem, ok := p.Resources.Limits[corev1.ResourceMemory]; ok && rt.Language == runtimes.Python {
		p.Host.MemoryLimit = mem.String()
	}
	timeout := p.Host.Timeout
	if timeout == 0 {
		timeout = runtimes.DefaultTimeout
	}
	p.TerminationGracePeriod = timeout + ShutdownMargin
	env, err := p.EnvFor(p.Host)
	if err != nil {
		return err
	}
	p.Env = env
	return nil
}

// podMetadata returns the labels and annotations of fn's pods as Kyma
// makes them (see Plan.Labels and Plan.Annotations).
func podMetadata(fn *v1alpha2.Function, selector map[string]string) (labels, annotations map[string]string) {
	labels = make(map[string]string, len(fn.Spec.Labels)+len(selector)+1)
	maps.Copy(labels, fn.Spec.Labels)
	maps.Copy(labels, selector)
	labels[v1alpha2.LabelAppName] = fn.Name
	annotations = map[string]string{v1alpha2.AnnotationIstioProxyConfig: v1alpha2.IstioProxyConfigHoldApplication}
	maps.Copy(annotations, fn.Spec.Annotations)
	annotations[v1alpha2.AnnotationIstioNativeSidecar] = "true"
	return labels, annotations
}

func scaling(fn *v1alpha2.Function) Scaling {
	return Scaling{
		Autoscaled:        fn.Autoscaled(),
		Replicas:          fn.Replicas(),
		MinReplicas:       fn.MinReplicas(),
		MaxReplicas:       fn.MaxReplicas(),
		TargetBacklog:     fn.TargetBacklog(),
		TargetConcurrency: fn.TargetConcurrency(),
		CooldownPeriod:    fn.CooldownPeriod(),
	}
}

func (p *Plan) setSource(fn *v1alpha2.Function) error {
	rt := p.Runtime
	p.Dependencies.File = rt.DepsFile()
	switch src := fn.Spec.Source; {
	case src.Inline != nil:
		p.Source.Files = map[string]string{rt.SourceFile(): src.Inline.Source}
		if strings.TrimSpace(src.Inline.Dependencies) != "" {
			p.Source.Files[rt.DepsFile()] = src.Inline.Dependencies
			p.Dependencies.Content = src.Inline.Dependencies
		}
		needed, err := deps.Needed(rt, src.Inline.Dependencies)
		if err != nil {
			return fmt.Errorf("%w: spec.source.inline.dependencies: %w", ErrInvalidFunction, err)
		}
		if needed {
			p.Dependencies.Needed = true
			p.Dependencies.Hash = deps.Key(rt, src.Inline.Dependencies, deps.Registry{})
		}
		p.Source.Hash = hash("inline", rt.Name, p.Source.Files)
	case src.GitRepository != nil:
		g := src.GitRepository
		st := fn.Status.GitRepository
		baseDir := strings.Trim(strings.TrimSpace(g.BaseDir), "/")
		if st == nil || st.Commit == "" || st.URL != g.URL || st.Reference != g.Reference || strings.Trim(strings.TrimSpace(st.BaseDir), "/") != baseDir {
			return fmt.Errorf("%w: %w: %s at %q", ErrInvalidFunction, ErrUnresolvedCommit, g.URL, g.Reference)
		}
		p.Source.Git = &GitSource{URL: g.URL, BaseDir: baseDir, Reference: g.Reference, Commit: st.Commit, Auth: g.Auth.DeepCopy()}
		p.Dependencies.FromSource = true
		p.Source.Hash = hash("git", rt.Name, map[string]string{"url": g.URL, "baseDir": baseDir, "commit": st.Commit})
	default:
		return fmt.Errorf("%w: spec.source: set inline or gitRepository", ErrInvalidFunction)
	}
	return nil
}

// hash is a hex SHA-256 of a kind, a runtime and a map, with lengths
// written out so that no two inputs collide by concatenation.
func hash(kind, runtime string, files map[string]string) string {
	h := sha256.New()
	fmt.Fprintf(h, "kfn-source-v1\x00%s\x00%s\x00", kind, runtime)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%d:%s\x00%d:%s\x00", len(name), name, len(files[name]), files[name])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// userTimeout returns the handler timeout a static FUNC_TIMEOUT of the
// user's sets (it then also sizes the grace period), or 0. Of two
// definitions, the last counts, as in the container.
func userTimeout(env []corev1.EnvVar) time.Duration {
	for _, e := range slices.Backward(env) {
		if e.Name != runtimes.EnvTimeout {
			continue
		}
		if e.ValueFrom != nil {
			return 0
		}
		s, err := strconv.ParseFloat(strings.TrimSpace(e.Value), 64)
		if err != nil || s <= 0 || s > 365*24*3600 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	return 0
}

// EnvFor returns the container environment for host configuration h: the
// platform variables of Runtime.Env(h), each replaced in place by the
// user's variable of the same name, then the user's other variables in
// spec order; of a name the user defines twice, the last definition. Local mode passes its own directories and port. The error
// wraps ErrInvalidFunction and runtimes.ErrInvalidConfig.
func (p Plan) EnvFor(h runtimes.Config) ([]corev1.EnvVar, error) {
	platform, err := p.Runtime.Env(h)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidFunction, err)
	}
	user := make(map[string]int, len(p.UserEnv))
	for i, e := range p.UserEnv {
		user[e.Name] = i
	}
	out := make([]corev1.EnvVar, 0, len(platform)+len(p.UserEnv))
	used := make(map[string]bool, len(p.UserEnv))
	for _, e := range platform {
		if i, ok := user[e.Name]; ok {
			out = append(out, *p.UserEnv[i].DeepCopy())
			used[e.Name] = true
			continue
		}
		out = append(out, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	for i, e := range p.UserEnv {
		// A name defined twice (Kyma accepts it) is used as Kubernetes
		// does: the last definition wins; it keeps its place.
		if !used[e.Name] && user[e.Name] == i {
			out = append(out, *e.DeepCopy())
		}
	}
	return out, nil
}
