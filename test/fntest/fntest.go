// Package fntest builds Functions for the controller's tests: a valid
// Node.js Function by default, changed by modifiers.
package fntest

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// HelloJS is the default inline Node.js source.
const HelloJS = "module.exports = { main: () => 'hello' };\n"

// PackageJSON is a package.json with one dependency, which makes the
// controller install it.
const PackageJSON = `{"name":"f","dependencies":{"lodash":"^4.17.21"}}`

// Modifier changes a Function under construction.
type Modifier func(*v1alpha2.Function)

// Function returns a nodejs22 Function with inline source HelloJS, UID
// "uid-<name>", and the modifiers applied in order.
func Function(name, namespace string, mods ...Modifier) *v1alpha2.Function {
	fn := &v1alpha2.Function{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha2.GroupVersion.String(), Kind: "Function"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + name), Generation: 1},
		Spec: v1alpha2.FunctionSpec{
			Runtime: v1alpha2.NodeJS22,
			Source:  v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: HelloJS}},
		},
	}
	for _, m := range mods {
		m(fn)
	}
	return fn
}

// Runtime sets spec.runtime.
func Runtime(r v1alpha2.Runtime) Modifier { return func(f *v1alpha2.Function) { f.Spec.Runtime = r } }

// Source sets inline source and dependencies.
func Source(src, deps string) Modifier {
	return func(f *v1alpha2.Function) {
		f.Spec.Source = v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: src, Dependencies: deps}}
	}
}

// Git sets a Git source; auth may be nil.
func Git(url, baseDir, ref string, auth *v1alpha2.RepositoryAuth) Modifier {
	return func(f *v1alpha2.Function) {
		f.Spec.Source = v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{
			URL: url, Auth: auth, Repository: v1alpha2.Repository{BaseDir: baseDir, Reference: ref},
		}}
	}
}

// Resolved records commit as the resolution of the Function's Git source
// in its status, as the reconciler does.
func Resolved(commit string) Modifier {
	return func(f *v1alpha2.Function) {
		g := f.Spec.Source.GitRepository
		f.Status.GitRepository = &v1alpha2.GitRepositoryStatus{URL: g.URL, Repository: g.Repository, Commit: commit}
	}
}

// Env appends static environment variables, name then value.
func Env(kv ...string) Modifier {
	return func(f *v1alpha2.Function) {
		for i := 0; i+1 < len(kv); i += 2 {
			f.Spec.Env = append(f.Spec.Env, v1alpha2.EnvVar{Name: kv[i], Value: kv[i+1]})
		}
	}
}

// EnvFrom appends a variable read from a Secret key.
func EnvFrom(name, secret, key string) Modifier {
	return func(f *v1alpha2.Function) {
		f.Spec.Env = append(f.Spec.Env, v1alpha2.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key},
		}})
	}
}

// Profile sets the function resource preset.
func Profile(p string) Modifier {
	return func(f *v1alpha2.Function) {
		f.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{Profile: p}}
	}
}

// Resources sets explicit function resources.
func Resources(r corev1.ResourceRequirements) Modifier {
	return func(f *v1alpha2.Function) {
		f.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{Resources: &r}}
	}
}

// Replicas sets spec.replicas.
func Replicas(n int32) Modifier { return func(f *v1alpha2.Function) { f.Spec.Replicas = ptr.To(n) } }

// Scale sets scaleConfig's range.
func Scale(minReplicas, maxReplicas int32) Modifier {
	return func(f *v1alpha2.Function) {
		f.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To(minReplicas), MaxReplicas: ptr.To(maxReplicas)}
	}
}

// ScaleTargets sets scaleConfig's queue-depth knobs; call it after Scale.
func ScaleTargets(backlog, concurrency, cooldown int32) Modifier {
	return func(f *v1alpha2.Function) {
		f.Spec.ScaleConfig.TargetBacklog = ptr.To(backlog)
		f.Spec.ScaleConfig.TargetConcurrency = ptr.To(concurrency)
		f.Spec.ScaleConfig.CooldownPeriod = ptr.To(cooldown)
	}
}

// SecretMount appends a secret mount.
func SecretMount(secret, path string) Modifier {
	return func(f *v1alpha2.Function) {
		f.Spec.SecretMounts = append(f.Spec.SecretMounts, v1alpha2.SecretMount{SecretName: secret, MountPath: path})
	}
}

// Labels sets spec.labels.
func Labels(l map[string]string) Modifier { return func(f *v1alpha2.Function) { f.Spec.Labels = l } }

// Annotations sets spec.annotations.
func Annotations(a map[string]string) Modifier {
	return func(f *v1alpha2.Function) { f.Spec.Annotations = a }
}

// Annotate sets an annotation of the Function itself (metadata.annotations;
// Annotations sets the pods', spec.annotations).
func Annotate(key, value string) Modifier {
	return func(f *v1alpha2.Function) {
		if f.Annotations == nil {
			f.Annotations = map[string]string{}
		}
		f.Annotations[key] = value
	}
}

// ImageOverride sets spec.runtimeImageOverride.
func ImageOverride(img string) Modifier {
	return func(f *v1alpha2.Function) { f.Spec.RuntimeImageOverride = img }
}

// PodSecurity sets spec.podSecurityContext.
func PodSecurity(sc *corev1.PodSecurityContext) Modifier {
	return func(f *v1alpha2.Function) { f.Spec.PodSecurityContext = sc }
}

// ContainerSecurity sets spec.containerSecurityContext.
func ContainerSecurity(sc *corev1.SecurityContext) Modifier {
	return func(f *v1alpha2.Function) { f.Spec.ContainerSecurityContext = sc }
}

// EnvValue returns the value of the container's variable name, or "" when
// it has none (or only a valueFrom).
func EnvValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
