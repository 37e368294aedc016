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
			cm := &corev1.ConfigMap{}
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cm) == nil {
				objs.ConfigMaps[runner.Key(ns, cm.Name)] = cm
			}
		case "Secret":
			s := &corev1.Secret{}
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s) == nil {
				objs.Secrets[runner.Key(ns, s.Name)] = s
			}
		}
	}
	return objs
}
