package pool

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// ErrNotPoolable is wrapped by Eligible's errors: the Function wakes on
// the Deployment path.
var ErrNotPoolable = errors.New("the warm pool cannot serve this Function")

// startEnv are the container variables a standby host starts with: those
// of the runtime and the pod, the same for every Function of a shape. The
// others go to the host with the Function (Specialization).
var startEnv = []string{
	runtimes.EnvPort, runtimes.EnvHandlerAPI, runtimes.EnvRuntime, runtimes.EnvFunctionDir,
	runtimes.EnvLibsDir, runtimes.EnvNodePath, runtimes.EnvPythonPath, runtimes.EnvIdentityTokenFile,
}

// startOnly are variables a running host cannot take: a Function's
// environment that sets one wakes on the Deployment path.
var startOnly = []string{"NODE_OPTIONS", "PYTHONPATH", "PYTHONHOME"}

// Eligible returns nil when the warm pool can serve p exactly, else an
// error wrapping ErrNotPoolable that says why not. A Function that does
// not scale to zero is eligible too: the pool serves its scale-ups
// (bursts), never a claim.
func Eligible(p plan.Plan) error {
	var why []string
	if p.Source.Git != nil {
		why = append(why, "its source is fetched from Git")
	}
	if p.Dependencies.Needed && p.Host.DependencyCache == "" {
		why = append(why, "it has dependencies to install and no dependency cache is configured")
	}
	if len(p.SecretMounts) > 0 {
		why = append(why, "it mounts Secrets")
	}
	if p.ServiceAccountToken {
		why = append(why, "it asks for a ServiceAccount token")
	}
	// The user's own variables: the platform's (a PYTHONPATH to the
	// Function's dependencies, say) are the host's to take.
	for _, e := range p.UserEnv {
		switch {
		case e.ValueFrom != nil:
			why = append(why, fmt.Sprintf("its variable %s is taken from elsewhere", e.Name))
		case slices.Contains(startOnly, e.Name):
			why = append(why, fmt.Sprintf("its variable %s is read only when a host starts", e.Name))
		}
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNotPoolable, strings.Join(why, ", "))
}

// Specialization is what a standby host is given to become p's host: p's
// environment but the start variables, the source directory (the files
// are written into the host's function directory) and KFN_DEPENDENCY_HASH
// (a standby host fetches the set as it is given it), p's source files, and,
// for a Function with dependencies, their name in the dependency cache
// (the environment then has KFN_DEPENDENCY_CACHE and KFN_DEPS_DIR, where
// the host unpacks them: the standby pod's writable dependencies volume).
func Specialization(p plan.Plan) runtimes.Specialization {
	s := runtimes.Specialization{Env: map[string]string{}, Files: p.Source.Files}
	for _, e := range p.Env {
		if slices.Contains(startEnv, e.Name) || e.Name == runtimes.EnvSourceDir || e.Name == runtimes.EnvDependencyHash {
			continue
		}
		s.Env[e.Name] = e.Value
	}
	if p.Dependencies.Needed && p.Dependencies.Hash != "" {
		s.Dependencies = &runtimes.SpecializationDependencies{Runtime: p.Runtime.Name, Hash: p.Dependencies.Hash}
	}
	return s
}

// withoutDependencies is p as its standby pods are made: without its
// dependencies, whose library paths the host adds when it is given them,
// so that Functions with and without dependencies share standby pods.
func withoutDependencies(p plan.Plan) plan.Plan {
	if !p.Dependencies.Install() {
		return p
	}
	h := p.Host
	h.DepsDir, h.DependencyCache, h.DependencyHash = "", "", ""
	env, err := p.EnvFor(h)
	if err != nil {
		// EnvFor refuses only what For refused already.
		panic(fmt.Sprintf("environment of %s/%s without dependencies: %v", p.Namespace, p.Name, err))
	}
	p.Host, p.Env = h, env
	p.Dependencies = plan.Dependencies{File: p.Dependencies.File}
	return p
}

// podEnv is the environment of p's standby pods, without the token.
func podEnv(p plan.Plan) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, e := range withoutDependencies(p).Env {
		if slices.Contains(startEnv, e.Name) {
			env = append(env, corev1.EnvVar{Name: e.Name, Value: e.Value})
		}
	}
	return env
}

// Shape names the standby pods p needs: two Functions of a namespace with
// the same shape can be served by the same standby pod. It is a hash of
// the standby pod's spec.
func Shape(p plan.Plan, cfg resources.Config) string {
	pod := resources.StandbyPod(withoutDependencies(p), cfg, "", nil, podEnv(p))
	b, err := json.Marshal(pod.Spec)
	if err != nil {
		panic(fmt.Sprintf("marshal standby pod spec: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
