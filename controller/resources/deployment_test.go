package resources_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
	"github.com/kfn-dev/kfn/test/fntest"
)

func TestDeploymentDefaults(t *testing.T) {
	fn := fntest.Function("hello", "ns")
	p := planFor(t, fn)
	d := deployment(t, fn)
	assert.Equal(t, "hello", d.Name)
	assert.Equal(t, ptr.To[int32](1), d.Spec.Replicas)
	assert.Equal(t, fn.SelectorLabels(), d.Spec.Selector.MatchLabels)
	assert.Equal(t, p.Labels, d.Spec.Template.Labels)
	assert.Equal(t, "hello", d.Spec.Template.Labels["app.kubernetes.io/name"], "Kyma's pod label")
	assert.Equal(t, "true", d.Spec.Template.Annotations["sidecar.istio.io/nativeSidecar"], "Kyma's pod annotation")
	assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type)
	assert.Equal(t, int32(0), d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntVal, "an update never takes a ready replica away")
	assert.Equal(t, p.Source.Hash, d.Spec.Template.Annotations[resources.AnnotationSourceHash])
	assert.NotContains(t, d.Spec.Template.Annotations, resources.AnnotationDepsHash)

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
	assert.Equal(t, int64(190), *pod.TerminationGracePeriodSeconds, "timeout 180 s + 5 s + the 5 s preStop sleep")
	assert.Equal(t, int64(5), c.Lifecycle.PreStop.Sleep.Seconds)

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
	assert.Equal(t, runtimes.PodSourceDir, fntest.EnvValue(*c, "KFN_SOURCE_DIR"))
	assert.Equal(t, runtimes.PodFunctionDir, fntest.EnvValue(*c, "KFN_FUNCTION_DIR"))
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
			pod := deployment(t, tc.fn).Spec.Template.Spec
			c := container(pod, "function")
			assert.Equal(t, tc.dir, c.WorkingDir)
			assert.Equal(t, tc.dir, fntest.EnvValue(*c, "KFN_FUNCTION_DIR"))
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
		mods  []fntest.Modifier
		check func(t *testing.T, d *appsv1.Deployment)
	}{
		"fixed replicas": {
			mods:  []fntest.Modifier{fntest.Replicas(3)},
			check: func(t *testing.T, d *appsv1.Deployment) { assert.Equal(t, int32(3), *d.Spec.Replicas) },
		},
		"autoscaled: replicas left to the autoscaler": {
			mods:  []fntest.Modifier{fntest.Scale(1, 5)},
			check: func(t *testing.T, d *appsv1.Deployment) { assert.Nil(t, d.Spec.Replicas) },
		},
		"runtimeImageOverride": {
			mods: []fntest.Modifier{fntest.ImageOverride("my/image:1")},
			check: func(t *testing.T, d *appsv1.Deployment) {
				assert.Equal(t, "my/image:1", container(d.Spec.Template.Spec, "function").Image)
			},
		},
		"env with valueFrom": {
			mods: []fntest.Modifier{fntest.Env("A", "1"), fntest.EnvFrom("TOKEN", "sec", "tok")},
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
			mods: []fntest.Modifier{fntest.Profile("S")},
			check: func(t *testing.T, d *appsv1.Deployment) {
				c := container(d.Spec.Template.Spec, "function")
				assert.Equal(t, "100m", c.Resources.Requests.Cpu().String())
				assert.Equal(t, "256Mi", c.Resources.Limits.Memory().String())
			},
		},
		"secret mounts read-only": {
			mods: []fntest.Modifier{fntest.SecretMount("db-creds", "/etc/db")},
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template.Spec
				m := mount(container(pod, "function"), "/etc/db")
				require.NotNil(t, m)
				assert.True(t, m.ReadOnly)
				assert.Equal(t, "db-creds", volume(pod, m.Name).Secret.SecretName)
			},
		},
		"labels and annotations on the pods": {
			mods: []fntest.Modifier{fntest.Labels(map[string]string{"team": "a"}), fntest.Annotations(map[string]string{"prometheus.io/scrape": "true"})},
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
			mods: []fntest.Modifier{fntest.Env("FUNC_TIMEOUT", "10")},
			check: func(t *testing.T, d *appsv1.Deployment) {
				assert.Equal(t, int64(20), *d.Spec.Template.Spec.TerminationGracePeriodSeconds) // 10 s + 5 s + the 5 s preStop sleep
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.check(t, deployment(t, fntest.Function("hello", "ns", tc.mods...)))
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
			fn:         fntest.Function("f", "ns", fntest.Source(fntest.HelloJS, fntest.PackageJSON)),
			install:    []string{"cp -f /usr/src/app/source/package.json /usr/src/app/deps/package.json", "npm install --include=dev"},
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
			d := deployment(t, tc.fn)
			pod := d.Spec.Template.Spec
			require.Len(t, pod.InitContainers, 1)
			ic := pod.InitContainers[0]
			assert.Equal(t, resources.ContainerInstallDeps, ic.Name)
			assert.Equal(t, p.Image, ic.Image, "the runtime image has the package manager")
			script := ic.Command[2]
			for _, s := range append(tc.install, tc.registry) {
				assert.Contains(t, script, s)
			}
			deps := mount(&ic, runtimes.PodDepsDir)
			require.NotNil(t, deps)
			assert.False(t, deps.ReadOnly)
			reg := mount(&ic, resources.RegistryConfigDir)
			require.NotNil(t, reg)
			rv := volume(pod, reg.Name).Secret
			assert.Equal(t, resources.DefaultRegistrySecretName, rv.SecretName)
			assert.True(t, *rv.Optional, "the registry config Secret is used when present")
			assert.Equal(t, ic.SecurityContext, container(pod, "function").SecurityContext, "init containers are restricted too")

			c := container(pod, "function")
			fdeps := mount(c, runtimes.PodDepsDir)
			require.NotNil(t, fdeps)
			assert.True(t, fdeps.ReadOnly)
			assert.Nil(t, mount(c, resources.RegistryConfigDir), "registry credentials stay out of the function container")
			found := false
			for _, e := range c.Env {
				found = found || e.Name == tc.libEnvName
			}
			assert.True(t, found)
			assert.Equal(t, p.Dependencies.Hash, d.Spec.Template.Annotations[resources.AnnotationDepsHash])
		})
	}
}

func TestDeploymentGit(t *testing.T) {
	fn := fntest.Function("g", "ns", fntest.Git("https://git.test/r.git", "/fns/g", "main", &v1alpha2.RepositoryAuth{Type: "basic", SecretName: "git-creds"}), fntest.Resolved("c0ffee"))
	d := deployment(t, fn)
	pod := d.Spec.Template.Spec
	require.Len(t, pod.InitContainers, 2)
	fetch, install := pod.InitContainers[0], pod.InitContainers[1]
	assert.Equal(t, resources.ContainerFetchSource, fetch.Name)
	assert.Equal(t, "kfn/kfn:latest", fetch.Image)
	assert.Equal(t, []string{"/usr/local/bin/controller", "fetch-source"}, fetch.Command)
	assert.Equal(t, []string{"--url=https://git.test/r.git", "--reference=main", "--commit=c0ffee", "--base-dir=fns/g",
		"--dest=/usr/src/app/function", "--auth-type=basic", "--auth-dir=/etc/kfn/git-auth"}, fetch.Args)
	assert.False(t, mount(&fetch, runtimes.PodFunctionDir).ReadOnly)
	assert.NotNil(t, mount(&install, runtimes.PodFunctionDir), "the install step reads the fetched package.json")
	auth := mount(&fetch, resources.GitAuthDir)
	require.NotNil(t, auth)
	assert.Equal(t, "git-creds", volume(pod, auth.Name).Secret.SecretName)
	assert.Contains(t, install.Command[2], "if [ ! -f /usr/src/app/function/package.json ]", "a directory without package.json installs nothing")

	c := container(pod, "function")
	src := mount(c, runtimes.PodFunctionDir)
	assert.False(t, src.ReadOnly, "the fetched directory is the function's, writable")
	assert.NotNil(t, volume(pod, src.Name).EmptyDir)
	assert.Nil(t, mount(c, runtimes.PodSourceDir), "nothing to copy")
	assert.Empty(t, fntest.EnvValue(*c, "KFN_SOURCE_DIR"))
	assert.Nil(t, mount(c, resources.GitAuthDir), "git credentials stay out of the function container")

	moved := fntest.Function("g", "ns", fntest.Git("https://git.test/r.git", "/fns/g", "main", nil), fntest.Resolved("beef"))
	assert.NotEqual(t, d.Spec.Template.Annotations[resources.AnnotationSourceHash],
		deployment(t, moved).Spec.Template.Annotations[resources.AnnotationSourceHash], "a new commit rolls the pods")
}

// TestDeploymentDependencyCache: with a dependency cache configured, a
// Function with inline dependencies gets an install container that asks
// the cache first (the runtime image's client, the Function's runtime and
// dependency hash, the pod's identity token mounted read-only and no
// Kubernetes API token) and exits without npm or pip when it answers,
// else installs as before and stores the result without ever failing the
// pod; the function container is told the cache too. Without a cache, and
// for a Git source (no hash), the install script is exactly the one
// without the cache. Fails when the identity token, the cache variable or
// the fallback is dropped, or when the no-cache script changes. Only the
// install container holds the writer token (audience of this runtime and
// hash): fails when it is missing, of another audience, or mounted in the
// function container, whose code could then store dependencies.
func TestDeploymentDependencyCache(t *testing.T) {
	const cache = "http://kfn-publisher.kfn-system.svc.cluster.local/_kfn/dependencies"
	withCache := planConfig
	withCache.DependencyCacheAddress = cache
	tests := map[string]struct {
		fn      *v1alpha2.Function
		client  string
		install string
		today   string // the script without a cache
	}{
		"nodejs": {
			fn:      fntest.Function("f", "ns", fntest.Source(fntest.HelloJS, fntest.PackageJSON)),
			client:  "node /opt/kfn/nodejs/depcache.cjs",
			install: "\nnpm install --include=dev --no-audit --no-fund --no-update-notifier\n",
			today: "set -eu\ncp -f /usr/src/app/source/package.json /usr/src/app/deps/package.json\ncd /usr/src/app/deps\n" +
				"if [ -f /etc/kfn/registry/.npmrc ]; then export npm_config_userconfig=/etc/kfn/registry/.npmrc; fi\n" +
				"exec npm install --include=dev --no-audit --no-fund --no-update-notifier",
		},
		"python": {
			fn:      fntest.Function("f", "ns", fntest.Runtime(v1alpha2.Python312), fntest.Source("def main(e,c): pass\n", "requests\n")),
			client:  "python3 /opt/kfn/python/kfnhost/depcache.py",
			install: "\npython3 -m pip install --no-input --disable-pip-version-check --no-warn-script-location --target /usr/src/app/deps/site-packages -r /usr/src/app/deps/requirements.txt\n",
			today: "set -eu\ncp -f /usr/src/app/source/requirements.txt /usr/src/app/deps/requirements.txt\ncd /usr/src/app/deps\n" +
				"if [ -f /etc/kfn/registry/pip.conf ]; then export PIP_CONFIG_FILE=/etc/kfn/registry/pip.conf; fi\n" +
				"exec python3 -m pip install --no-input --disable-pip-version-check --no-warn-script-location --target /usr/src/app/deps/site-packages -r /usr/src/app/deps/requirements.txt",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// No cache: today's script, no identity, no cache variable.
			pod := deployment(t, tc.fn).Spec.Template.Spec
			ic := container(pod, resources.ContainerInstallDeps)
			require.NotNil(t, ic)
			assert.Equal(t, tc.today, ic.Command[2], "without a cache the install is as it was")
			assert.Nil(t, mount(ic, runtimes.PodIdentityDir))
			assert.Nil(t, mount(ic, runtimes.PodDependencyWriterDir))
			assert.Empty(t, fntest.EnvValue(*ic, runtimes.EnvDependencyCache))
			assert.Empty(t, fntest.EnvValue(*container(pod, resources.ContainerFunction), runtimes.EnvDependencyCache))

			p, err := plan.For(tc.fn, withCache)
			require.NoError(t, err)
			require.NoError(t, p.SetAutoscaler(true, false))
			pod = typed[appsv1.Deployment](t, resources.Deployment(p, testConfig())).Spec.Template.Spec
			ic = container(pod, resources.ContainerInstallDeps)
			require.NotNil(t, ic)
			args := fmt.Sprintf(" --runtime=%s --hash=%s --dir=/usr/src/app/deps", p.Runtime.Name, p.Dependencies.Hash)
			script := ic.Command[2]
			file := strings.Fields(tc.client)[1]
			mark := fmt.Sprintf("{ echo '%s%s' > /dev/termination-log; } 2>/dev/null || true", runtimes.DependencyCachedMessage,
				runtimes.DependencySet(p.Runtime.Name, p.Dependencies.Hash))
			assert.Contains(t, script, fmt.Sprintf("\nif [ -f %s ] && %s fetch%s; then %s; exit 0; fi\n", file, tc.client, args, mark),
				"the cache first: an answer ends the install without npm or pip, saying the cache holds the set")
			assert.Contains(t, script, tc.install, "else the install as before, not exec'd")
			assert.True(t, strings.HasSuffix(script, fmt.Sprintf("\nif [ -f %s ] && %s store%s; then %s; fi", file, tc.client, args, mark)),
				"then stored, never failing the pod, and said so once stored: %s", script)
			assert.Equal(t, cache, fntest.EnvValue(*ic, runtimes.EnvDependencyCache))
			assert.Equal(t, runtimes.PodIdentityDir+"/token", fntest.EnvValue(*ic, runtimes.EnvIdentityTokenFile))
			id := mount(ic, runtimes.PodIdentityDir)
			require.NotNil(t, id, "the install container presents the pod's identity")
			assert.True(t, id.ReadOnly)
			v := volume(pod, id.Name)
			require.NotNil(t, v.Projected)
			require.Len(t, v.Projected.Sources, 1)
			assert.Equal(t, resources.IdentityAudience, v.Projected.Sources[0].ServiceAccountToken.Audience, "kfn's audience: the API server refuses it")
			assert.Nil(t, mount(ic, resources.ServiceAccountDir), "no Kubernetes API token")
			assert.False(t, *pod.AutomountServiceAccountToken)

			// What the client unpacks from the cache is bounded by the
			// volume it unpacks into.
			limit := testConfig().Volumes.Dependencies
			assert.Equal(t, fmt.Sprint(limit.Value()), fntest.EnvValue(*ic, runtimes.EnvDependencyMaxBytes))

			// The install container alone holds the writer token, of the
			// audience of this runtime and hash only.
			assert.Equal(t, runtimes.PodDependencyWriterDir+"/token", fntest.EnvValue(*ic, runtimes.EnvDependencyWriterTokenFile))
			wm := mount(ic, runtimes.PodDependencyWriterDir)
			require.NotNil(t, wm, "the install container may store what it installed")
			assert.True(t, wm.ReadOnly)
			wv := volume(pod, wm.Name)
			require.NotNil(t, wv.Projected)
			require.Len(t, wv.Projected.Sources, 1)
			assert.Equal(t, runtimes.DependencyWriterAudience(p.Runtime.Name, p.Dependencies.Hash), wv.Projected.Sources[0].ServiceAccountToken.Audience)
			for _, c := range append(pod.InitContainers, pod.Containers...) {
				if c.Name == resources.ContainerInstallDeps {
					continue
				}
				for _, m := range c.VolumeMounts {
					assert.NotEqual(t, wm.Name, m.Name, "container %s must not hold the writer token", c.Name)
				}
				assert.Empty(t, fntest.EnvValue(c, runtimes.EnvDependencyWriterTokenFile), "container %s", c.Name)
			}
			assert.Equal(t, cache, fntest.EnvValue(*container(pod, resources.ContainerFunction), runtimes.EnvDependencyCache))
		})
	}
	t.Run("git", func(t *testing.T) {
		fn := fntest.Function("g", "ns", fntest.Git("https://git.test/r.git", "/fns/g", "main", nil), fntest.Resolved("c0ffee"))
		p, err := plan.For(fn, withCache)
		require.NoError(t, err)
		require.NoError(t, p.SetAutoscaler(true, false))
		pod := typed[appsv1.Deployment](t, resources.Deployment(p, testConfig())).Spec.Template.Spec
		ic := container(pod, resources.ContainerInstallDeps)
		require.NotNil(t, ic)
		assert.NotContains(t, ic.Command[2], "depcache", "a Git source's dependencies have no hash: installed as before")
		assert.Contains(t, ic.Command[2], "\nexec npm install")
		assert.Nil(t, mount(ic, runtimes.PodIdentityDir))
		assert.Empty(t, fntest.EnvValue(*container(pod, resources.ContainerFunction), runtimes.EnvDependencyCache))
	})
}

// TestDeploymentFetchesDependenciesAtStart: once the cache holds a
// Function's dependency set, its Deployment says so
// (AnnotationDependenciesCached, runtime and hash); rendered at start
// (plan.Dependencies.AtStart) its pods have no install container, no
// registry configuration and no writer token, and the function container
// gets KFN_DEPENDENCY_HASH and a writable dependencies volume (bounded as
// before) to unpack the set into. A Git source's dependencies (no hash),
// or no cache, cannot be fetched at start. Fails when an at-start pod
// still starts an install container, or its host has nowhere to unpack or
// no hash to fetch.
func TestDeploymentFetchesDependenciesAtStart(t *testing.T) {
	withCache := planConfig
	withCache.DependencyCacheAddress = "http://kfn-publisher.kfn-system.svc.cluster.local/_kfn/dependencies"
	for name, fn := range map[string]*v1alpha2.Function{
		"nodejs": fntest.Function("f", "ns", fntest.Source(fntest.HelloJS, fntest.PackageJSON)),
		"python": fntest.Function("f", "ns", fntest.Runtime(v1alpha2.Python312), fntest.Source("def main(e,c): pass\n", "requests\n")),
	} {
		t.Run(name, func(t *testing.T) {
			planned := func(atStart bool) (plan.Plan, *appsv1.Deployment) {
				p, err := plan.For(fn, withCache)
				require.NoError(t, err)
				require.NoError(t, p.SetAutoscaler(true, false))
				require.NoError(t, p.SetDependenciesCached(atStart))
				return p, typed[appsv1.Deployment](t, resources.Deployment(p, testConfig()))
			}
			p, d := planned(false)
			set := runtimes.DependencySet(p.Runtime.Name, p.Dependencies.Hash)
			assert.Equal(t, set, d.Annotations[resources.AnnotationDependenciesCached])
			pod := d.Spec.Template.Spec
			require.NotNil(t, container(pod, resources.ContainerInstallDeps), "known cached, the pods still install until rendered at start")
			assert.Empty(t, fntest.EnvValue(*container(pod, resources.ContainerFunction), runtimes.EnvDependencyHash))

			p, d = planned(true)
			assert.Equal(t, set, d.Annotations[resources.AnnotationDependenciesCached])
			pod = d.Spec.Template.Spec
			assert.Nil(t, container(pod, resources.ContainerInstallDeps), "no second container start")
			assert.Empty(t, pod.InitContainers)
			c := container(pod, resources.ContainerFunction)
			assert.Equal(t, p.Dependencies.Hash, fntest.EnvValue(*c, runtimes.EnvDependencyHash))
			assert.Equal(t, withCache.DependencyCacheAddress, fntest.EnvValue(*c, runtimes.EnvDependencyCache))
			assert.Equal(t, runtimes.PodDepsDir, fntest.EnvValue(*c, runtimes.EnvDepsDir))
			m := mount(c, runtimes.PodDepsDir)
			require.NotNil(t, m, "the host unpacks the set into the dependencies volume")
			assert.False(t, m.ReadOnly)
			v := volume(pod, m.Name)
			require.NotNil(t, v.EmptyDir)
			limit := testConfig().Volumes.Dependencies
			assert.Equal(t, limit.String(), v.EmptyDir.SizeLimit.String(), "bounded as the install's")
			assert.Equal(t, fmt.Sprint(limit.Value()), fntest.EnvValue(*c, runtimes.EnvDependencyMaxBytes), "what the host unpacks fits the volume")
			assert.Nil(t, mount(c, resources.RegistryConfigDir))
			assert.Nil(t, mount(c, runtimes.PodDependencyWriterDir))
			for _, v := range pod.Volumes {
				if v.Projected != nil {
					for _, s := range v.Projected.Sources {
						if s.ServiceAccountToken != nil {
							assert.NotEqual(t, runtimes.DependencyWriterAudience(p.Runtime.Name, p.Dependencies.Hash), s.ServiceAccountToken.Audience, "no writer token")
						}
					}
				}
				assert.Nil(t, v.Secret, "no registry configuration: %s", v.Name)
			}

			noCache, err := plan.For(fn, planConfig)
			require.NoError(t, err)
			assert.ErrorIs(t, noCache.SetDependenciesCached(true), plan.ErrNotCacheable)
			assert.False(t, noCache.Dependencies.AtStart, "left as it was")
		})
	}
	git, err := plan.For(fntest.Function("g", "ns", fntest.Git("https://git.test/r.git", "/fns/g", "main", nil), fntest.Resolved("cafe")), withCache)
	require.NoError(t, err)
	assert.ErrorIs(t, git.SetDependenciesCached(true), plan.ErrNotCacheable)

	// An image of the user's may predate KFN_DEPENDENCY_HASH: its pods
	// keep installing; one naming the platform's own image fetches.
	for image, atStart := range map[string]bool{"registry.test/own/node:1": false, withCache.Images["nodejs22"]: true} {
		p, err := plan.For(fntest.Function("f", "ns", fntest.Source(fntest.HelloJS, fntest.PackageJSON), fntest.ImageOverride(image)), withCache)
		require.NoError(t, err)
		require.NoError(t, p.SetDependenciesCached(true))
		assert.True(t, p.Dependencies.Cached, image)
		assert.Equal(t, atStart, p.Dependencies.AtStart, image)
		pod := typed[appsv1.Deployment](t, resources.Deployment(p, testConfig())).Spec.Template.Spec
		assert.Equal(t, !atStart, container(pod, resources.ContainerInstallDeps) != nil, image)
	}
}
