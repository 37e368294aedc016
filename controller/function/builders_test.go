package function_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/controller/internal/fntest"
	"github.com/kfn-dev/kfn/controller/plan"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/scaler/trigger"
)

const pkgJSON = `{"name":"f","dependencies":{"lodash":"^4.17.21"}}`

func testConfig() function.Config {
	c := function.DefaultConfig()
	c.ScalerAddress = "scaler.test:9090"
	return c
}

// typed converts an apply configuration into the API type it describes.
func typed[T any](t *testing.T, ac any) *T {
	t.Helper()
	b, err := json.Marshal(ac)
	require.NoError(t, err)
	var out T
	require.NoError(t, json.Unmarshal(b, &out))
	return &out
}

func planFor(t *testing.T, fn *v1alpha2.Function) plan.Plan {
	t.Helper()
	p, err := plan.For(fn, testConfig().Plan)
	require.NoError(t, err)
	return p
}

func deployment(t *testing.T, fn *v1alpha2.Function, setReplicas bool) *appsv1.Deployment {
	t.Helper()
	ac, err := function.Deployment(fn, planFor(t, fn), testConfig(), setReplicas, function.FixedReplicas(planFor(t, fn).Scaling))
	require.NoError(t, err)
	return typed[appsv1.Deployment](t, ac)
}

func container(pod corev1.PodSpec, name string) *corev1.Container {
	for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}

func volume(pod corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

func mount(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func TestConfigMap(t *testing.T) {
	fn := fntest.Function("hello", "ns", fntest.Source(fntest.HelloJS, pkgJSON))
	p := planFor(t, fn)
	cm := typed[corev1.ConfigMap](t, function.ConfigMap(p))
	assert.Equal(t, "hello", cm.Name)
	assert.Equal(t, "ns", cm.Namespace)
	assert.Equal(t, map[string]string{"handler.js": fntest.HelloJS, "package.json": pkgJSON}, cm.Data)
	assert.Equal(t, p.Source.Hash, cm.Annotations[function.AnnotationSourceHash])
	assert.Equal(t, "function-controller", cm.Labels[v1alpha2.LabelManagedBy])
	require.Len(t, cm.OwnerReferences, 1)
	assert.Equal(t, "Function", cm.OwnerReferences[0].Kind)
	assert.Equal(t, fn.UID, cm.OwnerReferences[0].UID)
	assert.True(t, *cm.OwnerReferences[0].Controller)

	envOnly := fntest.Function("hello", "ns", fntest.Source(fntest.HelloJS, pkgJSON), fntest.Env("A", "b"), fntest.Replicas(3), fntest.Profile("XS"))
	assert.Equal(t, cm, typed[corev1.ConfigMap](t, function.ConfigMap(planFor(t, envOnly))), "only source and dependencies shape the ConfigMap")

	git := fntest.Function("g", "ns", fntest.Git("https://g/r.git", "d", "main", nil), fntest.Resolved("c1"))
	assert.Nil(t, function.ConfigMap(planFor(t, git)))
}

func TestService(t *testing.T) {
	fn := fntest.Function("hello", "ns")
	svc := typed[corev1.Service](t, function.Service(planFor(t, fn)))
	assert.Equal(t, "hello", svc.Name)
	assert.Equal(t, fn.SelectorLabels(), svc.Spec.Selector)
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, int32(80), svc.Spec.Ports[0].Port)
	assert.Equal(t, int32(8080), svc.Spec.Ports[0].TargetPort.IntVal)
	assert.Len(t, svc.OwnerReferences, 1)
}

func TestDeploymentDefaults(t *testing.T) {
	fn := fntest.Function("hello", "ns")
	p := planFor(t, fn)
	d := deployment(t, fn, true)
	assert.Equal(t, "hello", d.Name)
	assert.Equal(t, ptr.To[int32](1), d.Spec.Replicas)
	assert.Equal(t, fn.SelectorLabels(), d.Spec.Selector.MatchLabels)
	assert.Equal(t, p.Labels, d.Spec.Template.Labels)
	assert.Equal(t, "hello", d.Spec.Template.Labels["app.kubernetes.io/name"], "Kyma's pod label")
	assert.Equal(t, "true", d.Spec.Template.Annotations["sidecar.istio.io/nativeSidecar"], "Kyma's pod annotation")
	assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type)
	assert.Equal(t, int32(0), d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntVal, "an update never takes a ready replica away")
	assert.Equal(t, p.Source.Hash, d.Spec.Template.Annotations[function.AnnotationSourceHash])
	assert.NotContains(t, d.Spec.Template.Annotations, function.AnnotationDepsHash)

	pod := d.Spec.Template.Spec
	assert.Empty(t, pod.InitContainers, "no dependencies, no install step")
	c := container(pod, "function")
	require.NotNil(t, c)
	assert.Equal(t, "kfn/runtime-nodejs22:latest", c.Image)
	assert.Equal(t, []string{"node", "/opt/kfn/nodejs/server.cjs"}, c.Command)
	assert.Equal(t, int32(8080), c.Ports[0].ContainerPort)
	assert.Equal(t, "/healthz?ready", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	require.NotNil(t, c.StartupProbe, "a slow import is not killed by the liveness probe")
	assert.Equal(t, "/healthz", c.StartupProbe.HTTPGet.Path)
	assert.Equal(t, int32(1), c.StartupProbe.PeriodSeconds)
	assert.Equal(t, int32(150), c.StartupProbe.FailureThreshold)
	assert.Equal(t, int32(3), c.LivenessProbe.FailureThreshold)
	assert.True(t, apiequality.Semantic.DeepEqual(p.Resources, c.Resources))
	assert.Equal(t, len(p.Env), len(c.Env))
	assert.Equal(t, int64(187), *pod.TerminationGracePeriodSeconds, "timeout 180 s + 5 s + the 2 s preStop sleep")
	assert.Equal(t, int64(2), c.Lifecycle.PreStop.Sleep.Seconds)

	// The function's directory is a writable emptyDir, the working
	// directory; the host copies the read-only ConfigMap into it.
	fnDir := mount(c, runtimes.PodFunctionDir)
	require.NotNil(t, fnDir)
	assert.False(t, fnDir.ReadOnly)
	assert.NotNil(t, volume(pod, fnDir.Name).EmptyDir)
	assert.Equal(t, runtimes.PodFunctionDir, c.WorkingDir)
	src := mount(c, runtimes.PodSourceDir)
	require.NotNil(t, src)
	assert.True(t, src.ReadOnly)
	assert.Equal(t, "hello", volume(pod, src.Name).ConfigMap.Name)
	assert.Equal(t, runtimes.PodSourceDir, envValue(*c, "KFN_SOURCE_DIR"))
	assert.Equal(t, runtimes.PodFunctionDir, envValue(*c, "KFN_FUNCTION_DIR"))
	tmp := mount(c, "/tmp")
	require.NotNil(t, tmp)
	assert.NotNil(t, volume(pod, tmp.Name).EmptyDir)
	assert.Nil(t, mount(c, runtimes.PodDepsDir))

	// The restricted Pod Security Standard.
	psc := pod.SecurityContext
	assert.True(t, *psc.RunAsNonRoot)
	assert.Equal(t, int64(1000), *psc.RunAsUser)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type)
	csc := c.SecurityContext
	assert.False(t, *csc.AllowPrivilegeEscalation)
	assert.True(t, *csc.ReadOnlyRootFilesystem, "the root file system stays read-only")
	assert.Equal(t, []corev1.Capability{"ALL"}, csc.Capabilities.Drop)
}

// TestDeploymentFunctionDirAsKyma checks the function's directory of each
// runtime, Kyma's: /usr/src/app/function for Node.js, /kubeless (Kyma's
// FUNCTION_PATH) for Python, writable, the working directory, and every
// other path the function container can write is a volume (/tmp): the root
// file system is read-only.
func TestDeploymentFunctionDirAsKyma(t *testing.T) {
	tests := map[string]struct {
		fn  *v1alpha2.Function
		dir string
	}{
		"nodejs22":  {fntest.Function("n", "ns"), "/usr/src/app/function"},
		"python312": {fntest.Function("p", "ns", fntest.Runtime(v1alpha2.Python312), fntest.Source("def main(e, c):\n    return 'ok'\n", "")), "/kubeless"},
		"python312 from git": {fntest.Function("g", "ns", fntest.Runtime(v1alpha2.Python312),
			fntest.Git("https://git.test/r.git", "fns", "main", nil), fntest.Resolved("c0ffee")), "/kubeless"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := deployment(t, tc.fn, true).Spec.Template.Spec
			c := container(pod, "function")
			assert.Equal(t, tc.dir, c.WorkingDir)
			assert.Equal(t, tc.dir, envValue(*c, "KFN_FUNCTION_DIR"))
			m := mount(c, tc.dir)
			require.NotNil(t, m)
			assert.False(t, m.ReadOnly)
			assert.NotNil(t, volume(pod, m.Name).EmptyDir)
			assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
			for _, vm := range c.VolumeMounts {
				if !vm.ReadOnly {
					assert.Contains(t, []string{tc.dir, "/tmp"}, vm.MountPath, "writable mounts")
				}
			}
		})
	}
}

func TestDeploymentSpecFields(t *testing.T) {
	tests := map[string]struct {
		mods        []fntest.Modifier
		setReplicas bool
		check       func(t *testing.T, d *appsv1.Deployment)
	}{
		"fixed replicas": {
			mods: []fntest.Modifier{fntest.Replicas(3)}, setReplicas: true,
			check: func(t *testing.T, d *appsv1.Deployment) { assert.Equal(t, int32(3), *d.Spec.Replicas) },
		},
		"autoscaled: replicas left to the autoscaler": {
			mods: []fntest.Modifier{fntest.Scale(1, 5)}, setReplicas: false,
			check: func(t *testing.T, d *appsv1.Deployment) { assert.Nil(t, d.Spec.Replicas) },
		},
		"runtimeImageOverride": {
			mods: []fntest.Modifier{fntest.ImageOverride("my/image:1")}, setReplicas: true,
			check: func(t *testing.T, d *appsv1.Deployment) {
				assert.Equal(t, "my/image:1", container(d.Spec.Template.Spec, "function").Image)
			},
		},
		"env with valueFrom": {
			mods: []fntest.Modifier{fntest.Env("A", "1"), fntest.EnvFrom("TOKEN", "sec", "tok")}, setReplicas: true,
			check: func(t *testing.T, d *appsv1.Deployment) {
				env := container(d.Spec.Template.Spec, "function").Env
				n := len(env)
				assert.Equal(t, corev1.EnvVar{Name: "A", Value: "1"}, env[n-2])
				assert.Equal(t, "TOKEN", env[n-1].Name)
				assert.Equal(t, "sec", env[n-1].ValueFrom.SecretKeyRef.Name)
				assert.Equal(t, "tok", env[n-1].ValueFrom.SecretKeyRef.Key)
			},
		},
		"profile": {
			mods: []fntest.Modifier{fntest.Profile("S")}, setReplicas: true,
			check: func(t *testing.T, d *appsv1.Deployment) {
				c := container(d.Spec.Template.Spec, "function")
				assert.Equal(t, "100m", c.Resources.Requests.Cpu().String())
				assert.Equal(t, "256Mi", c.Resources.Limits.Memory().String())
			},
		},
		"secret mounts read-only": {
			mods: []fntest.Modifier{fntest.SecretMount("db-creds", "/etc/db")}, setReplicas: true,
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template.Spec
				m := mount(container(pod, "function"), "/etc/db")
				require.NotNil(t, m)
				assert.True(t, m.ReadOnly)
				assert.Equal(t, "db-creds", volume(pod, m.Name).Secret.SecretName)
			},
		},
		"labels and annotations on the pods": {
			mods: []fntest.Modifier{fntest.Labels(map[string]string{"team": "a"}), fntest.Annotations(map[string]string{"prometheus.io/scrape": "true"})}, setReplicas: true,
			check: func(t *testing.T, d *appsv1.Deployment) {
				assert.Equal(t, "a", d.Spec.Template.Labels["team"])
				assert.Equal(t, "a", d.Labels["team"])
				assert.Equal(t, "true", d.Spec.Template.Annotations["prometheus.io/scrape"])
				assert.NotContains(t, d.Spec.Selector.MatchLabels, "team", "user labels stay out of the immutable selector")
			},
		},
		"user security contexts merge over the defaults": {
			mods: []fntest.Modifier{
				fntest.PodSecurity(&corev1.PodSecurityContext{RunAsUser: ptr.To[int64](2000)}),
				fntest.ContainerSecurity(&corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}}}),
			},
			setReplicas: true,
			check: func(t *testing.T, d *appsv1.Deployment) {
				psc := d.Spec.Template.Spec.SecurityContext
				assert.Equal(t, int64(2000), *psc.RunAsUser)
				assert.Equal(t, int64(1000), *psc.RunAsGroup, "unset fields keep the default")
				assert.True(t, *psc.RunAsNonRoot)
				csc := container(d.Spec.Template.Spec, "function").SecurityContext
				assert.False(t, *csc.ReadOnlyRootFilesystem)
				assert.False(t, *csc.AllowPrivilegeEscalation)
				assert.Equal(t, []corev1.Capability{"NET_BIND_SERVICE"}, csc.Capabilities.Add)
			},
		},
		"user FUNC_TIMEOUT sizes the grace period": {
			mods: []fntest.Modifier{fntest.Env("FUNC_TIMEOUT", "10")}, setReplicas: true,
			check: func(t *testing.T, d *appsv1.Deployment) {
				assert.Equal(t, int64(17), *d.Spec.Template.Spec.TerminationGracePeriodSeconds)
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.check(t, deployment(t, fntest.Function("hello", "ns", tc.mods...), tc.setReplicas))
		})
	}
}

func TestDeploymentDependencies(t *testing.T) {
	tests := map[string]struct {
		fn         *v1alpha2.Function
		install    []string // substrings of the install script
		registry   string
		libEnvName string
	}{
		"nodejs": {
			fn:         fntest.Function("f", "ns", fntest.Source(fntest.HelloJS, pkgJSON)),
			install:    []string{"cp /usr/src/app/source/package.json /usr/src/app/deps/package.json", "npm install --omit=dev"},
			registry:   "npm_config_userconfig=/etc/kfn/registry/.npmrc",
			libEnvName: "NODE_PATH",
		},
		"python": {
			fn:         fntest.Function("f", "ns", fntest.Runtime(v1alpha2.Python312), fntest.Source("def main(e,c): pass\n", "requests\n")),
			install:    []string{"pip install", "--target /usr/src/app/deps/site-packages -r /usr/src/app/deps/requirements.txt"},
			registry:   "PIP_CONFIG_FILE=/etc/kfn/registry/pip.conf",
			libEnvName: "PYTHONPATH",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := planFor(t, tc.fn)
			d := deployment(t, tc.fn, true)
			pod := d.Spec.Template.Spec
			require.Len(t, pod.InitContainers, 1)
			ic := pod.InitContainers[0]
			assert.Equal(t, function.ContainerInstallDeps, ic.Name)
			assert.Equal(t, p.Image, ic.Image, "the runtime image has the package manager")
			script := ic.Command[2]
			for _, s := range append(tc.install, tc.registry) {
				assert.Contains(t, script, s)
			}
			deps := mount(&ic, runtimes.PodDepsDir)
			require.NotNil(t, deps)
			assert.False(t, deps.ReadOnly)
			reg := mount(&ic, function.RegistryConfigDir)
			require.NotNil(t, reg)
			rv := volume(pod, reg.Name).Secret
			assert.Equal(t, function.DefaultRegistrySecretName, rv.SecretName)
			assert.True(t, *rv.Optional, "the registry config Secret is used when present")
			assert.Equal(t, ic.SecurityContext, container(pod, "function").SecurityContext, "init containers are restricted too")

			c := container(pod, "function")
			fdeps := mount(c, runtimes.PodDepsDir)
			require.NotNil(t, fdeps)
			assert.True(t, fdeps.ReadOnly)
			assert.Nil(t, mount(c, function.RegistryConfigDir), "registry credentials stay out of the function container")
			found := false
			for _, e := range c.Env {
				found = found || e.Name == tc.libEnvName
			}
			assert.True(t, found)
			assert.Equal(t, p.Dependencies.Hash, d.Spec.Template.Annotations[function.AnnotationDepsHash])
		})
	}
}

func TestDeploymentGit(t *testing.T) {
	fn := fntest.Function("g", "ns", fntest.Git("https://git.test/r.git", "/fns/g", "main", &v1alpha2.RepositoryAuth{Type: "basic", SecretName: "git-creds"}), fntest.Resolved("c0ffee"))
	d := deployment(t, fn, true)
	pod := d.Spec.Template.Spec
	require.Len(t, pod.InitContainers, 2)
	fetch, install := pod.InitContainers[0], pod.InitContainers[1]
	assert.Equal(t, function.ContainerFetchSource, fetch.Name)
	assert.Equal(t, "kfn/kfn:latest", fetch.Image)
	assert.Equal(t, []string{"/usr/local/bin/controller", "fetch-source"}, fetch.Command)
	assert.Equal(t, []string{"--url=https://git.test/r.git", "--reference=main", "--commit=c0ffee", "--base-dir=fns/g",
		"--dest=/usr/src/app/function", "--auth-type=basic", "--auth-dir=/etc/kfn/git-auth"}, fetch.Args)
	assert.False(t, mount(&fetch, runtimes.PodFunctionDir).ReadOnly)
	assert.NotNil(t, mount(&install, runtimes.PodFunctionDir), "the install step reads the fetched package.json")
	auth := mount(&fetch, function.GitAuthDir)
	require.NotNil(t, auth)
	assert.Equal(t, "git-creds", volume(pod, auth.Name).Secret.SecretName)
	assert.Contains(t, install.Command[2], "if [ ! -f /usr/src/app/function/package.json ]", "a directory without package.json installs nothing")

	c := container(pod, "function")
	src := mount(c, runtimes.PodFunctionDir)
	assert.False(t, src.ReadOnly, "the fetched directory is the function's, writable")
	assert.NotNil(t, volume(pod, src.Name).EmptyDir)
	assert.Nil(t, mount(c, runtimes.PodSourceDir), "nothing to copy")
	assert.Empty(t, envValue(*c, "KFN_SOURCE_DIR"))
	assert.Nil(t, mount(c, function.GitAuthDir), "git credentials stay out of the function container")

	moved := fntest.Function("g", "ns", fntest.Git("https://git.test/r.git", "/fns/g", "main", nil), fntest.Resolved("beef"))
	assert.NotEqual(t, d.Spec.Template.Annotations[function.AnnotationSourceHash],
		deployment(t, moved, true).Spec.Template.Annotations[function.AnnotationSourceHash], "a new commit rolls the pods")
}

func TestHorizontalPodAutoscaler(t *testing.T) {
	tests := map[string]struct {
		mods []fntest.Modifier
		want bool
	}{
		"fixed replicas":        {mods: nil},
		"min == max":            {mods: []fntest.Modifier{fntest.Scale(2, 2)}},
		"scale to zero":         {mods: []fntest.Modifier{fntest.Scale(0, 3)}},
		"max > min >= 1 scales": {mods: []fntest.Modifier{fntest.Scale(1, 4)}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ac := function.HorizontalPodAutoscaler(planFor(t, fntest.Function("f", "ns", tc.mods...)), 60)
			if !tc.want {
				assert.Nil(t, ac)
				return
			}
			hpa := typed[autoscalingv2.HorizontalPodAutoscaler](t, ac)
			assert.Equal(t, autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "f"}, hpa.Spec.ScaleTargetRef)
			assert.Equal(t, int32(1), *hpa.Spec.MinReplicas)
			assert.Equal(t, int32(4), hpa.Spec.MaxReplicas)
			assert.Equal(t, corev1.ResourceCPU, hpa.Spec.Metrics[0].Resource.Name)
			assert.Equal(t, int32(60), *hpa.Spec.Metrics[0].Resource.Target.AverageUtilization)
			assert.Len(t, hpa.OwnerReferences, 1)
		})
	}
}

func TestScaledObject(t *testing.T) {
	p := planFor(t, fntest.Function("f", "ns", fntest.Scale(0, 7), fntest.ScaleTargets(4, 2, 30)))
	so := function.ScaledObject(p, "scaler.test:9090", nil)
	assert.Equal(t, "f", so.Name)
	assert.Equal(t, "Deployment", so.Spec.ScaleTargetRef.Kind)
	assert.Equal(t, "f", so.Spec.ScaleTargetRef.Name)
	assert.Equal(t, int32(0), *so.Spec.MinReplicaCount)
	assert.Equal(t, int32(7), *so.Spec.MaxReplicaCount)
	assert.Equal(t, int32(30), *so.Spec.CooldownPeriod)
	require.Len(t, so.Spec.Triggers, 1)
	assert.Equal(t, "external-push", so.Spec.Triggers[0].Type)
	assert.Equal(t, map[string]string{
		trigger.KeyScalerAddress:     "scaler.test:9090",
		trigger.KeyFunctionNamespace: "ns",
		trigger.KeyFunctionName:      "f",
		trigger.KeyTargetBacklog:     "4",
		trigger.KeyTargetConcurrency: "2",
	}, so.Spec.Triggers[0].Metadata)
	assert.Equal(t, p.UID, so.OwnerReferences[0].UID)
	assert.Nil(t, so.Spec.Triggers[0].AuthenticationRef, "plain gRPC: no authentication")

	auth := &kedav1alpha1.AuthenticationRef{Kind: "ClusterTriggerAuthentication", Name: "kfn-scaler"}
	so = function.ScaledObject(p, "scaler.test:9090", auth)
	assert.Equal(t, auth, so.Spec.Triggers[0].AuthenticationRef, "KEDA reads the scaler's CA and client certificate from it")
	auth.Name = "changed"
	assert.Equal(t, "kfn-scaler", so.Spec.Triggers[0].AuthenticationRef.Name, "the builder keeps its own copy")
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, function.DefaultConfig().Validate())
	for name, mod := range map[string]func(*function.Config){
		"no field manager":     func(c *function.Config) { c.FieldManager = "" },
		"no git fetch image":   func(c *function.Config) { c.GitFetchImage = "" },
		"git poll under 1s":    func(c *function.Config) { c.GitPollInterval = time.Millisecond },
		"HPA target 0":         func(c *function.Config) { c.HPACPUUtilization = 0 },
		"resync under 1s":      func(c *function.Config) { c.Resync = 0 },
		"no workers":           func(c *function.Config) { c.Workers = 0 },
		"KEDA check too often": func(c *function.Config) { c.KEDACheckInterval = time.Millisecond },
		"empty runtime image":  func(c *function.Config) { c.Plan.Images["nodejs22"] = "" },
		"authentication kind": func(c *function.Config) {
			c.ScalerAuthentication = &kedav1alpha1.AuthenticationRef{Kind: "Secret", Name: "x"}
		},
		"authentication no name": func(c *function.Config) {
			c.ScalerAuthentication = &kedav1alpha1.AuthenticationRef{Kind: "TriggerAuthentication"}
		},
		"authentication name": func(c *function.Config) {
			c.ScalerAuthentication = &kedav1alpha1.AuthenticationRef{Kind: "TriggerAuthentication", Name: "Not_A_Name"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := function.DefaultConfig()
			mod(&c)
			require.ErrorIs(t, c.Validate(), function.ErrInvalidConfig)
		})
	}
	c := function.DefaultConfig()
	c.ScalerAuthentication = &kedav1alpha1.AuthenticationRef{Kind: "ClusterTriggerAuthentication", Name: "kfn-scaler"}
	require.NoError(t, c.Validate())
}

func TestChooseAutoscaler(t *testing.T) {
	tests := map[string]struct {
		mods             []fntest.Modifier
		keda, subscribed bool
		want             function.Autoscaler
		wantErr          error
		fixed            int32
	}{
		"replicas":                        {mods: []fntest.Modifier{fntest.Replicas(2)}, keda: true, subscribed: true, want: function.AutoscalerNone, fixed: 2},
		"cpu range without KEDA":          {mods: []fntest.Modifier{fntest.Scale(1, 3)}, want: function.AutoscalerHPA},
		"cpu range with KEDA, no events":  {mods: []fntest.Modifier{fntest.Scale(1, 3)}, keda: true, want: function.AutoscalerHPA},
		"subscribed range with KEDA":      {mods: []fntest.Modifier{fntest.Scale(1, 3)}, keda: true, subscribed: true, want: function.AutoscalerKEDA},
		"subscribed range without KEDA":   {mods: []fntest.Modifier{fntest.Scale(1, 3)}, subscribed: true, want: function.AutoscalerHPA},
		"scale to zero with KEDA":         {mods: []fntest.Modifier{fntest.Scale(0, 3)}, keda: true, want: function.AutoscalerKEDA},
		"scale to zero without KEDA":      {mods: []fntest.Modifier{fntest.Scale(0, 3)}, wantErr: function.ErrNeedsKEDA, want: function.AutoscalerNone},
		"min == max is a fixed count":     {mods: []fntest.Modifier{fntest.Scale(2, 2)}, keda: true, subscribed: true, want: function.AutoscalerNone, fixed: 2},
		"default is one unscaled replica": {want: function.AutoscalerNone, fixed: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := planFor(t, fntest.Function("f", "ns", tc.mods...)).Scaling
			got, err := function.ChooseAutoscaler(s, tc.keda, tc.subscribed)
			assert.ErrorIs(t, err, tc.wantErr)
			assert.Equal(t, tc.want, got)
			if tc.fixed != 0 {
				assert.Equal(t, tc.fixed, function.FixedReplicas(s))
			}
		})
	}
	assert.True(t, strings.Contains(function.ErrNeedsKEDA.Error(), "KEDA"))

	// Fixed: an autoscaler of the user's sets spec.replicas; scaleConfig
	// is left out, even scale to zero without KEDA.
	s := planFor(t, fntest.Function("f", "ns", fntest.Scale(0, 3), fntest.Replicas(4))).Scaling.Fixed()
	got, err := function.ChooseAutoscaler(s, false, true)
	require.NoError(t, err)
	assert.Equal(t, function.AutoscalerNone, got)
	assert.Equal(t, int32(4), function.FixedReplicas(s))
	assert.False(t, s.ScalesToZero())
}

func TestTargetsFunction(t *testing.T) {
	tests := map[string]struct {
		apiVersion, kind string
		want             bool
	}{
		"kubectl autoscale function": {"serverless.kyma-project.io/v1alpha2", "Function", true},
		"another version":            {"serverless.kyma-project.io/v1alpha1", "Function", true},
		"kfn's own HPA":              {"apps/v1", "Deployment", false},
		"another group's Function":   {"example.com/v1", "Function", false},
		"another kind of the group":  {"serverless.kyma-project.io/v1alpha2", "GitRepository", false},
		"KEDA's default target":      {"", "", false},
		"bad apiVersion":             {"a/b/c", "Function", false},
	}
	for name, tc := range tests {
		assert.Equal(t, tc.want, function.TargetsFunction(tc.apiVersion, tc.kind), name)
	}
}
