package v1alpha2

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxSourceBytes is the most source and dependencies a Function may hold
// together: they are stored in one ConfigMap, whose data is limited to 1 MiB.
const MaxSourceBytes = 1024*1024 - 4096

// Kyma's smallest Function resources, for requests and limits alike.
var (
	// MinRequestCPU is the least CPU a Function may request or be limited to.
	MinRequestCPU = resource.MustParse("10m")
	// MinRequestMemory is the least memory a Function may request or be
	// limited to.
	MinRequestMemory = resource.MustParse("16Mi")
)

// ReservedEnvPrefix starts the names of the variables kfn's runtime hosts
// read their own configuration from; a Function may not set them.
const ReservedEnvPrefix = "KFN_"

var (
	// kymaSSHURL is Kyma's test for an SSH Git URL, unanchored as Kyma's:
	// a URL it matches is not parsed further.
	kymaSSHURL = regexp.MustCompile(`((git|ssh)|(git@[\w\.]+))(:(//)?)([\w\.@\:/\-~]+)(/)?`)
	// gitURL and gitSCPURL are the forms kfn's controller fetches from.
	gitURL    = regexp.MustCompile(`^(https?|git|ssh)://[^\s/?#]+(/\S*)?$`)
	gitSCPURL = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\S+$`)
)

// Validate returns what keeps the Function from being configured, one
// message per problem, or nothing when it can run. These are the checks
// Kyma makes in its controller rather than at admission, in Kyma's order
// and words (environment names, Node.js dependencies, secret mounts,
// labels, annotations, the Git URL, resources), followed by kfn's own
// (names starting with KFN_, mount paths, the size of the source, the
// scaling range). The API server has already applied the CRD's rules. The
// controller reports the problems as ConfigurationReady False with reason
// InvalidFunctionSpec and the message InvalidSpecMessage makes of them;
// kfn dev shows the same.
func (f *Function) Validate() []string {
	var out []string
	for _, check := range []func() []string{
		f.validateEnv, f.validateInlineDependencies, f.validateSecretMounts, f.validateLabels,
		f.validateAnnotations, f.validateGitURL, f.validateResources, f.validateSourceSize, f.validateScaleConfig,
	} {
		out = append(out, check()...)
	}
	return out
}

// InvalidSpecMessage joins the problems Validate found into the message of
// ConfigurationReady False InvalidFunctionSpec, as Kyma joins them.
func InvalidSpecMessage(problems []string) string {
	return strings.Join(problems, ". ")
}

// DuplicateEnv returns the names spec.env defines more than once, in the
// order they first repeat. Kyma accepts them and so does kfn: the last
// definition wins, as in Kubernetes.
func (f *Function) DuplicateEnv() []string {
	seen := map[string]int{}
	var out []string
	for _, e := range f.Spec.Env {
		seen[e.Name]++
		if seen[e.Name] == 2 {
			out = append(out, e.Name)
		}
	}
	return out
}

// validateEnv reports the first invalid name as Kyma does, then every
// name kfn reserves.
func (f *Function) validateEnv() []string {
	var out []string
	for _, e := range f.Spec.Env {
		if errs := utilvalidation.IsEnvVarName(e.Name); len(errs) > 0 {
			for _, msg := range errs {
				out = append(out, fmt.Sprintf("spec.env: %s. Err: %s", e.Name, msg))
			}
			break
		}
	}
	for _, e := range f.Spec.Env {
		if strings.HasPrefix(e.Name, ReservedEnvPrefix) {
			out = append(out, fmt.Sprintf("spec.env: %s: names starting with %s are reserved for kfn's runtime hosts", e.Name, ReservedEnvPrefix))
		}
	}
	return out
}

func (f *Function) validateInlineDependencies() []string {
	in := f.Spec.Source.Inline
	if in == nil || !f.Spec.Runtime.IsNodeJS() {
		return nil
	}
	if deps := strings.TrimSpace(in.Dependencies); deps != "" && (deps[0] != '{' || deps[len(deps)-1] != '}') {
		return []string{"invalid source.inline.dependencies value: deps should start with '{' and end with '}'"}
	}
	return nil
}

// validateSecretMounts makes Kyma's checks (names, uniqueness) into one
// message, as Kyma, then kfn's checks of the mount paths, which Kubernetes
// would otherwise refuse when the Deployment is written.
func (f *Function) validateSecretMounts() []string {
	var out, kyma []string
	names := map[string]bool{}
	paths := map[string]bool{}
	for i, m := range f.Spec.SecretMounts {
		kyma = append(kyma, utilvalidation.IsDNS1123Subdomain(m.SecretName)...)
		names[m.SecretName] = true
		p := fmt.Sprintf("spec.secretMounts[%d].mountPath: %s", i, m.MountPath)
		switch {
		case !strings.HasPrefix(m.MountPath, "/"):
			out = append(out, p+": must be an absolute path")
		case strings.Contains(m.MountPath, ":"):
			out = append(out, p+": must not contain ':'")
		case containsDotDot(m.MountPath):
			out = append(out, p+": must not contain '..'")
		case paths[path.Clean(m.MountPath)]:
			out = append(out, p+": mount paths must be unique")
		}
		paths[path.Clean(m.MountPath)] = true
	}
	if len(names) != len(f.Spec.SecretMounts) {
		kyma = append(kyma, "secretNames should be unique")
	}
	if len(kyma) > 0 {
		out = append([]string{fmt.Sprintf("invalid spec.secretMounts: %s", kyma)}, out...)
	}
	return out
}

func containsDotDot(p string) bool {
	for _, s := range strings.Split(p, "/") {
		if s == ".." {
			return true
		}
	}
	return false
}

func (f *Function) validateLabels() []string {
	return messages(metav1validation.ValidateLabels(f.Spec.Labels, field.NewPath("spec.labels")))
}

func (f *Function) validateAnnotations() []string {
	return messages(apivalidation.ValidateAnnotations(f.Spec.Annotations, field.NewPath("spec.annotations")))
}

func messages(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// validateGitURL refuses, in Kyma's words, what Kyma refuses (not an SSH
// URL by Kyma's test and not a URL), then what kfn's controller does not
// fetch from: any form other than http(s)://, git://, ssh:// and
// user@host:path (file:// would read the controller's own disk).
func (f *Function) validateGitURL() []string {
	g := f.Spec.Source.GitRepository
	if g == nil {
		return nil
	}
	if !kymaSSHURL.MatchString(g.URL) {
		if _, err := url.ParseRequestURI(g.URL); err != nil {
			return []string{fmt.Sprintf("source.gitRepository.URL: %v", err)}
		}
	}
	if !gitURL.MatchString(g.URL) && !gitSCPURL.MatchString(g.URL) {
		return []string{fmt.Sprintf("source.gitRepository.URL: %s: must be an http(s)://, git:// or ssh:// URL, or the SSH form user@host:path", g.URL)}
	}
	return nil
}

// validateResources makes Kyma's checks of explicit resources, in its
// words: limits, then requests, at least MinRequestCPU and
// MinRequestMemory, and requests no larger than limits. Unlike Kyma, a
// quantity that is not given is not checked (Kyma reads it as 0).
func (f *Function) validateResources() []string {
	rc := f.Spec.ResourceConfiguration
	if rc == nil || rc.Function == nil || rc.Function.Resources == nil {
		return nil
	}
	r := rc.Function.Resources
	var out []string
	atLeast := func(list corev1.ResourceList, kind string) {
		for _, c := range []struct {
			name corev1.ResourceName
			min  resource.Quantity
		}{{corev1.ResourceCPU, MinRequestCPU}, {corev1.ResourceMemory, MinRequestMemory}} {
			if q, ok := list[c.name]; ok && q.Cmp(c.min) < 0 {
				out = append(out, fmt.Sprintf("Function %s %s(%s) should be higher than minimal value (%s)", kind, c.name, q.String(), c.min.String()))
			}
		}
	}
	atLeast(r.Limits, "limits")
	atLeast(r.Requests, "request")
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := r.Requests[name]
		lim, okLim := r.Limits[name]
		if okReq && okLim && req.Cmp(lim) > 0 {
			out = append(out, fmt.Sprintf("Function limits %s(%s) should be higher than requests %s(%s)", name, lim.String(), name, req.String()))
		}
	}
	return out
}

func (f *Function) validateSourceSize() []string {
	in := f.Spec.Source.Inline
	if in == nil {
		return nil
	}
	if n := len(in.Source) + len(in.Dependencies); n > MaxSourceBytes {
		return []string{field.TooLong(field.NewPath("spec", "source", "inline"), fmt.Sprintf("%d bytes of source and dependencies", n), MaxSourceBytes).Error()}
	}
	return nil
}

func (f *Function) validateScaleConfig() []string {
	sc := f.Spec.ScaleConfig
	if sc == nil || sc.MinReplicas == nil || sc.MaxReplicas == nil || *sc.MinReplicas <= *sc.MaxReplicas {
		return nil
	}
	return []string{fmt.Sprintf("spec.scaleConfig: minReplicas (%d) must not be greater than maxReplicas (%d)", *sc.MinReplicas, *sc.MaxReplicas)}
}
