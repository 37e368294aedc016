package v1alpha2

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Labels kfn puts on everything it creates for a Function. They are Kyma's,
// so tools written for Kyma find kfn's pods.
const (
	// LabelFunctionName is the Function's name.
	LabelFunctionName = "serverless.kyma-project.io/function-name"
	// LabelManagedBy is LabelManagedByValue on every object kfn creates.
	LabelManagedBy = "serverless.kyma-project.io/managed-by"
	// LabelManagedByValue is the value of LabelManagedBy.
	LabelManagedByValue = "function-controller"
	// LabelUUID is the Function's UID.
	LabelUUID = "serverless.kyma-project.io/uuid"
	// LabelResource tells which kind of child an object is.
	LabelResource = "serverless.kyma-project.io/resource"
	// LabelResourceDeployment is the value of LabelResource on the pods.
	LabelResourceDeployment = "deployment"
	// LabelAppName is the Function's name on its pods, as Kyma sets it
	// (over a spec.labels value of the same key): Kyma's dashboards and
	// Istio's telemetry group pods by it.
	LabelAppName = "app.kubernetes.io/name"
)

// Pod annotations Kyma sets on every Function pod, for Istio.
const (
	// AnnotationIstioProxyConfig holds back the function's container until
	// an injected Istio proxy runs, so that its first calls (a Git fetch,
	// emitCloudEvent) do not fail; spec.annotations may replace it.
	AnnotationIstioProxyConfig = "proxy.istio.io/config"
	// IstioProxyConfigHoldApplication is Kyma's value of
	// AnnotationIstioProxyConfig.
	IstioProxyConfigHoldApplication = `{ "holdApplicationUntilProxyStarts": true }`
	// AnnotationIstioNativeSidecar asks Istio for its proxy as a native
	// sidecar (an init container that keeps running), so that init
	// containers (the Git fetch, the dependency install) reach the network
	// too. Always "true", whatever spec.annotations says, as in Kyma.
	AnnotationIstioNativeSidecar = "sidecar.istio.io/nativeSidecar"
)

// AnnotationServiceAccountToken on a Function (metadata.annotations) set
// to "true" gives its function container a token of the namespace's
// default ServiceAccount, as Kubernetes mounts one (token, ca.crt and
// namespace in /var/run/secrets/kubernetes.io/serviceaccount). Without it a
// Function's pods have no token at all; the init containers (source fetch,
// dependency install) never get one. An annotation and not a spec field:
// Kyma's Function API has no such field, and a Kyma cluster keeps the
// annotation (and ignores it) where it would drop an unknown field.
const AnnotationServiceAccountToken = "serverless.kfn.dev/service-account-token"

// ServiceAccountToken reports whether the Function asks for a
// ServiceAccount token (AnnotationServiceAccountToken is "true"), and,
// for a value that is neither "true" nor "false", what its status should
// say of it ("" otherwise): such a value asks for nothing.
func (f *Function) ServiceAccountToken() (bool, string) {
	v, ok := f.Annotations[AnnotationServiceAccountToken]
	switch {
	case !ok || v == "false":
		return false, ""
	case v == "true":
		return true, ""
	default:
		return false, fmt.Sprintf("annotation %s: %q is neither \"true\" nor \"false\": the pods get no ServiceAccount token", AnnotationServiceAccountToken, v)
	}
}

// Resource presets: Kyma's names and values.
const (
	// ProfileCustom is status.functionResourceProfile when explicit resources are used.
	ProfileCustom = "custom"
	// DefaultProfile is the preset of a Function that names none.
	DefaultProfile = "L"
	// LabelResourcesPreset on a Function (metadata.labels) names its
	// resource preset when spec.resourceConfiguration.function does not:
	// Kyma's documentation tells users to set it.
	LabelResourcesPreset = "serverless.kyma-project.io/function-resources-preset"
)

// Defaults of kfn's additions to scaleConfig.
const (
	// DefaultTargetBacklog is scaleConfig.targetBacklog when unset.
	DefaultTargetBacklog int32 = 10
	// DefaultTargetConcurrency is scaleConfig.targetConcurrency when unset.
	DefaultTargetConcurrency int32 = 10
	// DefaultCooldownPeriod is scaleConfig.cooldownPeriod (seconds) when unset.
	DefaultCooldownPeriod int32 = 300
)

type preset struct{ reqCPU, reqMem, limCPU, limMem string }

var presets = map[string]preset{
	"XS": {"50m", "64Mi", "150m", "256Mi"},
	"S":  {"100m", "128Mi", "200m", "256Mi"},
	"M":  {"200m", "256Mi", "400m", "512Mi"},
	"L":  {"400m", "512Mi", "800m", "1024Mi"},
	"XL": {"800m", "1024Mi", "1600m", "2048Mi"},
}

// Profiles lists the Function resource presets from smallest to largest.
var Profiles = []string{"XS", "S", "M", "L", "XL"}

// PresetResources returns the requests and limits of a preset, or an error
// naming the valid presets.
func PresetResources(profile string) (corev1.ResourceRequirements, error) {
	p, ok := presets[profile]
	if !ok {
		return corev1.ResourceRequirements{}, fmt.Errorf("unknown resource profile %q: use one of %v", profile, Profiles)
	}
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(p.reqCPU),
			corev1.ResourceMemory: resource.MustParse(p.reqMem),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(p.limCPU),
			corev1.ResourceMemory: resource.MustParse(p.limMem),
		},
	}, nil
}

// EffectiveResources returns the Function container's resources and the
// profile name to report: the preset spec.resourceConfiguration.function
// names, its explicit resources ("custom"), else the preset the label
// LabelResourcesPreset names, else defaultProfile (DefaultProfile when
// empty). A label naming no preset is not used (see PresetLabelNote).
func (f *Function) EffectiveResources(defaultProfile string) (corev1.ResourceRequirements, string, error) {
	if defaultProfile == "" {
		defaultProfile = DefaultProfile
	}
	rc := f.Spec.ResourceConfiguration
	switch {
	case rc != nil && rc.Function != nil && rc.Function.Resources != nil:
		return *rc.Function.Resources.DeepCopy(), ProfileCustom, nil
	case rc != nil && rc.Function != nil && rc.Function.Profile != "":
		r, err := PresetResources(rc.Function.Profile)
		return r, rc.Function.Profile, err
	default:
		if label := f.Labels[LabelResourcesPreset]; presets[label] != (preset{}) {
			defaultProfile = label
		}
		r, err := PresetResources(defaultProfile)
		return r, defaultProfile, err
	}
}

// PresetLabelNote says why the label LabelResourcesPreset is not used:
// its value names no preset, or spec.resourceConfiguration.function sets
// the resources; "" when it is used or absent.
func (f *Function) PresetLabelNote() string {
	label, ok := f.Labels[LabelResourcesPreset]
	if !ok {
		return ""
	}
	if rc := f.Spec.ResourceConfiguration; rc != nil && rc.Function != nil && (rc.Function.Profile != "" || rc.Function.Resources != nil) {
		return fmt.Sprintf("label %s is not used: spec.resourceConfiguration.function sets the resources", LabelResourcesPreset)
	}
	if presets[label] == (preset{}) {
		return fmt.Sprintf("label %s: %q names no preset (use one of %v): the default preset is used", LabelResourcesPreset, label, Profiles)
	}
	return ""
}

// Replicas returns spec.replicas, 1 when unset (the API default).
func (f *Function) Replicas() int32 {
	if f.Spec.Replicas == nil {
		return 1
	}
	return *f.Spec.Replicas
}

// Autoscaled reports whether an autoscaler owns the Function's replicas.
func (f *Function) Autoscaled() bool {
	sc := f.Spec.ScaleConfig
	return sc != nil && sc.MinReplicas != nil && sc.MaxReplicas != nil
}

// ScalesToZero reports whether the Function asks to scale to zero.
func (f *Function) ScalesToZero() bool {
	return f.Autoscaled() && *f.Spec.ScaleConfig.MinReplicas == 0
}

// MinReplicas returns the fewest replicas the Function runs: scaleConfig's
// minimum when autoscaled, otherwise its fixed replicas.
func (f *Function) MinReplicas() int32 {
	if f.Autoscaled() {
		return *f.Spec.ScaleConfig.MinReplicas
	}
	return f.Replicas()
}

// MaxReplicas returns the most replicas the Function runs.
func (f *Function) MaxReplicas() int32 {
	if f.Autoscaled() {
		return *f.Spec.ScaleConfig.MaxReplicas
	}
	return f.Replicas()
}

// TargetBacklog returns scaleConfig.targetBacklog or its default.
func (f *Function) TargetBacklog() int32 {
	if sc := f.Spec.ScaleConfig; sc != nil && sc.TargetBacklog != nil {
		return *sc.TargetBacklog
	}
	return DefaultTargetBacklog
}

// TargetConcurrency returns scaleConfig.targetConcurrency or its default.
func (f *Function) TargetConcurrency() int32 {
	if sc := f.Spec.ScaleConfig; sc != nil && sc.TargetConcurrency != nil {
		return *sc.TargetConcurrency
	}
	return DefaultTargetConcurrency
}

// CooldownPeriod returns scaleConfig.cooldownPeriod (seconds) or its default.
func (f *Function) CooldownPeriod() int32 {
	if sc := f.Spec.ScaleConfig; sc != nil && sc.CooldownPeriod != nil {
		return *sc.CooldownPeriod
	}
	return DefaultCooldownPeriod
}

// SelectorLabels are the labels that select the Function's pods.
func (f *Function) SelectorLabels() map[string]string {
	return map[string]string{
		LabelFunctionName: f.Name,
		LabelManagedBy:    LabelManagedByValue,
		LabelUUID:         string(f.UID),
		LabelResource:     LabelResourceDeployment,
	}
}

// ToCore returns the variables as Kubernetes EnvVars.
func ToCore(env []EnvVar) []corev1.EnvVar {
	if env == nil {
		return nil
	}
	out := make([]corev1.EnvVar, len(env))
	for i, e := range env {
		out[i] = corev1.EnvVar{Name: e.Name, Value: e.Value, ValueFrom: e.ValueFrom.DeepCopy()}
	}
	return out
}
