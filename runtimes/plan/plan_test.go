package plan_test

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
	"github.com/kfn-dev/kfn/test/fntest"
)

var cfg = plan.Config{
	Images: map[string]string{
		"nodejs20": "kfn/runtime-nodejs20", "nodejs22": "kfn/runtime-nodejs22",
		"nodejs24": "kfn/runtime-nodejs24", "python312": "kfn/runtime-python312",
	},
	PublisherAddress:       "http://publisher.kfn-system/publish",
	TraceCollectorEndpoint: "http://otel:4318/v1/traces",
}

func env(p plan.Plan) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range p.Env {
		out[e.Name] = e
	}
	return out
}

func TestForDefaults(t *testing.T) {
	p, err := plan.For(fntest.Function("hello", "ns"), cfg)
	require.NoError(t, err)

	assert.Equal(t, "nodejs22", p.Runtime.Name)
	assert.Equal(t, "kfn/runtime-nodejs22", p.Image)
	assert.Equal(t, []string{"node", "/opt/kfn/nodejs/server.cjs"}, p.Command)
	assert.Equal(t, int32(8080), p.Port)
	assert.Equal(t, plan.Probe{Path: "/healthz?ready", Port: 8080, Period: time.Second, Timeout: time.Second, FailureThreshold: 3}, p.Readiness,
		"ready once the handler is loaded")
	assert.Equal(t, "/healthz", p.Liveness.Path, "alive while the host serves")
	assert.Equal(t, "/healthz", p.Startup.Path)
	assert.Equal(t, time.Second, p.Startup.Period, "probed as often as readiness: no probe period added to a cold start")
	assert.Equal(t, 150*time.Second, p.Startup.Period*time.Duration(p.Startup.FailureThreshold),
		"a slow import gets Kyma's 150 s before the container is restarted")
	assert.Equal(t, 185*time.Second, p.TerminationGracePeriod)
	assert.Equal(t, "L", p.Profile)
	assert.Equal(t, "400m", p.Resources.Requests.Cpu().String())
	assert.Equal(t, "1Gi", p.Resources.Limits.Memory().String())
	assert.Equal(t, map[string]string{"handler.js": fntest.HelloJS}, p.Source.Files)
	assert.Len(t, p.Source.Hash, 64)
	assert.Nil(t, p.Source.Git)
	assert.Equal(t, plan.Dependencies{File: "package.json"}, p.Dependencies)
	assert.False(t, p.Dependencies.Install())
	assert.Equal(t, plan.Scaling{Replicas: 1, MinReplicas: 1, MaxReplicas: 1, TargetBacklog: 10, TargetConcurrency: 10, CooldownPeriod: 300}, p.Scaling)
	wantLabels := maps.Clone(p.Selector)
	wantLabels["app.kubernetes.io/name"] = "hello"
	assert.Equal(t, wantLabels, p.Labels, "Kyma's pod labels")
	assert.Equal(t, map[string]string{
		"proxy.istio.io/config":          `{ "holdApplicationUntilProxyStarts": true }`,
		"sidecar.istio.io/nativeSidecar": "true",
	}, p.Annotations, "Kyma's pod annotations for Istio")
	assert.Equal(t, "hello", p.Selector[v1alpha2.LabelFunctionName])
	assert.Equal(t, "uid-hello", p.Selector[v1alpha2.LabelUUID])

	e := env(p)
	for name, want := range map[string]string{
		"FUNC_NAME": "hello", "SERVICE_NAMESPACE": "ns", "FUNC_RUNTIME": "nodejs22", "FUNC_PORT": "8080",
		"FUNC_TIMEOUT": "180", "REQ_MB_LIMIT": "1", "KFN_FUNCTION_DIR": runtimes.PodFunctionDir, "KFN_SOURCE_DIR": runtimes.PodSourceDir,
		"PUBLISHER_PROXY_ADDRESS": cfg.PublisherAddress, "TRACE_COLLECTOR_ENDPOINT": cfg.TraceCollectorEndpoint,
		// The libraries Kyma's images provide, in kfn's Node.js image.
		"KFN_LIBS_DIR": runtimes.ImageNodeLibsDir, "NODE_PATH": runtimes.ImageNodeLibsDir + "/node_modules",
	} {
		assert.Equal(t, want, e[name].Value, name)
	}
	for _, name := range []string{"KFN_DEPS_DIR", "PYTHONPATH", "FUNC_MEMORY_LIMIT"} {
		assert.NotContains(t, e, name)
	}
}

func TestForSpecFields(t *testing.T) {
	custom := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	tests := map[string]struct {
		mods  []fntest.Modifier
		check func(t *testing.T, p plan.Plan)
	}{
		"runtime python312": {
			mods: []fntest.Modifier{fntest.Runtime(v1alpha2.Python312), fntest.Source("def main(e, c):\n  return 'hi'\n", "")},
			check: func(t *testing.T, p plan.Plan) {
				assert.Equal(t, "kfn/runtime-python312", p.Image)
				assert.Equal(t, []string{"python3", "-u", "/opt/kfn/python/kfn_main.py"}, p.Command)
				assert.Contains(t, p.Source.Files, "handler.py")
				assert.Equal(t, "requirements.txt", p.Dependencies.File)
				assert.Equal(t, "1Gi", env(p)["FUNC_MEMORY_LIMIT"].Value, "python gets the memory limit")
				assert.Equal(t, "/kubeless", env(p)["KFN_FUNCTION_DIR"].Value, "Kyma's FUNCTION_PATH")
				assert.Equal(t, "104857600", env(p)["FUNC_MEMFILE_MAX"].Value, "Kyma's Python body limit, in bytes")
				assert.NotContains(t, env(p), "REQ_MB_LIMIT")
			},
		},
		"Kyma's newer runtimes get the newer names of the host's variables": {
			mods: []fntest.Modifier{fntest.Runtime(v1alpha2.NodeJS26), fntest.ImageOverride("kfn/nodejs26:test"), fntest.Env("FUNC_BODY_MB_LIMIT", "4")},
			check: func(t *testing.T, p plan.Plan) {
				e := env(p)
				assert.Equal(t, "main", e["HANDLER_FUNC_NAME"].Value)
				assert.Equal(t, "handler", e["HANDLER_MOD_NAME"].Value)
				assert.Equal(t, runtimes.PodFunctionDir, e["HANDLER_PATH"].Value)
				assert.Equal(t, "4", e["FUNC_BODY_MB_LIMIT"].Value, "a Kyma user's limit, in MB")
				assert.Equal(t, "8080", e["FUNC_PORT"].Value)
				for _, old := range []string{"FUNC_HANDLER", "MOD_NAME", "REQ_MB_LIMIT", "FUNC_MEMFILE_MAX"} {
					assert.NotContains(t, e, old)
				}
			},
		},
		"deprecated runtime nodejs20": {
			mods:  []fntest.Modifier{fntest.Runtime(v1alpha2.NodeJS20)},
			check: func(t *testing.T, p plan.Plan) { assert.True(t, p.Runtime.Deprecated) },
		},
		"runtimeImageOverride wins": {
			mods:  []fntest.Modifier{fntest.ImageOverride("registry.example/custom:1")},
			check: func(t *testing.T, p plan.Plan) { assert.Equal(t, "registry.example/custom:1", p.Image) },
		},
		"node dependencies": {
			mods: []fntest.Modifier{fntest.Source(fntest.HelloJS, fntest.PackageJSON)},
			check: func(t *testing.T, p plan.Plan) {
				assert.Equal(t, fntest.PackageJSON, p.Source.Files["package.json"])
				assert.True(t, p.Dependencies.Needed)
				assert.Equal(t, fntest.PackageJSON, p.Dependencies.Content)
				assert.Len(t, p.Dependencies.Hash, 64)
				e := env(p)
				assert.Equal(t, runtimes.PodDepsDir, e["KFN_DEPS_DIR"].Value)
				assert.Equal(t, runtimes.PodDepsDir+"/node_modules:"+runtimes.ImageNodeLibsDir+"/node_modules", e["NODE_PATH"].Value,
					"the function's own dependencies resolve before the libraries Kyma's images provide")
			},
		},
		"package.json without dependencies installs nothing but is a source file": {
			mods: []fntest.Modifier{fntest.Source(fntest.HelloJS, `{"type":"module"}`)},
			check: func(t *testing.T, p plan.Plan) {
				assert.Equal(t, `{"type":"module"}`, p.Source.Files["package.json"])
				assert.False(t, p.Dependencies.Install())
				assert.Empty(t, p.Dependencies.Hash)
				assert.NotContains(t, env(p), "KFN_DEPS_DIR")
			},
		},
		"python requirements": {
			mods: []fntest.Modifier{fntest.Runtime(v1alpha2.Python312), fntest.Source("def main(e,c): pass\n", "requests==2.32.3\n")},
			check: func(t *testing.T, p plan.Plan) {
				assert.True(t, p.Dependencies.Needed)
				assert.Equal(t, runtimes.PodDepsDir+"/site-packages", env(p)["PYTHONPATH"].Value)
			},
		},
		"git source": {
			mods: []fntest.Modifier{fntest.Git("https://git.example/repo.git", "/fns/hello/", "main", &v1alpha2.RepositoryAuth{Type: "basic", SecretName: "creds"}), fntest.Resolved("0123456789abcdef0123456789abcdef01234567")},
			check: func(t *testing.T, p plan.Plan) {
				require.NotNil(t, p.Source.Git)
				assert.Equal(t, plan.GitSource{URL: "https://git.example/repo.git", BaseDir: "fns/hello", Reference: "main",
					Commit: "0123456789abcdef0123456789abcdef01234567", Auth: &v1alpha2.RepositoryAuth{Type: "basic", SecretName: "creds"}}, *p.Source.Git)
				assert.Empty(t, p.Source.Files)
				assert.True(t, p.Dependencies.FromSource)
				assert.True(t, p.Dependencies.Install())
				assert.Equal(t, runtimes.PodDepsDir, env(p)["KFN_DEPS_DIR"].Value)
			},
		},
		"user env overrides platform in place and keeps order": {
			mods: []fntest.Modifier{fntest.Env("B", "2", "FUNC_TIMEOUT", "30", "A", "1"), fntest.EnvFrom("TOKEN", "s", "k")},
			check: func(t *testing.T, p plan.Plan) {
				n := len(p.Env)
				assert.Equal(t, []string{"B", "A", "TOKEN"}, []string{p.Env[n-3].Name, p.Env[n-2].Name, p.Env[n-1].Name})
				assert.Equal(t, "s", p.Env[n-1].ValueFrom.SecretKeyRef.Name)
				count := 0
				for _, e := range p.Env {
					if e.Name == "FUNC_TIMEOUT" {
						count++
						assert.Equal(t, "30", e.Value)
					}
				}
				assert.Equal(t, 1, count)
				assert.Equal(t, 35*time.Second, p.TerminationGracePeriod, "grace follows the user's timeout")
				assert.Len(t, p.UserEnv, 4)
			},
		},
		"a Kyma user's Python body limit replaces the default": {
			mods: []fntest.Modifier{fntest.Runtime(v1alpha2.Python312), fntest.Source("def main(e, c):\n  return 'hi'\n", ""),
				fntest.Env("FUNC_MEMFILE_MAX", "5242880")},
			check: func(t *testing.T, p plan.Plan) {
				count := 0
				for _, e := range p.Env {
					if e.Name == "FUNC_MEMFILE_MAX" {
						count++
						assert.Equal(t, "5242880", e.Value)
					}
				}
				assert.Equal(t, 1, count)
			},
		},
		"non-numeric FUNC_TIMEOUT keeps the default grace period": {
			mods:  []fntest.Modifier{fntest.Env("FUNC_TIMEOUT", "soon")},
			check: func(t *testing.T, p plan.Plan) { assert.Equal(t, 185*time.Second, p.TerminationGracePeriod) },
		},
		"profile": {
			mods: []fntest.Modifier{fntest.Profile("XS")},
			check: func(t *testing.T, p plan.Plan) {
				assert.Equal(t, "XS", p.Profile)
				assert.Equal(t, "50m", p.Resources.Requests.Cpu().String())
			},
		},
		"custom resources": {
			mods: []fntest.Modifier{fntest.Resources(custom)},
			check: func(t *testing.T, p plan.Plan) {
				assert.Equal(t, v1alpha2.ProfileCustom, p.Profile)
				assert.Equal(t, custom, p.Resources)
			},
		},
		"build resources are ignored": {
			mods: []fntest.Modifier{func(f *v1alpha2.Function) {
				f.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Build: &v1alpha2.ResourceRequirements{Profile: "fast"}}
			}},
			check: func(t *testing.T, p plan.Plan) { assert.Equal(t, "L", p.Profile) },
		},
		"replicas": {
			mods:  []fntest.Modifier{fntest.Replicas(3)},
			check: func(t *testing.T, p plan.Plan) { assert.Equal(t, int32(3), p.Scaling.Replicas) },
		},
		"scaleConfig": {
			mods: []fntest.Modifier{fntest.Scale(0, 5), fntest.ScaleTargets(7, 3, 60)},
			check: func(t *testing.T, p plan.Plan) {
				assert.Equal(t, plan.Scaling{Autoscaled: true, Replicas: 1, MinReplicas: 0, MaxReplicas: 5, TargetBacklog: 7, TargetConcurrency: 3, CooldownPeriod: 60}, p.Scaling)
				assert.True(t, p.Scaling.ScalesToZero())
			},
		},
		"secretMounts": {
			mods: []fntest.Modifier{fntest.SecretMount("b", "/etc/b"), fntest.SecretMount("a", "/etc/a")},
			check: func(t *testing.T, p plan.Plan) {
				assert.Equal(t, []v1alpha2.SecretMount{{SecretName: "b", MountPath: "/etc/b"}, {SecretName: "a", MountPath: "/etc/a"}}, p.SecretMounts)
			},
		},
		"labels and annotations": {
			mods: []fntest.Modifier{fntest.Labels(map[string]string{"team": "a", v1alpha2.LabelFunctionName: "spoof"}), fntest.Annotations(map[string]string{"note": "x"})},
			check: func(t *testing.T, p plan.Plan) {
				assert.Equal(t, "a", p.Labels["team"])
				assert.Equal(t, "hello", p.Labels[v1alpha2.LabelFunctionName], "selector labels win")
				assert.Equal(t, "x", p.Annotations["note"])
			},
		},
		// As Kyma's deployment builder: the Function's name is the pod's
		// app.kubernetes.io/name whatever spec.labels says; spec.annotations
		// may replace Istio's proxy config but not the native sidecar.
		"Kyma's app label and Istio annotations win or yield as in Kyma": {
			mods: []fntest.Modifier{
				fntest.Labels(map[string]string{"app.kubernetes.io/name": "shop", "app.kubernetes.io/part-of": "shop"}),
				fntest.Annotations(map[string]string{"proxy.istio.io/config": "{}", "sidecar.istio.io/nativeSidecar": "false"}),
			},
			check: func(t *testing.T, p plan.Plan) {
				assert.Equal(t, "hello", p.Labels["app.kubernetes.io/name"])
				assert.Equal(t, "shop", p.Labels["app.kubernetes.io/part-of"])
				assert.Equal(t, "{}", p.Annotations["proxy.istio.io/config"])
				assert.Equal(t, "true", p.Annotations["sidecar.istio.io/nativeSidecar"])
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := plan.For(fntest.Function("hello", "ns", tc.mods...), cfg)
			require.NoError(t, err)
			tc.check(t, p)
		})
	}
}

func TestForErrors(t *testing.T) {
	tests := map[string]struct {
		fn   *v1alpha2.Function
		cfg  plan.Config
		want error
	}{
		"unknown runtime":    {fn: fntest.Function("f", "ns", fntest.Runtime("cobol85")), cfg: cfg, want: runtimes.ErrUnknownRuntime},
		"no image":           {fn: fntest.Function("f", "ns"), cfg: plan.Config{}},
		"bad default preset": {fn: fntest.Function("f", "ns"), cfg: plan.Config{Images: cfg.Images, DefaultProfile: "XXL"}},
		"bad package.json":   {fn: fntest.Function("f", "ns", fntest.Source(fntest.HelloJS, "{nope}")), cfg: cfg},
		"git not resolved":   {fn: fntest.Function("f", "ns", fntest.Git("https://g/r.git", "/", "main", nil)), cfg: cfg, want: plan.ErrUnresolvedCommit},
		"git resolved for another reference": {
			fn: fntest.Function("f", "ns", fntest.Git("https://g/r.git", "/", "v1", nil), fntest.Resolved("abc"),
				fntest.Git("https://g/r.git", "/", "v2", nil)),
			cfg: cfg, want: plan.ErrUnresolvedCommit,
		},
		"no source": {fn: fntest.Function("f", "ns", func(f *v1alpha2.Function) { f.Spec.Source = v1alpha2.Source{} }), cfg: cfg},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := plan.For(tc.fn, tc.cfg)
			require.ErrorIs(t, err, plan.ErrInvalidFunction)
			if tc.want != nil {
				require.True(t, errors.Is(err, tc.want), "%v", err)
			}
		})
	}
}

func TestSourceHash(t *testing.T) {
	base := func(mods ...fntest.Modifier) string {
		p, err := plan.For(fntest.Function("hello", "ns", mods...), cfg)
		require.NoError(t, err)
		return p.Source.Hash
	}
	h := base()
	assert.Equal(t, h, base(fntest.Env("A", "1"), fntest.Replicas(4), fntest.Profile("S"), fntest.Labels(map[string]string{"a": "b"})),
		"env, replicas, resources and labels do not change the source hash")
	assert.NotEqual(t, h, base(fntest.Source("module.exports = {main: () => 1}", "")))
	assert.NotEqual(t, h, base(fntest.Source(fntest.HelloJS, fntest.PackageJSON)))
	assert.NotEqual(t, h, base(fntest.Runtime(v1alpha2.NodeJS24)))
	git := func(commit string) string {
		return base(fntest.Git("https://g/r.git", "d", "main", nil), fntest.Resolved(commit))
	}
	assert.Equal(t, git("c1"), git("c1"))
	assert.NotEqual(t, git("c1"), git("c2"))
}

func TestEnvForLocal(t *testing.T) {
	p, err := plan.For(fntest.Function("hello", "ns", fntest.Source(fntest.HelloJS, fntest.PackageJSON), fntest.Env("X", "y")), cfg)
	require.NoError(t, err)
	h := p.Host
	h.FunctionDir, h.DepsDir, h.LibsDir, h.Port, h.ListenFD = "/home/me/fn", "/cache/deps/abc", "", 0, 3
	e, err := p.EnvFor(h)
	require.NoError(t, err)
	got := map[string]string{}
	for _, v := range e {
		got[v.Name] = v.Value
	}
	assert.Equal(t, "/home/me/fn", got["KFN_FUNCTION_DIR"])
	assert.Equal(t, "/cache/deps/abc/node_modules", got["NODE_PATH"])
	assert.Equal(t, "3", got["KFN_LISTEN_FD"])
	assert.Equal(t, "y", got["X"])

	h.FunctionDir = ""
	_, err = p.EnvFor(h)
	require.ErrorIs(t, err, runtimes.ErrInvalidConfig)
}

// A Kyma manifest may define a variable twice (Kyma accepts it): the
// environment has it once, with the last definition, where Kubernetes
// would have used it, and a repeated FUNC_TIMEOUT counts by its last value.
func TestEnvDuplicateNamesLastWins(t *testing.T) {
	const manifest = `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: twice
  namespace: default
spec:
  runtime: nodejs22
  env:
    - name: GREETING
      value: hello
    - name: FUNC_TIMEOUT
      value: "5"
    - name: OTHER
      value: x
    - name: GREETING
      value: hi
    - name: FUNC_TIMEOUT
      value: "20"
  source:
    inline:
      source: "module.exports = { main: () => process.env.GREETING }"
`
	var fn v1alpha2.Function
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &fn))
	p, err := plan.For(&fn, cfg)
	require.NoError(t, err)
	count := map[string]int{}
	value := map[string]string{}
	var order []string
	for _, e := range p.Env {
		count[e.Name]++
		value[e.Name] = e.Value
		order = append(order, e.Name)
	}
	assert.Equal(t, 1, count["GREETING"])
	assert.Equal(t, 1, count["FUNC_TIMEOUT"])
	assert.Equal(t, "hi", value["GREETING"])
	assert.Equal(t, "20", value["FUNC_TIMEOUT"], "the platform's FUNC_TIMEOUT is replaced by the last definition")
	assert.Equal(t, 20*time.Second, p.Host.Timeout)
	assert.Less(t, slices.Index(order, "OTHER"), slices.Index(order, "GREETING"), "the last definition keeps its place")
}

func TestSecurityContexts(t *testing.T) {
	tests := map[string]struct {
		mods          []fntest.Modifier
		wantPod       *corev1.PodSecurityContext
		wantContainer *corev1.SecurityContext
	}{
		"restricted defaults": {
			wantPod:       plan.DefaultPodSecurityContext(),
			wantContainer: plan.DefaultContainerSecurityContext(),
		},
		"the user's fields win, the others keep the default": {
			mods: []fntest.Modifier{
				fntest.PodSecurity(&corev1.PodSecurityContext{RunAsUser: ptr.To[int64](2000)}),
				fntest.ContainerSecurity(&corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(false), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}}),
			},
			wantPod: func() *corev1.PodSecurityContext {
				sc := plan.DefaultPodSecurityContext()
				sc.RunAsUser = ptr.To[int64](2000)
				return sc
			}(),
			wantContainer: func() *corev1.SecurityContext {
				sc := plan.DefaultContainerSecurityContext()
				sc.ReadOnlyRootFilesystem = ptr.To(false)
				// Nested objects merge too: the default drop stays.
				sc.Capabilities.Add = []corev1.Capability{"NET_BIND_SERVICE"}
				return sc
			}(),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := plan.For(fntest.Function("f", "ns", tc.mods...), cfg)
			require.NoError(t, err)
			assert.Equal(t, tc.wantPod, p.PodSecurityContext)
			assert.Equal(t, tc.wantContainer, p.ContainerSecurityContext)
		})
	}
	assert.NotSame(t, plan.DefaultPodSecurityContext(), plan.DefaultPodSecurityContext(), "each call returns a new value")
}
