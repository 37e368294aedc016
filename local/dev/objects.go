package dev

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kfn-dev/kfn/local/project"
	"github.com/kfn-dev/kfn/local/runner"
)

// objectsOf collects the ConfigMaps and Secrets a project's manifests
// define, which functions' env valueFrom may read.
func objectsOf(p *project.Project) runner.Objects {
	objs := runner.Objects{ConfigMaps: map[string]*corev1.ConfigMap{}, Secrets: map[string]*corev1.Secret{}}
	for _, doc := range p.Ignored {
		u := doc.Object
		if u.GetAPIVersion() != "v1" {
			continue
		}
		ns := u.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		switch u.GetKind() {
		case "ConfigMap":
			keep(objs.ConfigMaps, ns, u.Object)
		case "Secret":
			keep(objs.Secrets, ns, u.Object)
		}
	}
	return objs
}

// keep adds the object of unstructured content u to m, under its key in
// namespace ns, when it converts.
func keep[T any, PT interface {
	*T
	GetName() string
}](m map[string]PT, ns string, u map[string]any) {
	obj := PT(new(T))
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj) == nil {
		m[runner.Key(ns, obj.GetName())] = obj
	}
}
