package plan

import (
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// DefaultPodSecurityContext is the pod part of the restricted Pod Security
// Standard, user and group 1000 as in Kyma and the runtime images. Each
// call returns a new value.
func DefaultPodSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](1000),
		RunAsGroup:     ptr.To[int64](1000),
		FSGroup:        ptr.To[int64](1000),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// DefaultContainerSecurityContext is the container part of the restricted
// Pod Security Standard, with a read-only root file system. Each call
// returns a new value.
func DefaultContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Privileged:               ptr.To(false),
	}
}

// PodSecurityContext returns the restricted pod defaults with the user's
// context (nil: none) merged over them, field by field (a JSON merge
// patch: what the user sets wins, what the user leaves out keeps the
// default).
func PodSecurityContext(user *corev1.PodSecurityContext) (*corev1.PodSecurityContext, error) {
	out := &corev1.PodSecurityContext{}
	if err := mergeOver(DefaultPodSecurityContext(), user, user != nil, out); err != nil {
		return nil, fmt.Errorf("merge spec.podSecurityContext: %w", err)
	}
	return out, nil
}

// ContainerSecurityContext returns the restricted container defaults with
// the user's context merged over them, as PodSecurityContext does.
func ContainerSecurityContext(user *corev1.SecurityContext) (*corev1.SecurityContext, error) {
	out := &corev1.SecurityContext{}
	if err := mergeOver(DefaultContainerSecurityContext(), user, user != nil, out); err != nil {
		return nil, fmt.Errorf("merge spec.containerSecurityContext: %w", err)
	}
	return out, nil
}

// mergeOver merges user (when set) over defaults as a JSON merge patch and
// decodes the result into out.
func mergeOver(defaults, user any, set bool, out any) error {
	doc, err := json.Marshal(defaults)
	if err != nil {
		return err
	}
	if set {
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
