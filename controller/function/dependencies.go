package function

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes"
)

// DependencySource is where a Function's pods take their dependency set
// from, as DependenciesFromCache decides it.
type DependencySource struct {
	// Cached: the dependency cache holds the set.
	Cached bool
	// AtStart: the pods' host fetches it when it starts, with no install
	// init container.
	AtStart bool
}

// DependenciesFromCache decides where the pods of a Function whose
// dependency set is set (<runtime>/<hash>) take it from, given its
// Deployment (nil before it exists) and its pods. The cache holds the set
// when the Deployment says so (resources.AnnotationDependenciesCached) or
// an install container said so (runtimes.DependencyCachedMessage), unless
// a host found it missing (runtimes.DependencyMissingMessage, exit
// runtimes.DependencyMissingExit): then the pods install again. A held set
// is fetched at start once the pods are rendered so, and they are
// rendered so only while the Function is at zero, so that the change rolls
// no running pod: the next wake starts one container, not two.
//
// What a pod says is a tenant's to forge (an install script may write the
// termination log); a false "cached" costs the Function one failed start
// and a rollout back to installing, nothing more.
func DependenciesFromCache(set string, dep *appsv1.Deployment, pods []corev1.Pod) DependencySource {
	cached := dep != nil && dep.Annotations[resources.AnnotationDependenciesCached] == set
	for i := range pods {
		if said(pods[i].Status.ContainerStatuses, resources.ContainerFunction, runtimes.DependencyMissingExit, runtimes.DependencyMissingMessage+set) {
			return DependencySource{}
		}
		if said(pods[i].Status.InitContainerStatuses, resources.ContainerInstallDeps, 0, runtimes.DependencyCachedMessage+set) {
			cached = true
		}
	}
	if !cached {
		return DependencySource{}
	}
	return DependencySource{Cached: true, AtStart: dep != nil && (fetchesAtStart(dep, set) || atZero(dep))}
}

// said reports whether the container name, in its current or last run,
// ended with exit code and a termination message holding line.
func said(statuses []corev1.ContainerStatus, name string, code int32, line string) bool {
	for _, cs := range statuses {
		if cs.Name != name {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t != nil && t.ExitCode == code && hasLine(t.Message, line) {
				return true
			}
		}
	}
	return false
}

// hasLine reports whether text has line as one of its lines.
func hasLine(text, line string) bool {
	for l := range strings.Lines(text) {
		if strings.TrimRight(l, "\r\n") == line {
			return true
		}
	}
	return false
}

// fetchesAtStart reports whether dep's pods fetch set when their host
// starts: no install container, and the function container told the hash.
func fetchesAtStart(dep *appsv1.Deployment, set string) bool {
	pod := dep.Spec.Template.Spec
	for _, c := range pod.InitContainers {
		if c.Name == resources.ContainerInstallDeps {
			return false
		}
	}
	for _, c := range pod.Containers {
		if c.Name != resources.ContainerFunction {
			continue
		}
		for _, e := range c.Env {
			if e.Name == runtimes.EnvDependencyHash {
				return strings.HasSuffix(set, "/"+e.Value)
			}
		}
	}
	return false
}

// atZero reports whether dep is scaled to zero with no pod left.
func atZero(dep *appsv1.Deployment) bool {
	return dep.Spec.Replicas != nil && *dep.Spec.Replicas == 0 && dep.Status.Replicas == 0
}

// chooseDependencySource records in d.plan where the Function's pods take
// their dependency set from (DependenciesFromCache): from an install
// container, or, once the cache holds the set, from the cache when their
// host starts.
func (r *Reconciler) chooseDependencySource(ctx context.Context, d *desired) error {
	p := &d.plan
	if p.Dependencies.Hash == "" || p.Host.DependencyCache == "" {
		return nil
	}
	dep := &appsv1.Deployment{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Name}, dep); apierrors.IsNotFound(err) {
		dep = nil
	} else if err != nil {
		return fmt.Errorf("get deployment: %w", err)
	}
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(p.Namespace), client.MatchingLabels(p.Selector)); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	src := DependenciesFromCache(runtimes.DependencySet(p.Runtime.Name, p.Dependencies.Hash), dep, pods.Items)
	if !src.Cached {
		return nil
	}
	return p.SetDependenciesCached(src.AtStart)
}
