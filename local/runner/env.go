package runner

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// resolveEnv turns EnvVars into KEY=VALUE, resolving valueFrom from the
// project's ConfigMaps and Secrets and the pod fields that mean something
// locally.
func (r *Runner) resolveEnv(p plan.Plan, env []corev1.EnvVar) ([]string, []string) {
	r.mu.Lock()
	objs := r.cfg.Objects
	r.mu.Unlock()
	var out, warnings []string
	for _, e := range env {
		if e.ValueFrom == nil {
			out = append(out, e.Name+"="+e.Value)
			continue
		}
		v, err := valueFrom(p, objs, e.ValueFrom)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("env %s: %v; left unset", e.Name, err))
			continue
		}
		out = append(out, e.Name+"="+v)
	}
	return out, warnings
}

// valueFrom is the value of one env var's source: a key of a ConfigMap or
// Secret of the project, or a pod field or resource that means something
// locally.
func valueFrom(p plan.Plan, objs Objects, src *corev1.EnvVarSource) (string, error) {
	ns := p.Namespace
	switch {
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm := objs.ConfigMaps[Key(ns, ref.Name)]
		if cm == nil {
			return "", fmt.Errorf("ConfigMap %s/%s is not in the project", ns, ref.Name)
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return v, nil
		}
		if v, ok := cm.BinaryData[ref.Key]; ok {
			return string(v), nil
		}
		return "", fmt.Errorf("ConfigMap %s/%s has no key %q", ns, ref.Name, ref.Key)
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s := objs.Secrets[Key(ns, ref.Name)]
		if s == nil {
			return "", fmt.Errorf("Secret %s/%s is not in the project", ns, ref.Name)
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), nil
		}
		if v, ok := s.StringData[ref.Key]; ok {
			return v, nil
		}
		return "", fmt.Errorf("Secret %s/%s has no key %q", ns, ref.Name, ref.Key)
	case src.FieldRef != nil:
		switch src.FieldRef.FieldPath {
		case "metadata.name":
			return p.Name, nil
		case "metadata.namespace":
			return p.Namespace, nil
		case "status.podIP", "status.hostIP":
			return "127.0.0.1", nil
		}
		return "", fmt.Errorf("field %s has no local value", src.FieldRef.FieldPath)
	case src.ResourceFieldRef != nil:
		q, ok := p.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(src.ResourceFieldRef.Resource, "limits."))]
		if !ok {
			q, ok = p.Resources.Requests[corev1.ResourceName(strings.TrimPrefix(src.ResourceFieldRef.Resource, "requests."))]
		}
		if !ok {
			return "", fmt.Errorf("resource %s is not set", src.ResourceFieldRef.Resource)
		}
		return q.String(), nil
	}
	return "", errors.New("unsupported valueFrom")
}

// imageEnv is what rt's image sets in its environment (runtimes.ImageEnv),
// which a function process here gets first, as a container does.
func imageEnv(rt runtimes.Runtime) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range rt.ImageEnv() {
		out = append(out, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	return out
}
