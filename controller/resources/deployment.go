package resources

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// preStopSleep lets endpoints drop a stopping pod before its host stops
// accepting connections: every node's kube-proxy must have removed it, or
// a new connection sent to it is refused. On the real node of the tests,
// with a loaded machine (load average 11), kube-proxy took up to 4 s from
// the EndpointSlice change to its rules (one in five over 2 s,
// kubeproxy_network_programming_duration_seconds); 2 s, as before, let a
// call fail now and then while a Function's pods rolled.
const preStopSleep = 5 * time.Second

// Deployment builds the Function's Deployment from its plan: the runtime
// image running the host with the plan's argv, env, port, probes and
// resources; the function's directory a writable emptyDir (as Kyma's), into
// which the host copies the source from the read-only ConfigMap (or an init
// container fetches it, for Git), and the working directory; an install
// init container only when there are dependencies that the host does not
// fetch from the cache when it starts (plan.Dependencies.AtStart; the
// Deployment then says the cache holds them, AnnotationDependenciesCached); spec.secretMounts
// read-only; writable /tmp; every emptyDir bounded by cfg.Volumes; no
// ServiceAccount token, unless the plan asks for one, and then in the
// function container only; the root file system read-only; the plan's
// security contexts (the restricted Pod Security Standard with the user's
// merged over it); rolling updates that never take a ready replica away;
// and the pod template annotated with the source and dependency hashes so
// that a change of them rolls the pods. spec.replicas is set only when the
// plan says so (plan.Plan.DeploymentReplicas: no autoscaler owns it).
func Deployment(p plan.Plan, cfg Config) *appsv1ac.DeploymentApplyConfiguration {
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
			WithAnnotations(podAnnotations(p, cfg)).
			WithSpec(podSpec(p, cfg, false)))
	if replicas, ok := p.DeploymentReplicas(); ok {
		spec.WithReplicas(replicas)
	}
	labels := maps.Clone(p.Labels)
	delete(labels, v1alpha2.LabelResource)
	dep := appsv1ac.Deployment(p.Name, p.Namespace)
	if p.Dependencies.Cached {
		dep.WithAnnotations(map[string]string{AnnotationDependenciesCached: runtimes.DependencySet(p.Runtime.Name, p.Dependencies.Hash)})
	}
	return dep.
		WithLabels(labels).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(spec)
}

// podSpec is the pod of the Deployment's template: the function container
// after the init containers the source and dependencies need. A standby
// pod (StandbyPod) has no source volume: its host is given the source.
func podSpec(p plan.Plan, cfg Config, standby bool) *corev1ac.PodSpecApplyConfiguration {
	var podSC corev1ac.PodSecurityContextApplyConfiguration
	mustConvert(p.PodSecurityContext, &podSC)
	var containerSC corev1ac.SecurityContextApplyConfiguration
	mustConvert(p.ContainerSecurityContext, &containerSC)

	volumes, mounts := functionVolumes(p, cfg, standby)
	var initContainers []*corev1ac.ContainerApplyConfiguration
	if g := p.Source.Git; g != nil {
		initContainers = append(initContainers, fetchContainer(p, cfg, &containerSC))
	}
	if p.Dependencies.InstallContainer() {
		initContainers = append(initContainers, installContainer(p, cfg, &containerSC))
	}
	env := envApply(p.Env)
	if p.Dependencies.AtStart {
		env = append(env, dependencyMaxBytes(cfg)...)
	}
	container := corev1ac.Container().
		WithName(ContainerFunction).
		WithImage(p.Image).
		WithCommand(p.Command...).
		WithWorkingDir(p.Host.FunctionDir).
		WithEnv(env...).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(p.Port).WithProtocol(corev1.ProtocolTCP)).
		WithStartupProbe(probe(p.Startup)).
		WithReadinessProbe(probe(p.Readiness)).
		WithLivenessProbe(probe(p.Liveness)).
		WithResources(requirements(p.Resources)).
		WithVolumeMounts(mounts...).
		WithSecurityContext(&containerSC).
		WithLifecycle(corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().
			WithSleep(corev1ac.SleepAction().WithSeconds(int64(preStopSleep / time.Second))))).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError)
	grace := p.TerminationGracePeriod + preStopSleep
	return corev1ac.PodSpec().
		// No container gets a ServiceAccount token unless the Function
		// asks for one, and then only the function container
		// (functionVolumes).
		WithAutomountServiceAccountToken(false).
		WithSecurityContext(&podSC).
		WithInitContainers(initContainers...).
		WithContainers(container).
		WithVolumes(volumes...).
		WithTerminationGracePeriodSeconds(int64(math.Ceil(grace.Seconds())))
}

// podAnnotations are the plan's pod annotations with the source and
// dependency hashes, which roll the pods when they change, and, for a Git
// source with SSH key credentials, the installation's known hosts
// (AnnotationGitKnownHosts), which the fetch-source container reads.
func podAnnotations(p plan.Plan, cfg Config) map[string]string {
	annotations := maps.Clone(p.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	delete(annotations, AnnotationGitKnownHosts) // never the user's
	if g := p.Source.Git; g != nil && g.Auth != nil && g.Auth.Type == v1alpha2.RepositoryAuthSSHKey {
		annotations[AnnotationGitKnownHosts] = cfg.GitKnownHosts
	}
	annotations[AnnotationSourceHash] = p.Source.Hash
	if p.Dependencies.Hash != "" {
		annotations[AnnotationDepsHash] = p.Dependencies.Hash
	}
	return annotations
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

func requirements(r corev1.ResourceRequirements) *corev1ac.ResourceRequirementsApplyConfiguration {
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
