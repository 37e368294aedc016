package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kfn-dev/kfn/runtimes"
)

// userTimeout returns the handler timeout a static FUNC_TIMEOUT of the
// user's sets (it then also sizes the grace period), or 0. Of two
// definitions, the last counts, as in the container.
func userTimeout(env []corev1.EnvVar) time.Duration {
	for _, e := range slices.Backward(env) {
		if e.Name != runtimes.EnvTimeout {
			continue
		}
		if e.ValueFrom != nil {
			return 0
		}
		s, err := strconv.ParseFloat(strings.TrimSpace(e.Value), 64)
		if err != nil || s <= 0 || s > 365*24*3600 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	return 0
}

// EnvFor returns the container environment for host configuration h: the
// platform variables of Runtime.Env(h), each replaced in place by the
// user's variable of the same name, then the user's other variables in
// spec order; of a name the user defines twice, the last definition. Local mode passes its own directories and port. The error
// wraps ErrInvalidFunction and runtimes.ErrInvalidConfig.
func (p Plan) EnvFor(h runtimes.Config) ([]corev1.EnvVar, error) {
	platform, err := p.Runtime.Env(h)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidFunction, err)
	}
	user := make(map[string]int, len(p.UserEnv))
	for i, e := range p.UserEnv {
		user[e.Name] = i
	}
	out := make([]corev1.EnvVar, 0, len(platform)+len(p.UserEnv))
	used := make(map[string]bool, len(p.UserEnv))
	for _, e := range platform {
		if i, ok := user[e.Name]; ok {
			out = append(out, *p.UserEnv[i].DeepCopy())
			used[e.Name] = true
			continue
		}
		out = append(out, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	for i, e := range p.UserEnv {
		// A name defined twice (Kyma accepts it) is used as Kubernetes
		// does: the last definition wins; it keeps its place.
		if !used[e.Name] && user[e.Name] == i {
			out = append(out, *e.DeepCopy())
		}
	}
	return out, nil
}
