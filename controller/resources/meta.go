package resources

import (
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// Annotations kfn writes on the objects it makes.
const (
	// AnnotationSourceHash is the plan's source hash, on the ConfigMap and
	// the pod template: a source change rolls the Deployment, an
	// environment change does not touch the ConfigMap.
	AnnotationSourceHash = "kfn.dev/source-hash"
	// AnnotationDepsHash is the dependency set's hash on the pod template.
	AnnotationDepsHash = "kfn.dev/dependencies-hash"
	// AnnotationGitKnownHosts is the installation's SSH known hosts
	// (Config.GitKnownHosts) on the pod template of a Git Function with
	// SSH key credentials: the fetch-source container reads it through the
	// downward API, and a change of it rolls the pods.
	AnnotationGitKnownHosts = "kfn.dev/git-known-hosts"
	// AnnotationDependenciesCached is on a Function's Deployment once its
	// pods said that the dependency cache holds their set
	// (runtimes.DependencyCachedMessage): <runtime>/<hash>. The controller
	// then renders the pods without the install init container when the
	// Function is at zero (plan.Dependencies.AtStart).
	AnnotationDependenciesCached = "kfn.dev/dependencies-cached"
)

// ObjectLabels are the labels on every object kfn makes for a Function
// (the pod labels add v1alpha2.LabelResource).
func ObjectLabels(p plan.Plan) map[string]string {
	return map[string]string{
		v1alpha2.LabelFunctionName: p.Name,
		v1alpha2.LabelManagedBy:    v1alpha2.LabelManagedByValue,
		v1alpha2.LabelUUID:         string(p.UID),
	}
}

// ownerReference makes the Function the controller owner of a child, so
// deleting the Function deletes the child.
func ownerReference(p plan.Plan) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(v1alpha2.GroupVersion.String()).
		WithKind("Function").
		WithName(p.Name).
		WithUID(p.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}
