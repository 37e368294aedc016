package claim

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// DefaultPort is the port of the controller's claim listener.
const DefaultPort = 8083

// PathPrefix starts every claim's path.
const PathPrefix = "/claims/"

// WarmPath is POSTed by a caller to be checked as a claim's caller is
// (authenticated, and allowed to claim for every Function) without
// claiming anything: 204 when it would be allowed, 403 when not. The event
// bridge sends it every few seconds, so that the controller holds the
// review of its token and its permission when a Function's first event
// after a quiet time comes.
const WarmPath = "/warm"

// Path is the path of a claim for Function namespace/name.
func Path(namespace, name string) string {
	return PathPrefix + url.PathEscape(namespace) + "/" + url.PathEscape(name)
}

// dnsLabel is an RFC 1123 label, as Kubernetes names namespaces and
// Services.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// ErrInvalidPath is wrapped by ParsePath's errors.
var ErrInvalidPath = errors.New("invalid claim path")

// ParsePath returns the Function a claim's path names: two DNS labels
// after PathPrefix.
func ParsePath(path string) (namespace, name string, err error) {
	rest, ok := strings.CutPrefix(path, PathPrefix)
	if !ok {
		return "", "", fmt.Errorf("%w: %q does not start with %s", ErrInvalidPath, path, PathPrefix)
	}
	namespace, name, ok = strings.Cut(rest, "/")
	if !ok || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%w: want %s<namespace>/<function>, got %q", ErrInvalidPath, PathPrefix, path)
	}
	for _, s := range []string{namespace, name} {
		if !dnsLabel.MatchString(s) {
			return "", "", fmt.Errorf("%w: %q is not a DNS label (lower-case letters, digits and '-', at most 63)", ErrInvalidPath, s)
		}
	}
	return namespace, name, nil
}

// Answer is a granted claim: the pod given to the Function, whose host
// serves it now.
type Answer struct {
	// Pod is the pod's name, in the Function's namespace.
	Pod string `json:"pod"`
	// Address is host:port of the pod's host.
	Address string `json:"address"`
}

// Errors of Client.Claim for the controller's refusals.
var (
	// ErrNotPooled: the warm pool does not serve the Function (404).
	ErrNotPooled = errors.New("the warm pool does not serve the Function")
	// ErrServed: the Function has a ready pod of its own (409).
	ErrServed = errors.New("the Function has a ready pod of its own")
	// ErrNoStandby: no standby pod of the Function's pool has started (503).
	ErrNoStandby = errors.New("no standby pod for the Function")
	// ErrNoLeader: no address of the controller answered.
	ErrNoLeader = errors.New("no controller leader answered")
)

// StatusOf is the status the controller answers for err, one of the
// errors above (or anything else: 502, the host refused the Function).
func StatusOf(err error) int {
	switch {
	case errors.Is(err, ErrNotPooled):
		return http.StatusNotFound
	case errors.Is(err, ErrServed):
		return http.StatusConflict
	case errors.Is(err, ErrNoStandby):
		return http.StatusServiceUnavailable
	default:
		return http.StatusBadGateway
	}
}
