package v1alpha2_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	. "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/runtimes"
)

func function(mods ...func(*Function)) *Function {
	f := &Function{
		ObjectMeta: metav1.ObjectMeta{Name: "fn", Namespace: "default", UID: "uid-1"},
		Spec: FunctionSpec{
			Runtime: NodeJS22,
			Source:  Source{Inline: &InlineSource{Source: "module.exports = { main: () => 1 }"}},
		},
	}
	for _, m := range mods {
		m(f)
	}
	return f
}

func TestEffectiveResources(t *testing.T) {
	custom := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m")}}
	tests := map[string]struct {
		fn             *Function
		defaultProfile string
		wantProfile    string
		wantReqCPU     string
		wantLimMem     string
	}{
		"default is L": {fn: function(), wantProfile: "L", wantReqCPU: "400m", wantLimMem: "1Gi"},
		"configured default": {
			fn: function(), defaultProfile: "XS", wantProfile: "XS", wantReqCPU: "50m", wantLimMem: "256Mi",
		},
		"named preset": {
			fn: function(func(f *Function) {
				f.Spec.ResourceConfiguration = &ResourceConfiguration{Function: &ResourceRequirements{Profile: "XL"}}
			}),
			wantProfile: "XL", wantReqCPU: "800m", wantLimMem: "2Gi",
		},
		"custom": {
			fn: function(func(f *Function) {
				f.Spec.ResourceConfiguration = &ResourceConfiguration{Function: &ResourceRequirements{Resources: &custom}}
			}),
			wantProfile: ProfileCustom, wantReqCPU: "20m",
		},
		"Kyma's preset label": {
			fn:             function(func(f *Function) { f.Labels = map[string]string{LabelResourcesPreset: "S"} }),
			defaultProfile: "XL", wantProfile: "S", wantReqCPU: "100m", wantLimMem: "256Mi",
		},
		"the spec's preset wins over the label": {
			fn: function(func(f *Function) {
				f.Labels = map[string]string{LabelResourcesPreset: "S"}
				f.Spec.ResourceConfiguration = &ResourceConfiguration{Function: &ResourceRequirements{Profile: "M"}}
			}),
			wantProfile: "M", wantReqCPU: "200m", wantLimMem: "512Mi",
		},
		"a label naming no preset is not used": {
			fn:          function(func(f *Function) { f.Labels = map[string]string{LabelResourcesPreset: "XXL"} }),
			wantProfile: "L", wantReqCPU: "400m", wantLimMem: "1Gi",
		},
		"build only falls back to the default": {
			fn: function(func(f *Function) {
				f.Spec.ResourceConfiguration = &ResourceConfiguration{Build: &ResourceRequirements{Profile: "fast"}}
			}),
			wantProfile: "L", wantReqCPU: "400m", wantLimMem: "1Gi",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r, profile, err := tt.fn.EffectiveResources(tt.defaultProfile)
			require.NoError(t, err)
			assert.Equal(t, tt.wantProfile, profile)
			assert.Equal(t, tt.wantReqCPU, ptr.To(r.Requests[corev1.ResourceCPU]).String())
			if tt.wantLimMem != "" {
				q := r.Limits[corev1.ResourceMemory]
				assert.Equal(t, 0, q.Cmp(resource.MustParse(tt.wantLimMem)), "limit %s", q.String())
			}
		})
	}

	_, _, err := function().EffectiveResources("XXL")
	assert.ErrorContains(t, err, `unknown resource profile "XXL": use one of [XS S M L XL]`)
}

func TestPresetLabelNote(t *testing.T) {
	label := func(v string) func(*Function) {
		return func(f *Function) { f.Labels = map[string]string{LabelResourcesPreset: v} }
	}
	assert.Empty(t, function().PresetLabelNote())
	assert.Empty(t, function(label("XS")).PresetLabelNote())
	assert.Equal(t, `label serverless.kyma-project.io/function-resources-preset: "huge" names no preset (use one of [XS S M L XL]): the default preset is used`,
		function(label("huge")).PresetLabelNote())
	assert.Equal(t, "label serverless.kyma-project.io/function-resources-preset is not used: spec.resourceConfiguration.function sets the resources",
		function(label("S"), func(f *Function) {
			f.Spec.ResourceConfiguration = &ResourceConfiguration{Function: &ResourceRequirements{Profile: "M"}}
		}).PresetLabelNote())
}

func TestPresetsMatchKyma(t *testing.T) {
	want := map[string][4]string{
		"XS": {"50m", "64Mi", "150m", "256Mi"},
		"S":  {"100m", "128Mi", "200m", "256Mi"},
		"M":  {"200m", "256Mi", "400m", "512Mi"},
		"L":  {"400m", "512Mi", "800m", "1024Mi"},
		"XL": {"800m", "1024Mi", "1600m", "2048Mi"},
	}
	for _, p := range Profiles {
		r, err := PresetResources(p)
		require.NoError(t, err)
		w := want[p]
		for i, q := range []resource.Quantity{r.Requests[corev1.ResourceCPU], r.Requests[corev1.ResourceMemory], r.Limits[corev1.ResourceCPU], r.Limits[corev1.ResourceMemory]} {
			assert.Equal(t, 0, q.Cmp(resource.MustParse(w[i])), "%s[%d] = %s, want %s", p, i, q.String(), w[i])
		}
	}
}

func TestScalingHelpers(t *testing.T) {
	fixed := function(func(f *Function) { f.Spec.Replicas = ptr.To[int32](3) })
	assert.False(t, fixed.Autoscaled())
	assert.Equal(t, int32(3), fixed.MinReplicas())
	assert.Equal(t, int32(3), fixed.MaxReplicas())
	assert.Equal(t, int32(1), function().Replicas(), "unset replicas is the API default, 1")

	zero := function(func(f *Function) {
		f.Spec.ScaleConfig = &ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](4), TargetBacklog: ptr.To[int32](7)}
	})
	assert.True(t, zero.Autoscaled())
	assert.True(t, zero.ScalesToZero())
	assert.Equal(t, int32(0), zero.MinReplicas())
	assert.Equal(t, int32(4), zero.MaxReplicas())
	assert.Equal(t, int32(7), zero.TargetBacklog())
	assert.Equal(t, DefaultTargetConcurrency, zero.TargetConcurrency())
	assert.Equal(t, DefaultCooldownPeriod, zero.CooldownPeriod())
}

func TestRuntimes(t *testing.T) {
	assert.True(t, NodeJS24.IsNodeJS())
	assert.False(t, NodeJS24.IsPython())
	assert.True(t, Python312.IsPython())
	assert.True(t, NodeJS26.IsNodeJS())
	assert.True(t, Python314.IsPython())
	var catalog []Runtime
	for _, rt := range runtimes.All() {
		catalog = append(catalog, Runtime(rt.Name))
		assert.Equal(t, rt.Deprecated, Runtime(rt.Name).Deprecated(), "%s: the catalog and the API agree on deprecation", rt.Name)
	}
	assert.ElementsMatch(t, catalog, Runtimes, "the API accepts exactly the runtimes the hosts serve")
}

// TestDeprecationSchedule follows Kyma's runtime deprecation schedule
// (serverless docs/user/00-90-runtime-deprecation-schedule.md): Node.js 20
// deprecated in 1.10, end of life April 2026; Node.js 22 deprecated July
// 2026, end of life November 2026; Python 3.12 deprecated September 2026,
// end of life March 2027; the others have no date.
func TestDeprecationSchedule(t *testing.T) {
	tests := map[Runtime]struct {
		endOfLife string
		successor Runtime
	}{
		NodeJS20:  {"April 2026", NodeJS24},
		NodeJS22:  {"November 2026", NodeJS24},
		Python312: {"March 2027", Python314},
		NodeJS24:  {},
		NodeJS26:  {},
		Python314: {},
	}
	for r, tc := range tests {
		t.Run(string(r), func(t *testing.T) {
			assert.Equal(t, tc.endOfLife != "", r.Deprecated())
			assert.Equal(t, tc.endOfLife, r.EndOfLife())
			assert.Equal(t, tc.successor, r.Successor())
			if tc.endOfLife == "" {
				assert.Empty(t, r.DeprecationWarning())
				return
			}
			w := r.DeprecationWarning()
			assert.True(t, strings.HasPrefix(w, "Warning: function configured, runtime "+string(r)+" is deprecated and will be removed in the future"), "Kyma's message first: %s", w)
			assert.Contains(t, w, "end of life: "+tc.endOfLife)
			assert.Contains(t, w, string(tc.successor))
		})
	}
}

func TestValidate(t *testing.T) {
	resources := func(req, lim corev1.ResourceList) func(*Function) {
		return func(f *Function) {
			f.Spec.ResourceConfiguration = &ResourceConfiguration{Function: &ResourceRequirements{
				Resources: &corev1.ResourceRequirements{Requests: req, Limits: lim},
			}}
		}
	}
	list := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	git := func(url string) func(*Function) {
		return func(f *Function) {
			f.Spec.Source = Source{GitRepository: &GitRepositorySource{URL: url, Repository: Repository{BaseDir: "/", Reference: "main"}}}
		}
	}
	mounts := func(m ...SecretMount) func(*Function) { return func(f *Function) { f.Spec.SecretMounts = m } }
	tests := map[string]struct {
		fn   *Function
		want []string // the problems, exactly, in order
	}{
		"valid": {fn: function(func(f *Function) {
			f.Spec.Labels = map[string]string{"app": "x", "example.com/team": "a-b_c.d"}
			f.Spec.Annotations = map[string]string{"note": strings.Repeat("x", 1000)}
			f.Spec.Env = []EnvVar{{Name: "A", Value: "1"}, {Name: "my.env-name", Value: "2"}, {Name: "A", Value: "3"}}
			f.Spec.SecretMounts = []SecretMount{{SecretName: "creds", MountPath: "/secrets/creds"}, {SecretName: "more", MountPath: "/secrets/more"}}
			f.Spec.Source.Inline.Dependencies = "  {\"name\": \"f\"}\n"
		}, resources(list("cpu", "10m", "memory", "16Mi"), list("cpu", "10m", "memory", "16Mi")))},
		"valid with only some quantities": {fn: function(resources(list("memory", "64Mi"), list("cpu", "100m")))},
		"many labels": {fn: function(func(f *Function) {
			f.Spec.Labels = map[string]string{}
			for i := range 100 {
				f.Spec.Labels[fmt.Sprintf("l%d", i)] = "v"
			}
		})},
		"bad label value": {
			fn:   function(func(f *Function) { f.Spec.Labels = map[string]string{"app": "-x-"} }),
			want: []string{`spec.labels: Invalid value: "-x-": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
		},
		"annotations too large": {
			fn:   function(func(f *Function) { f.Spec.Annotations = map[string]string{"big": strings.Repeat("x", 300*1024)} }),
			want: []string{"spec.annotations: Too long: may not be more than 262144 bytes"},
		},
		"source too large": {
			fn:   function(func(f *Function) { f.Spec.Source.Inline.Source = strings.Repeat("x", MaxSourceBytes+1) }),
			want: []string{fmt.Sprintf("spec.source.inline: Too long: may not be more than %d bytes", MaxSourceBytes)},
		},
		"env names, Kyma's first then kfn's": {
			fn: function(func(f *Function) {
				f.Spec.Env = []EnvVar{{Name: "KFN_LISTEN_FD"}, {Name: "1BAD"}, {Name: "ALSO BAD"}}
			}),
			want: []string{
				"spec.env: 1BAD. Err: a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')",
				"spec.env: KFN_LISTEN_FD: names starting with KFN_ are reserved for kfn's runtime hosts",
			},
		},
		"node dependencies not a package.json": {
			fn:   function(func(f *Function) { f.Spec.Source.Inline.Dependencies = "lodash==4" }),
			want: []string{"invalid source.inline.dependencies value: deps should start with '{' and end with '}'"},
		},
		"python dependencies are requirements": {
			fn: function(func(f *Function) { f.Spec.Runtime = Python312; f.Spec.Source.Inline.Dependencies = "requests==2.31.0" }),
		},
		"secret mounts": {
			fn: function(mounts(
				SecretMount{SecretName: "My_Secret", MountPath: "/a"},
				SecretMount{SecretName: "creds", MountPath: "relative"},
				SecretMount{SecretName: "creds", MountPath: "/a/"},
				SecretMount{SecretName: "other", MountPath: "/x/../etc"},
				SecretMount{SecretName: "third", MountPath: "/c:d"},
			)),
			want: []string{
				"invalid spec.secretMounts: [a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*') secretNames should be unique]",
				"spec.secretMounts[1].mountPath: relative: must be an absolute path",
				"spec.secretMounts[2].mountPath: /a/: mount paths must be unique",
				"spec.secretMounts[3].mountPath: /x/../etc: must not contain '..'",
				"spec.secretMounts[4].mountPath: /c:d: must not contain ':'",
			},
		},
		"git URL forms Kyma and kfn accept": {fn: function(git("https://github.com/kyma-project/examples.git"))},
		"git SSH form":                      {fn: function(git("git@github.com:kyma-project/examples.git"))},
		"git ssh URL":                       {fn: function(git("ssh://git@github.com/kyma-project/examples.git"))},
		"git URL Kyma refuses": {
			fn:   function(git("github.com/kyma-project/examples.git")),
			want: []string{`source.gitRepository.URL: parse "github.com/kyma-project/examples.git": invalid URI for request`},
		},
		"git URL kfn refuses": {
			fn:   function(git("file:///etc/repo")),
			want: []string{"source.gitRepository.URL: file:///etc/repo: must be an http(s)://, git:// or ssh:// URL, or the SSH form user@host:path"},
		},
		"resources below Kyma's minimum": {
			fn: function(resources(list("cpu", "5m", "memory", "8Mi"), list("cpu", "9m", "memory", "15Mi"))),
			want: []string{
				"Function limits cpu(9m) should be higher than minimal value (10m)",
				"Function limits memory(15Mi) should be higher than minimal value (16Mi)",
				"Function request cpu(5m) should be higher than minimal value (10m)",
				"Function request memory(8Mi) should be higher than minimal value (16Mi)",
			},
		},
		"requests over limits": {
			fn: function(resources(list("cpu", "200m", "memory", "512Mi"), list("cpu", "100m", "memory", "256Mi"))),
			want: []string{
				"Function limits cpu(100m) should be higher than requests cpu(200m)",
				"Function limits memory(256Mi) should be higher than requests memory(512Mi)",
			},
		},
		"scale range upside down": {
			fn: function(func(f *Function) {
				f.Spec.ScaleConfig = &ScaleConfig{MinReplicas: ptr.To[int32](5), MaxReplicas: ptr.To[int32](2)}
			}),
			want: []string{"spec.scaleConfig: minReplicas (5) must not be greater than maxReplicas (2)"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.fn.Validate())
		})
	}
	assert.Equal(t, "a. b", InvalidSpecMessage([]string{"a", "b"}), "joined as Kyma joins them")
}

func TestDuplicateEnv(t *testing.T) {
	fn := function(func(f *Function) {
		f.Spec.Env = []EnvVar{{Name: "A"}, {Name: "B"}, {Name: "A"}, {Name: "B"}, {Name: "A"}, {Name: "C"}}
	})
	assert.Equal(t, []string{"A", "B"}, fn.DuplicateEnv())
	assert.Empty(t, function().DuplicateEnv())
}

func TestConditions(t *testing.T) {
	var s FunctionStatus
	assert.False(t, s.IsReady())
	for _, c := range ConditionTypes {
		s.SetCondition(c, metav1.ConditionTrue, ReasonFunctionSpecValidated, "ok", 2)
	}
	assert.True(t, s.IsReady())
	s.SetCondition(ConditionRunning, metav1.ConditionFalse, ReasonDeploymentFailed, strings.Repeat("x", MaxConditionMessageLength+10), 3)
	assert.False(t, s.IsReady())
	c := s.Condition(ConditionRunning)
	require.NotNil(t, c)
	assert.Len(t, c.Message, MaxConditionMessageLength, "long messages are cut to what the API accepts")
	assert.Equal(t, int64(3), c.ObservedGeneration)
	assert.Nil(t, s.Condition("Other"))
}

func TestMirrorBuildReady(t *testing.T) {
	var s FunctionStatus
	s.MirrorBuildReady(1)
	assert.Nil(t, s.Condition(ConditionBuildReady), "nothing to mirror yet")

	s.SetCondition(ConditionConfigurationReady, metav1.ConditionFalse, ReasonInvalidFunctionSpec, "spec.env: bad", 2)
	s.MirrorBuildReady(2)
	c := s.Condition(ConditionBuildReady)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, string(ReasonInvalidFunctionSpec), c.Reason)
	assert.Equal(t, BuildReadyMessage, c.Message)
	assert.Equal(t, int64(2), c.ObservedGeneration)

	s.SetCondition(ConditionConfigurationReady, metav1.ConditionTrue, ReasonSourceUpdated, "resolved", 3)
	s.SetCondition(ConditionRunning, metav1.ConditionTrue, ReasonDeploymentReady, "ready", 3)
	s.MirrorBuildReady(3)
	assert.True(t, meta.IsStatusConditionTrue(s.Conditions, string(ConditionBuildReady)))
	assert.True(t, s.IsReady())
	assert.Equal(t, []ConditionType{ConditionConfigurationReady, ConditionRunning}, ConditionTypes, "Kyma's current condition types")

	s.Conditions = []metav1.Condition{{Type: string(ConditionBuildReady), Status: metav1.ConditionTrue, Reason: "JobFinished"}}
	s.MirrorBuildReady(4)
	assert.Nil(t, s.Condition(ConditionBuildReady), "a stale BuildReady goes with ConfigurationReady")
}

func TestToCore(t *testing.T) {
	assert.Nil(t, ToCore(nil))
	src := []EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}
	got := ToCore(src)
	assert.Equal(t, []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}, got)
	got[1].ValueFrom.SecretKeyRef.Key = "changed"
	assert.Equal(t, "k", src[1].ValueFrom.SecretKeyRef.Key, "ToCore copies")
}
