package plan

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/runtimes"
)

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
		// An override naming the platform's image is the platform's.
		PlatformImage: image == cfg.Images[rt.Name],
		Command:       rt.Command(runtimes.ImageHostDir),
		UserEnv:       v1alpha2.ToCore(fn.Spec.Env),
		Port:          Port,
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
