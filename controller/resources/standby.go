package resources

import (
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/kfn-dev/kfn/runtimes/plan"
)

// StandbyPod builds a standby pod of the warm pool (package controller/pool)
// for Functions shaped as p: the pod of p's Deployment (image, command,
// probes, resources, security contexts, volumes, no ServiceAccount token
// unless p asks for one) without the source volume, since a standby host
// is given its Function's source, with env as the container's environment
// (the host's start variables and runtimes.EnvStandbyTokenSHA256) and
// labels as the pod's; named name, in p's namespace, owned by nobody (the
// pool deletes it). Every standby pod has a writable dependencies volume
// at runtimes.PodDepsDir (bounded as a Function pod's), into which its
// host unpacks a Function's dependencies from the dependency cache when it
// is given one; it has no init container: p's dependencies, if any, are
// not installed. p must have no Git source.
func StandbyPod(p plan.Plan, cfg Config, name string, labels map[string]string, env []corev1.EnvVar) *corev1ac.PodApplyConfiguration {
	p.Env = env
	p.Dependencies = plan.Dependencies{}
	// The namespace's default ServiceAccount, which a Deployment's pods
	// get from admission: named, since the kfn identity volume needs one.
	return corev1ac.Pod(name, p.Namespace).
		WithLabels(labels).
		WithSpec(podSpec(p, cfg, true).WithServiceAccountName("default"))
}
