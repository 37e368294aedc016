package function

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/plan"
	"github.com/kfn-dev/kfn/runtimes"
)

// Names of the containers and volumes of a Function pod.
const (
	// ContainerFunction runs the runtime host (Kyma's name).
	ContainerFunction = "function"
	// ContainerFetchSource fetches a Git Function's directory.
	ContainerFetchSource = "fetch-source"
	// ContainerInstallDeps installs the Function's dependencies.
	ContainerInstallDeps = "install-dependencies"

	volumeFunction = "function"
	volumeSource   = "source"
	volumeDeps     = "dependencies"
	volumeTmp      = "tmp"
	volumeRegistry = "registry-config"
	volumeGitAuth  = "git-auth"
)

// Paths inside the init containers.
const (
	// RegistryConfigDir is where the registry config Secret's .npmrc and
	// pip.conf appear in the install container.
	RegistryConfigDir = "/etc/kfn/registry"
	// GitAuthDir is where the Git credentials Secret appears in the fetch
	// container.
	GitAuthDir = "/etc/kfn/git-auth"
)

// preStopSleep lets endpoints drop a stopping pod before its host stops
// accepting connections.
const preStopSleep = 2 * time.Second

// Deployment builds the Function's Deployment from its plan: the runtime
// image running the host with the plan's argv, env, port, probes and
// resources; the function's directory a writable emptyDir (as Kyma's), into
// which the host copies the source from the read-only ConfigMap (or an init
// container fetches it, for Git), and the working directory; an install
// init container only when there are dependencies; spec.secretMounts
// read-only; writable /tmp; the root file system read-only; the
// restricted Pod Security Standard with the user's security contexts merged
// over it; rolling updates that never take a ready replica away; and the
// pod template annotated with the source and dependency hashes so that a
// change of them rolls the pods. spec.replicas is set only when setReplicas
// (no autoscaler owns it); replicas is the value then.
func Deployment(fn *v1alpha2.Function, p plan.Plan, cfg Config, setReplicas bool, replicas int32) (*appsv1ac.DeploymentApplyConfiguration, error) {
	podSC, err := PodSecurityContext(fn.Spec.PodSecurityContext)
	if err != nil {
		return nil, err
	}
	containerSC, err := ContainerSecurityContext(fn.Spec.ContainerSecurityContext)
	if err != nil {
		return nil, err
	}

	volumes, mounts := functionVolumes(p, cfg)
	var initContainers []*corev1ac.ContainerApplyConfiguration
	if g := p.Source.Git; g != nil {
		initContainers = append(initContainers, fetchContainer(p, cfg, containerSC))
	}
	if p.Dependencies.Install() {
		initContainers = append(initContainers, installContainer(p, containerSC))
	}

	container := corev1ac.Container().
		WithName(ContainerFunction).
		WithImage(p.Image).
		WithCommand(p.Command...).
		WithWorkingDir(p.Host.FunctionDir).
		WithEnv(envApply(p.Env)...).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(p.Port).WithProtocol(corev1.ProtocolTCP)).
		WithStartupProbe(probe(p.Startup)).
		WithReadinessProbe(probe(p.Readiness)).
		WithLivenessProbe(probe(p.Liveness)).
		WithResources(resources(p.Resources)).
		WithVolumeMounts(mounts...).
		WithSecurityContext(containerSC).
		WithLifecycle(corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().
			WithSleep(corev1ac.SleepAction().WithSeconds(int64(preStopSleep / time.Second))))).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError)

	annotations := maps.Clone(p.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationSourceHash] = p.Source.Hash
	if p.Dependencies.Hash != "" {
		annotations[AnnotationDepsHash] = p.Dependencies.Hash
	}

	grace := p.TerminationGracePeriod + preStopSleep
	pod := corev1ac.PodSpec().
		WithSecurityContext(podSC).
		WithInitContainers(initContainers...).
		WithContainers(container).
		WithVolumes(volumes...).
		WithTerminationGracePeriodSeconds(int64(math.Ceil(grace.Seconds())))

	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(p.Selector)).
		WithRevisionHistoryLimit(3).
		WithStrategy(appsv1ac.DeploymentStrategy().
			WithType(appsv1.RollingUpdateDeploymentStrategyType).
			WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
				WithMaxUnavailable(intstr.FromInt32(0)).
				WithMaxSurge(intstr.FromString("25%")))).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(p.Labels).
			WithAnnotations(annotations).
			WithSpec(pod))
	if setReplicas {
		spec.WithReplicas(replicas)
	}
	labels := maps.Clone(p.Labels)
	delete(labels, v1alpha2.LabelResource)
	return appsv1ac.Deployment(p.Name, p.Namespace).
		WithLabels(labels).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(spec), nil
}

func functionVolumes(p plan.Plan, cfg Config) ([]*corev1ac.VolumeApplyConfiguration, []*corev1ac.VolumeMountApplyConfiguration) {
	volumes := []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName(volumeFunction).WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
	}
	mounts := []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName(volumeFunction).WithMountPath(p.Host.FunctionDir),
	}
	if p.Source.Git == nil {
		volumes = append(volumes, corev1ac.Volume().WithName(volumeSource).
			WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(p.Name).WithDefaultMode(0o444)))
		mounts = append(mounts, corev1ac.VolumeMount().WithName(volumeSource).WithMountPath(runtimes.PodSourceDir).WithReadOnly(true))
	}
	if p.Dependencies.Install() {
		volumes = append(volumes,
			corev1ac.Volume().WithName(volumeDeps).WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
			corev1ac.Volume().WithName(volumeRegistry).WithSecret(corev1ac.SecretVolumeSource().
				WithSecretName(cfg.RegistrySecretName).WithOptional(true).WithDefaultMode(0o440)))
		mounts = append(mounts, corev1ac.VolumeMount().WithName(volumeDeps).WithMountPath(runtimes.PodDepsDir).WithReadOnly(true))
	}
	if g := p.Source.Git; g != nil && g.Auth != nil {
		volumes = append(volumes, corev1ac.Volume().WithName(volumeGitAuth).WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(g.Auth.SecretName).WithDefaultMode(0o440)))
	}
	volumes = append(volumes, corev1ac.Volume().WithName(volumeTmp).WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
	mounts = append(mounts, corev1ac.VolumeMount().WithName(volumeTmp).WithMountPath("/tmp"))
	for i, m := range p.SecretMounts {
		name := "secret-mount-" + strconv.Itoa(i)
		volumes = append(volumes, corev1ac.Volume().WithName(name).WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(m.SecretName).WithDefaultMode(0o444)))
		mounts = append(mounts, corev1ac.VolumeMount().WithName(name).WithMountPath(m.MountPath).WithReadOnly(true))
	}
	return volumes, mounts
}

// fetchContainer runs kfn's fetch-source command, which clones the
// repository, checks out the resolved commit and copies baseDir into the
// function volume.
func fetchContainer(p plan.Plan, cfg Config, sc *corev1ac.SecurityContextApplyConfiguration) *corev1ac.ContainerApplyConfiguration {
	g := p.Source.Git
	args := []string{
		"--url=" + g.URL,
		"--reference=" + g.Reference,
		"--commit=" + g.Commit,
		"--base-dir=" + g.BaseDir,
		"--dest=" + p.Host.FunctionDir,
	}
	mounts := []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName(volumeFunction).WithMountPath(p.Host.FunctionDir),
		corev1ac.VolumeMount().WithName(volumeTmp).WithMountPath("/tmp"),
	}
	if g.Auth != nil {
		args = append(args, "--auth-type="+string(g.Auth.Type), "--auth-dir="+GitAuthDir)
		mounts = append(mounts, corev1ac.VolumeMount().WithName(volumeGitAuth).WithMountPath(GitAuthDir).WithReadOnly(true))
	}
	return corev1ac.Container().
		WithName(ContainerFetchSource).
		WithImage(cfg.GitFetchImage).
		WithCommand(cfg.GitFetchCommand...).
		WithArgs(args...).
		WithEnv(corev1ac.EnvVar().WithName("HOME").WithValue("/tmp")).
		WithResources(resources(p.Resources)).
		WithVolumeMounts(mounts...).
		WithSecurityContext(sc).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError)
}

// installContainer runs the runtime image's package manager, as
// runtimes/README.md describes, into the dependencies volume. It reads the
// dependency file from the source ConfigMap, or from the fetched directory
// of a Git Function, which may have none: then it does nothing.
func installContainer(p plan.Plan, sc *corev1ac.SecurityContextApplyConfiguration) *corev1ac.ContainerApplyConfiguration {
	rt := p.Runtime
	srcDir, srcVolume := runtimes.PodSourceDir, volumeSource
	if p.Source.Git != nil {
		srcDir, srcVolume = p.Host.FunctionDir, volumeFunction
	}
	src := path.Join(srcDir, rt.DepsFile())
	dst := path.Join(runtimes.PodDepsDir, rt.DepsFile())
	var script []string
	script = append(script, "set -eu")
	if p.Dependencies.FromSource {
		script = append(script, fmt.Sprintf("if [ ! -f %s ]; then echo 'no %s: nothing to install'; exit 0; fi", src, rt.DepsFile()))
	}
	script = append(script, fmt.Sprintf("cp %s %s", src, dst), "cd "+runtimes.PodDepsDir)
	if rt.Language == runtimes.Python {
		conf := path.Join(RegistryConfigDir, "pip.conf")
		script = append(script,
			fmt.Sprintf("if [ -f %s ]; then export PIP_CONFIG_FILE=%s; fi", conf, conf),
			fmt.Sprintf("exec python3 -m pip install --no-input --disable-pip-version-check --no-warn-script-location --target %s -r %s",
				rt.DepsLibDir(runtimes.PodDepsDir), dst))
	} else {
		conf := path.Join(RegistryConfigDir, ".npmrc")
		script = append(script,
			fmt.Sprintf("if [ -f %s ]; then export npm_config_userconfig=%s; fi", conf, conf),
			"exec npm install --omit=dev --no-audit --no-fund --no-update-notifier")
	}
	return corev1ac.Container().
		WithName(ContainerInstallDeps).
		WithImage(p.Image).
		WithCommand("/bin/sh", "-c", strings.Join(script, "\n")).
		WithEnv(
			corev1ac.EnvVar().WithName("HOME").WithValue("/tmp"),
			corev1ac.EnvVar().WithName("npm_config_cache").WithValue("/tmp/.npm"),
			corev1ac.EnvVar().WithName("PIP_CACHE_DIR").WithValue("/tmp/.pip-cache"),
		).
		WithResources(resources(p.Resources)).
		WithVolumeMounts(
			corev1ac.VolumeMount().WithName(srcVolume).WithMountPath(srcDir).WithReadOnly(true),
			corev1ac.VolumeMount().WithName(volumeDeps).WithMountPath(runtimes.PodDepsDir),
			corev1ac.VolumeMount().WithName(volumeTmp).WithMountPath("/tmp"),
			corev1ac.VolumeMount().WithName(volumeRegistry).WithMountPath(RegistryConfigDir).WithReadOnly(true),
		).
		WithSecurityContext(sc).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError)
}

func probe(p plan.Probe) *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().
		WithHTTPGet(corev1ac.HTTPGetAction().WithPath(p.Path).WithPort(intstr.FromInt32(p.Port))).
		WithPeriodSeconds(seconds(p.Period)).
		WithTimeoutSeconds(seconds(p.Timeout)).
		WithFailureThreshold(p.FailureThreshold)
}

func seconds(d time.Duration) int32 {
	return int32(max(1, math.Ceil(d.Seconds())))
}

func resources(r corev1.ResourceRequirements) *corev1ac.ResourceRequirementsApplyConfiguration {
	ac := corev1ac.ResourceRequirements()
	if len(r.Requests) > 0 {
		ac.WithRequests(r.Requests.DeepCopy())
	}
	if len(r.Limits) > 0 {
		ac.WithLimits(r.Limits.DeepCopy())
	}
	return ac
}

func envApply(env []corev1.EnvVar) []*corev1ac.EnvVarApplyConfiguration {
	out := make([]*corev1ac.EnvVarApplyConfiguration, 0, len(env))
	for _, e := range env {
		ac := corev1ac.EnvVar().WithName(e.Name)
		if e.ValueFrom != nil {
			var from corev1ac.EnvVarSourceApplyConfiguration
			mustConvert(e.ValueFrom, &from)
			ac.WithValueFrom(&from)
		} else {
			ac.WithValue(e.Value)
		}
		out = append(out, ac)
	}
	return out
}

// Secure defaults of the restricted Pod Security Standard, user and group
// 1000 as in Kyma and the runtime images.
func defaultPodSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](1000),
		RunAsGroup:     ptr.To[int64](1000),
		FSGroup:        ptr.To[int64](1000),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func defaultContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Privileged:               ptr.To(false),
	}
}

// PodSecurityContext returns kfn's restricted pod defaults with the
// user's context merged over them, field by field (a JSON merge patch: what
// the user sets wins, what the user leaves out keeps the default).
func PodSecurityContext(user *corev1.PodSecurityContext) (*corev1ac.PodSecurityContextApplyConfiguration, error) {
	var ac corev1ac.PodSecurityContextApplyConfiguration
	var patch any
	if user != nil {
		patch = user
	}
	if err := mergeOver(defaultPodSecurityContext(), patch, &ac); err != nil {
		return nil, fmt.Errorf("merge spec.podSecurityContext: %w", err)
	}
	return &ac, nil
}

// ContainerSecurityContext returns kfn's restricted container defaults with
// the user's context merged over them, as PodSecurityContext does.
func ContainerSecurityContext(user *corev1.SecurityContext) (*corev1ac.SecurityContextApplyConfiguration, error) {
	var ac corev1ac.SecurityContextApplyConfiguration
	var patch any
	if user != nil {
		patch = user
	}
	if err := mergeOver(defaultContainerSecurityContext(), patch, &ac); err != nil {
		return nil, fmt.Errorf("merge spec.containerSecurityContext: %w", err)
	}
	return &ac, nil
}

// mergeOver merges user (nil: nothing) over defaults as a JSON merge patch
// and decodes the result into out.
func mergeOver(defaults, user, out any) error {
	doc, err := json.Marshal(defaults)
	if err != nil {
		return err
	}
	if user != nil {
		patch, err := json.Marshal(user)
		if err != nil {
			return err
		}
		if doc, err = jsonpatch.MergePatch(doc, patch); err != nil {
			return err
		}
	}
	return json.Unmarshal(doc, out)
}

// mustConvert copies a typed API value into its apply configuration. Both
// have the same JSON form, so it cannot fail for the types it is used with.
func mustConvert(from, to any) {
	b, err := json.Marshal(from)
	if err == nil {
		err = json.Unmarshal(b, to)
	}
	if err != nil {
		panic(fmt.Sprintf("convert %T to %T: %v", from, to, err))
	}
}
