package resources_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/gitsource"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/test/fntest"
)

// withEverything is a Git Function with credentials and dependencies: a
// pod with every init container and volume kfn makes.
func withEverything(mods ...fntest.Modifier) *v1alpha2.Function {
	return fntest.Function("f", "ns", append([]fntest.Modifier{
		fntest.Git("https://git.test/r.git", "fn", "main", &v1alpha2.RepositoryAuth{Type: v1alpha2.RepositoryAuthBasic, SecretName: "creds"}),
		fntest.Resolved("c0ffee"),
	}, mods...)...)
}

// TestNoServiceAccountTokenByDefault checks that a Function's pod mounts
// no ServiceAccount token anywhere unless the Function asks for one.
func TestNoServiceAccountTokenByDefault(t *testing.T) {
	for name, fn := range map[string]*v1alpha2.Function{
		"inline":               fntest.Function("f", "ns"),
		"inline with deps":     fntest.Function("f", "ns", fntest.Source(fntest.HelloJS, fntest.PackageJSON)),
		"git with credentials": withEverything(),
		"annotation not true":  withEverything(fntest.Annotate(v1alpha2.AnnotationServiceAccountToken, "yes")),
	} {
		t.Run(name, func(t *testing.T) {
			pod := deployment(t, fn).Spec.Template.Spec
			require.NotNil(t, pod.AutomountServiceAccountToken)
			assert.False(t, *pod.AutomountServiceAccountToken, "the pod automounts no token")
			for _, v := range pod.Volumes {
				if v.Projected == nil {
					continue
				}
				for _, src := range v.Projected.Sources {
					if src.ServiceAccountToken != nil {
						assert.Equal(t, resources.IdentityAudience, src.ServiceAccountToken.Audience,
							"volume %s: no token the API server takes, only kfn's identity", v.Name)
					}
				}
			}
			for _, c := range append(pod.InitContainers, pod.Containers...) {
				assert.Nil(t, mount(&c, resources.ServiceAccountDir), "container %s", c.Name)
			}
		})
	}
}

// TestIdentityTokenOnlyInTheFunctionContainer checks the token every
// function container gets for kfn's audience (which the API server
// refuses): mounted read-only where the host's KFN_IDENTITY_TOKEN_FILE
// points, in the function container only, renewed by the kubelet.
func TestIdentityTokenOnlyInTheFunctionContainer(t *testing.T) {
	pod := deployment(t, withEverything()).Spec.Template.Spec
	fnc := container(pod, resources.ContainerFunction)
	m := mount(fnc, runtimes.PodIdentityDir)
	require.NotNil(t, m, "the function container has its identity")
	assert.True(t, m.ReadOnly)
	v := volume(pod, m.Name)
	require.NotNil(t, v.Projected)
	require.Len(t, v.Projected.Sources, 1, "a token and nothing else")
	token := v.Projected.Sources[0].ServiceAccountToken
	require.NotNil(t, token)
	assert.Equal(t, resources.IdentityAudience, token.Audience)
	assert.Equal(t, "token", token.Path)
	assert.Equal(t, resources.ServiceAccountTokenExpiration, *token.ExpirationSeconds)
	var file string
	for _, e := range fnc.Env {
		if e.Name == runtimes.EnvIdentityTokenFile {
			file = e.Value
		}
	}
	assert.Equal(t, runtimes.PodIdentityDir+"/token", file, "the host reads the mounted token")
	for _, c := range pod.InitContainers {
		assert.Nil(t, mount(&c, runtimes.PodIdentityDir), "container %s", c.Name)
	}
}

// TestServiceAccountTokenOnlyInTheFunctionContainer checks a Function that
// asks for a token: the function container gets one where Kubernetes puts
// it (token, CA, namespace), the fetch and install containers none, and the
// pod still automounts nothing.
func TestServiceAccountTokenOnlyInTheFunctionContainer(t *testing.T) {
	fn := withEverything(fntest.Annotate(v1alpha2.AnnotationServiceAccountToken, "true"))
	pod := deployment(t, fn).Spec.Template.Spec
	assert.False(t, *pod.AutomountServiceAccountToken)
	require.Len(t, pod.InitContainers, 2, "fetch and install")

	fnc := container(pod, resources.ContainerFunction)
	m := mount(fnc, resources.ServiceAccountDir)
	require.NotNil(t, m, "the function container has the token")
	assert.True(t, m.ReadOnly)
	v := volume(pod, m.Name)
	require.NotNil(t, v.Projected)
	var token *corev1.ServiceAccountTokenProjection
	var ca *corev1.ConfigMapProjection
	var ns *corev1.DownwardAPIProjection
	for _, s := range v.Projected.Sources {
		switch {
		case s.ServiceAccountToken != nil:
			token = s.ServiceAccountToken
		case s.ConfigMap != nil:
			ca = s.ConfigMap
		case s.DownwardAPI != nil:
			ns = s.DownwardAPI
		}
	}
	require.NotNil(t, token)
	assert.Equal(t, "token", token.Path)
	assert.Empty(t, token.Audience, "the API server's audience, as an automounted token")
	assert.Equal(t, resources.ServiceAccountTokenExpiration, *token.ExpirationSeconds)
	require.NotNil(t, ca)
	assert.Equal(t, "kube-root-ca.crt", ca.Name)
	assert.Equal(t, "ca.crt", ca.Items[0].Path)
	require.NotNil(t, ns)
	assert.Equal(t, "namespace", ns.Items[0].Path)
	assert.Equal(t, "metadata.namespace", ns.Items[0].FieldRef.FieldPath)

	for _, c := range pod.InitContainers {
		for _, vm := range c.VolumeMounts {
			assert.NotEqual(t, m.Name, vm.Name, "init container %s mounts no token", c.Name)
		}
		assert.Nil(t, mount(&c, resources.ServiceAccountDir), "init container %s", c.Name)
	}
}

// TestEmptyDirSizeLimits checks that every emptyDir of a Function pod is
// bounded by the configured limit.
func TestEmptyDirSizeLimits(t *testing.T) {
	cfg := testConfig()
	cfg.Volumes = resources.VolumeLimits{
		FunctionDir:  resource.MustParse("10Mi"),
		Dependencies: resource.MustParse("20Mi"),
		Tmp:          resource.MustParse("30Mi"),
	}
	for name, fn := range map[string]*v1alpha2.Function{
		"inline":           fntest.Function("f", "ns"),
		"inline with deps": fntest.Function("f", "ns", fntest.Source(fntest.HelloJS, fntest.PackageJSON)),
		"git":              withEverything(),
	} {
		t.Run(name, func(t *testing.T) {
			p := planFor(t, fn)
			pod := typed[corev1.PodTemplateSpec](t, resources.Deployment(p, cfg).Spec.Template).Spec
			fnc := container(pod, resources.ContainerFunction)
			want := map[string]string{p.Host.FunctionDir: "10Mi", "/tmp": "30Mi"}
			if p.Dependencies.Install() {
				want[runtimes.PodDepsDir] = "20Mi"
			}
			emptyDirs := 0
			for _, v := range pod.Volumes {
				if v.EmptyDir == nil {
					continue
				}
				emptyDirs++
				require.NotNil(t, v.EmptyDir.SizeLimit, "emptyDir %s has a size limit", v.Name)
			}
			assert.Equal(t, len(want), emptyDirs)
			for path, limit := range want {
				m := mount(fnc, path)
				require.NotNil(t, m, path)
				v := volume(pod, m.Name)
				require.NotNil(t, v.EmptyDir, path)
				assert.Equal(t, limit, v.EmptyDir.SizeLimit.String(), path)
			}
		})
	}
	// The defaults bound them too.
	pod := deployment(t, withEverything()).Spec.Template.Spec
	for _, v := range pod.Volumes {
		if v.EmptyDir != nil {
			require.NotNil(t, v.EmptyDir.SizeLimit, v.Name)
		}
	}
}

// TestGitKnownHostsForTheFetch checks that the fetch-source container of a
// Git Function with SSH key credentials finds the installation's known
// hosts beside the Secret's files, from the pod's annotation (which a
// user's spec.annotations cannot set), and that other Functions carry no
// such annotation.
func TestGitKnownHostsForTheFetch(t *testing.T) {
	cfg := testConfig()
	cfg.GitKnownHosts = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
	build := func(fn *v1alpha2.Function) corev1.PodTemplateSpec {
		return *typed[corev1.PodTemplateSpec](t, resources.Deployment(planFor(t, fn), cfg).Spec.Template)
	}
	forged := fntest.Annotations(map[string]string{resources.AnnotationGitKnownHosts: "evil.example ssh-ed25519 AAAA"})
	key := build(fntest.Function("f", "ns", forged,
		fntest.Git("ssh://git@github.com/org/repo.git", "fn", "main", &v1alpha2.RepositoryAuth{Type: v1alpha2.RepositoryAuthSSHKey, SecretName: "deploy-key"}),
		fntest.Resolved("c0ffee")))
	assert.Equal(t, cfg.GitKnownHosts, key.Annotations[resources.AnnotationGitKnownHosts], "the installation's, not the user's")
	fetch := container(key.Spec, resources.ContainerFetchSource)
	m := mount(fetch, resources.GitAuthDir)
	require.NotNil(t, m)
	v := volume(key.Spec, m.Name)
	require.NotNil(t, v.Projected)
	require.Len(t, v.Projected.Sources, 2)
	assert.Equal(t, "deploy-key", v.Projected.Sources[0].Secret.Name)
	item := v.Projected.Sources[1].DownwardAPI.Items[0]
	assert.Equal(t, gitsource.KeyPlatformKnownHosts, item.Path)
	assert.Equal(t, "metadata.annotations['kfn.dev/git-known-hosts']", item.FieldRef.FieldPath)
	assert.Nil(t, mount(container(key.Spec, resources.ContainerFunction), resources.GitAuthDir))

	for name, fn := range map[string]*v1alpha2.Function{
		"basic credentials": withEverything(forged),
		"inline":            fntest.Function("f", "ns", forged),
	} {
		pod := build(fn)
		assert.NotContains(t, pod.Annotations, resources.AnnotationGitKnownHosts, name)
	}
}
