package resources

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/gitsource"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// Names of the containers and volumes of a Function pod.
const (
	// ContainerFunction runs the runtime host (Kyma's name).
	ContainerFunction = "function"
	// ContainerFetchSource fetches a Git Function's directory.
	ContainerFetchSource = "fetch-source"
	// ContainerInstallDeps installs the Function's dependencies.
	ContainerInstallDeps = "install-dependencies"

	volumeFunction = "function"
	volumeSource   = "source"
	volumeDeps     = "dependencies"
	volumeTmp      = "tmp"
	volumeRegistry = "registry-config"
	volumeGitAuth  = "git-auth"
	volumeToken    = "service-account-token"
	volumeIdentity = "kfn-identity"
	// volumeDepsWriter is the install container's writer token.
	volumeDepsWriter = "kfn-dependency-writer"
)

// Paths inside the init containers.
const (
	// RegistryConfigDir is where the registry config Secret's .npmrc and
	// pip.conf appear in the install container.
	RegistryConfigDir = "/etc/kfn/registry"
	// GitAuthDir is where the Git credentials Secret appears in the fetch
	// container.
	GitAuthDir = "/etc/kfn/git-auth"
	// ServiceAccountDir is where the function container of a Function that
	// asks for a ServiceAccount token finds it (token, ca.crt, namespace):
	// where Kubernetes mounts it and client libraries look for it.
	ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	// ServiceAccountTokenExpiration is the requested lifetime of that
	// token, which the kubelet renews before it expires: Kubernetes' own
	// for the tokens it mounts.
	ServiceAccountTokenExpiration int64 = 3607
	// IdentityAudience is the audience of every function container's
	// identity token (runtimes.PodIdentityDir): kfn's listeners accept it
	// (internal/auth.Audience), the API server does not.
	IdentityAudience = "kfn"
)

// functionVolumes returns the pod's volumes and the function container's
// mounts of them.
func functionVolumes(p plan.Plan, cfg Config, standby bool) ([]*corev1ac.VolumeApplyConfiguration, []*corev1ac.VolumeMountApplyConfiguration) {
	volumes := []*corev1ac.VolumeApplyConfiguration{
		emptyDir(volumeFunction, cfg.Volumes.FunctionDir),
	}
	mounts := []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName(volumeFunction).WithMountPath(p.Host.FunctionDir),
	}
	if p.Source.Git == nil && !standby {
		volumes = append(volumes, corev1ac.Volume().WithName(volumeSource).
			WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(p.Name).WithDefaultMode(0o444)))
		mounts = append(mounts, corev1ac.VolumeMount().WithName(volumeSource).WithMountPath(runtimes.PodSourceDir).WithReadOnly(true))
	}
	switch {
	case p.Dependencies.InstallContainer():
		volumes = append(volumes,
			emptyDir(volumeDeps, cfg.Volumes.Dependencies),
			corev1ac.Volume().WithName(volumeRegistry).WithSecret(corev1ac.SecretVolumeSource().
				WithSecretName(cfg.RegistrySecretName).WithOptional(true).WithDefaultMode(0o440)))
		mounts = append(mounts, corev1ac.VolumeMount().WithName(volumeDeps).WithMountPath(runtimes.PodDepsDir).WithReadOnly(true))
	case p.Dependencies.AtStart || standby:
		// Where the host unpacks the Function's dependencies from the
		// dependency cache: as it starts (AtStart), or when it is given
		// the Function (StandbyPod).
		volumes = append(volumes, emptyDir(volumeDeps, cfg.Volumes.Dependencies))
		mounts = append(mounts, corev1ac.VolumeMount().WithName(volumeDeps).WithMountPath(runtimes.PodDepsDir))
	}
	if g := p.Source.Git; g != nil && g.Auth != nil {
		volumes = append(volumes, gitAuthVolume(g))
	}
	volumes = append(volumes, emptyDir(volumeTmp, cfg.Volumes.Tmp), identityVolume())
	if cached(p) && p.Dependencies.InstallContainer() {
		volumes = append(volumes, dependencyWriterVolume(p))
	}
	mounts = append(mounts, corev1ac.VolumeMount().WithName(volumeTmp).WithMountPath("/tmp"),
		corev1ac.VolumeMount().WithName(volumeIdentity).WithMountPath(runtimes.PodIdentityDir).WithReadOnly(true))
	if p.ServiceAccountToken {
		volumes = append(volumes, serviceAccountVolume())
		mounts = append(mounts, corev1ac.VolumeMount().WithName(volumeToken).WithMountPath(ServiceAccountDir).WithReadOnly(true))
	}
	for i, m := range p.SecretMounts {
		name := "secret-mount-" + strconv.Itoa(i)
		volumes = append(volumes, corev1ac.Volume().WithName(name).WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(m.SecretName).WithDefaultMode(0o444)))
		mounts = append(mounts, corev1ac.VolumeMount().WithName(name).WithMountPath(m.MountPath).WithReadOnly(true))
	}
	return volumes, mounts
}

// emptyDir is a writable scratch volume bounded by limit (none when zero).
func emptyDir(name string, limit resource.Quantity) *corev1ac.VolumeApplyConfiguration {
	src := corev1ac.EmptyDirVolumeSource()
	if !limit.IsZero() {
		src.WithSizeLimit(limit.DeepCopy())
	}
	return corev1ac.Volume().WithName(name).WithEmptyDir(src)
}

// serviceAccountVolume is what Kubernetes mounts into every container of
// a pod that automounts its ServiceAccount token (a token the kubelet
// renews, the cluster's CA and the namespace), as a volume that only the
// function container mounts: the pod itself automounts nothing.
func serviceAccountVolume() *corev1ac.VolumeApplyConfiguration {
	return corev1ac.Volume().WithName(volumeToken).WithProjected(corev1ac.ProjectedVolumeSource().
		WithDefaultMode(0o444).
		WithSources(
			corev1ac.VolumeProjection().WithServiceAccountToken(corev1ac.ServiceAccountTokenProjection().
				WithPath("token").WithExpirationSeconds(ServiceAccountTokenExpiration)),
			corev1ac.VolumeProjection().WithConfigMap(corev1ac.ConfigMapProjection().
				WithName("kube-root-ca.crt").WithItems(corev1ac.KeyToPath().WithKey("ca.crt").WithPath("ca.crt"))),
			corev1ac.VolumeProjection().WithDownwardAPI(corev1ac.DownwardAPIProjection().
				WithItems(corev1ac.DownwardAPIVolumeFile().WithPath("namespace").
					WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").WithFieldPath("metadata.namespace")))),
		))
}

// identityVolume is the function container's identity: a token of the
// pod's ServiceAccount for kfn's audience only (the API server refuses it),
// which the host sends with the events it emits, so that the publisher
// knows the namespace that sent them. Every Function has it: it grants
// nothing beyond what RBAC grants the ServiceAccount in kfn's listeners.
func identityVolume() *corev1ac.VolumeApplyConfiguration {
	return corev1ac.Volume().WithName(volumeIdentity).WithProjected(corev1ac.ProjectedVolumeSource().
		WithDefaultMode(0o444).
		WithSources(corev1ac.VolumeProjection().WithServiceAccountToken(corev1ac.ServiceAccountTokenProjection().
			WithAudience(IdentityAudience).WithPath("token").WithExpirationSeconds(ServiceAccountTokenExpiration))))
}

// dependencyWriterVolume is the install container's writer token: a token
// of the pod's ServiceAccount for the audience that may store p's
// dependency set in the cache and nothing else
// (runtimes.DependencyWriterAudience). Only the install container mounts
// it: the function container, whose code runs the Function, cannot store
// dependencies for the namespace's other pods.
func dependencyWriterVolume(p plan.Plan) *corev1ac.VolumeApplyConfiguration {
	return corev1ac.Volume().WithName(volumeDepsWriter).WithProjected(corev1ac.ProjectedVolumeSource().
		WithDefaultMode(0o444).
		WithSources(corev1ac.VolumeProjection().WithServiceAccountToken(corev1ac.ServiceAccountTokenProjection().
			WithAudience(runtimes.DependencyWriterAudience(p.Runtime.Name, p.Dependencies.Hash)).
			WithPath("token").WithExpirationSeconds(ServiceAccountTokenExpiration))))
}

// gitAuthVolume is the credentials Secret's keys, and, for SSH key
// credentials, the installation's known hosts as the file
// gitsource.KeyPlatformKnownHosts beside them, from the pod's annotation
// AnnotationGitKnownHosts (a volume can only take a ConfigMap of the
// Function's own namespace).
func gitAuthVolume(g *plan.GitSource) *corev1ac.VolumeApplyConfiguration {
	v := corev1ac.Volume().WithName(volumeGitAuth)
	if g.Auth.Type != v1alpha2.RepositoryAuthSSHKey {
		return v.WithSecret(corev1ac.SecretVolumeSource().WithSecretName(g.Auth.SecretName).WithDefaultMode(0o440))
	}
	return v.WithProjected(corev1ac.ProjectedVolumeSource().WithDefaultMode(0o440).WithSources(
		corev1ac.VolumeProjection().WithSecret(corev1ac.SecretProjection().WithName(g.Auth.SecretName)),
		corev1ac.VolumeProjection().WithDownwardAPI(corev1ac.DownwardAPIProjection().
			WithItems(corev1ac.DownwardAPIVolumeFile().WithPath(gitsource.KeyPlatformKnownHosts).
				WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").
					WithFieldPath(fmt.Sprintf("metadata.annotations['%s']", AnnotationGitKnownHosts))))),
	))
}

// fetchContainer runs kfn's fetch-source command, which clones the
// repository, checks out the resolved commit and copies baseDir into the
// function volume.
func fetchContainer(p plan.Plan, cfg Config, sc *corev1ac.SecurityContextApplyConfiguration) *corev1ac.ContainerApplyConfiguration {
	g := p.Source.Git
	args := []string{
		"--url=" + g.URL,
		"--reference=" + g.Reference,
		"--commit=" + g.Commit,
		"--base-dir=" + g.BaseDir,
		"--dest=" + p.Host.FunctionDir,
	}
	mounts := []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName(volumeFunction).WithMountPath(p.Host.FunctionDir),
		corev1ac.VolumeMount().WithName(volumeTmp).WithMountPath("/tmp"),
	}
	if g.Auth != nil {
		args = append(args, "--auth-type="+string(g.Auth.Type), "--auth-dir="+GitAuthDir)
		mounts = append(mounts, corev1ac.VolumeMount().WithName(volumeGitAuth).WithMountPath(GitAuthDir).WithReadOnly(true))
	}
	return corev1ac.Container().
		WithName(ContainerFetchSource).
		WithImage(cfg.GitFetchImage).
		WithCommand(cfg.GitFetchCommand...).
		WithArgs(args...).
		WithEnv(corev1ac.EnvVar().WithName("HOME").WithValue("/tmp")).
		WithResources(requirements(p.Resources)).
		WithVolumeMounts(mounts...).
		WithSecurityContext(sc).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError)
}

// installContainer runs the runtime image's package manager, as
// runtimes/README.md describes, into the dependencies volume. It reads the
// dependency file from the source ConfigMap, or from the fetched directory
// of a Git Function, which may have none: then it does nothing. With a
// dependency cache (the plan's Host.DependencyCache, set only for
// dependencies with a hash) it first asks the cache for them with the
// pod's identity token, and installs only when the cache has none, then
// stores what it installed there (installScript); what it unpacks from the
// cache is bounded by the dependencies volume's size limit.
func installContainer(p plan.Plan, cfg Config, sc *corev1ac.SecurityContextApplyConfiguration) *corev1ac.ContainerApplyConfiguration {
	srcDir, srcVolume := runtimes.PodSourceDir, volumeSource
	if p.Source.Git != nil {
		srcDir, srcVolume = p.Host.FunctionDir, volumeFunction
	}
	env := []*corev1ac.EnvVarApplyConfiguration{
		corev1ac.EnvVar().WithName("HOME").WithValue("/tmp"),
		corev1ac.EnvVar().WithName("npm_config_cache").WithValue("/tmp/.npm"),
		corev1ac.EnvVar().WithName("PIP_CACHE_DIR").WithValue("/tmp/.pip-cache"),
	}
	mounts := []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName(srcVolume).WithMountPath(srcDir).WithReadOnly(true),
		corev1ac.VolumeMount().WithName(volumeDeps).WithMountPath(runtimes.PodDepsDir),
		corev1ac.VolumeMount().WithName(volumeTmp).WithMountPath("/tmp"),
		corev1ac.VolumeMount().WithName(volumeRegistry).WithMountPath(RegistryConfigDir).WithReadOnly(true),
	}
	if cached(p) {
		// The cache knows the pod's namespace from its identity token
		// (audience kfn only), and lets it store p's dependency set only
		// with the writer token: no Kubernetes API token is mounted.
		env = append(env,
			corev1ac.EnvVar().WithName(runtimes.EnvDependencyCache).WithValue(p.Host.DependencyCache),
			corev1ac.EnvVar().WithName(runtimes.EnvIdentityTokenFile).WithValue(p.Host.IdentityTokenFile),
			corev1ac.EnvVar().WithName(runtimes.EnvDependencyWriterTokenFile).WithValue(path.Join(runtimes.PodDependencyWriterDir, "token")))
		env = append(env, dependencyMaxBytes(cfg)...)
		mounts = append(mounts,
			corev1ac.VolumeMount().WithName(volumeIdentity).WithMountPath(runtimes.PodIdentityDir).WithReadOnly(true),
			corev1ac.VolumeMount().WithName(volumeDepsWriter).WithMountPath(runtimes.PodDependencyWriterDir).WithReadOnly(true))
	}
	return corev1ac.Container().
		WithName(ContainerInstallDeps).
		WithImage(p.Image).
		WithCommand("/bin/sh", "-c", installScript(p, srcDir)).
		WithEnv(env...).
		WithResources(requirements(p.Resources)).
		WithVolumeMounts(mounts...).
		WithSecurityContext(sc).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError)
}

// dependencyMaxBytes tells the cache client the dependencies volume's
// size (runtimes.EnvDependencyMaxBytes), so that what it unpacks fits the
// volume it unpacks into; nothing when the volume is unbounded.
func dependencyMaxBytes(cfg Config) []*corev1ac.EnvVarApplyConfiguration {
	limit := cfg.Volumes.Dependencies
	if limit.IsZero() {
		return nil
	}
	return []*corev1ac.EnvVarApplyConfiguration{
		corev1ac.EnvVar().WithName(runtimes.EnvDependencyMaxBytes).WithValue(strconv.FormatInt(limit.Value(), 10)),
	}
}

// cached reports whether p's pods use the dependency cache: a cache is
// configured and p's dependencies have a hash (inline dependencies).
func cached(p plan.Plan) bool {
	return p.Host.DependencyCache != "" && p.Dependencies.Hash != ""
}

// installScript is the install container's shell script. Without the
// cache: copy the dependency file into the dependencies volume and exec
// npm or pip there. With it: the runtime image's cache client
// (runtimes.Runtime.DependencyCacheCommand) fetches and unpacks the
// dependencies and the script exits 0 without running npm or pip; when the
// cache has none (or cannot be reached) the client leaves the directory
// empty, the script installs as without the cache and then has the client
// store the result, which never fails the pod. An image without the client
// (an older runtimeImageOverride) installs as without the cache.
func installScript(p plan.Plan, srcDir string) string {
	rt := p.Runtime
	src := path.Join(srcDir, rt.DepsFile())
	dst := path.Join(runtimes.PodDepsDir, rt.DepsFile())
	client := rt.DependencyCacheCommand(runtimes.ImageHostDir)
	args := fmt.Sprintf("--runtime=%s --hash=%s --dir=%s", rt.Name, p.Dependencies.Hash, runtimes.PodDepsDir)
	run := "exec "
	script := []string{"set -eu"}
	if p.Dependencies.FromSource {
		script = append(script, fmt.Sprintf("if [ ! -f %s ]; then echo 'no %s: nothing to install'; exit 0; fi", src, rt.DepsFile()))
	}
	// mark leaves the termination message by which the controller learns
	// that the cache holds the set (runtimes.DependencyCachedMessage); a
	// termination log that cannot be written fails nothing.
	mark := fmt.Sprintf("{ echo '%s%s' > %s; } 2>/dev/null || true", runtimes.DependencyCachedMessage,
		runtimes.DependencySet(rt.Name, p.Dependencies.Hash), corev1.TerminationMessagePathDefault)
	if cached(p) {
		run = ""
		script = append(script, fmt.Sprintf("if [ -f %s ] && %s fetch %s; then %s; exit 0; fi", client[1], strings.Join(client, " "), args, mark))
	}
	// -f: a restarted container finds the copy its failed run left, read-only
	// as the ConfigMap's file.
	script = append(script, fmt.Sprintf("cp -f %s %s", src, dst), "cd "+runtimes.PodDepsDir)
	if rt.Language == runtimes.Python {
		conf := path.Join(RegistryConfigDir, "pip.conf")
		script = append(script,
			fmt.Sprintf("if [ -f %s ]; then export PIP_CONFIG_FILE=%s; fi", conf, conf),
			fmt.Sprintf("%spython3 -m pip install --no-input --disable-pip-version-check --no-warn-script-location --target %s -r %s",
				run, rt.DepsLibDir(runtimes.PodDepsDir), dst))
	} else {
		conf := path.Join(RegistryConfigDir, ".npmrc")
		script = append(script,
			fmt.Sprintf("if [ -f %s ]; then export npm_config_userconfig=%s; fi", conf, conf),
			run+"npm install --include=dev --no-audit --no-fund --no-update-notifier")
	}
	if cached(p) {
		script = append(script, fmt.Sprintf("if [ -f %s ] && %s store %s; then %s; fi", client[1], strings.Join(client, " "), args, mark))
	}
	return strings.Join(script, "\n")
}
