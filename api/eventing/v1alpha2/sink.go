package v1alpha2

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ClusterLocalSuffix ends the host of every valid sink.
const ClusterLocalSuffix = ".svc.cluster.local"

// ErrInvalidSink is wrapped by every sink validation error.
var ErrInvalidSink = errors.New("invalid sink")

// Sink is a parsed spec.sink: a Service in the cluster.
//
// +kubebuilder:object:generate=false
type Sink struct {
	// URL is the sink as written.
	URL *url.URL
	// Service is the Service's name.
	Service string
	// Namespace is the Service's namespace.
	Namespace string
}

// ParseSink checks that sink is an http(s) URL of a cluster-local Service,
// http(s)://<service>.<namespace>.svc.cluster.local[:port][/path], and
// returns its parts. The error wraps ErrInvalidSink and says what to fix.
func ParseSink(sink string) (Sink, error) {
	if sink == "" {
		return Sink{}, fmt.Errorf("%w: must not be empty", ErrInvalidSink)
	}
	u, err := url.Parse(sink)
	if err != nil {
		return Sink{}, fmt.Errorf("%w %q: %w", ErrInvalidSink, sink, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return Sink{}, fmt.Errorf("%w %q: must have URL scheme 'http' or 'https'", ErrInvalidSink, sink)
	}
	host := u.Hostname()
	if !strings.HasSuffix(host, ClusterLocalSuffix) {
		return Sink{}, fmt.Errorf("%w %q: must be a cluster-local Service URL ending in %s", ErrInvalidSink, sink, ClusterLocalSuffix)
	}
	labels := strings.Split(host, ".")
	if len(labels) != 5 {
		return Sink{}, fmt.Errorf("%w %q: the host must have 5 labels, <service>.<namespace>.svc.cluster.local, not %q", ErrInvalidSink, sink, host)
	}
	for _, name := range labels[:2] {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return Sink{}, fmt.Errorf("%w %q: %q is not a valid name: %s", ErrInvalidSink, sink, name, strings.Join(errs, "; "))
		}
	}
	return Sink{URL: u, Service: labels[0], Namespace: labels[1]}, nil
}

// ValidateSink parses the Subscription's sink and checks that its Service is
// in the Subscription's namespace, which the CRD cannot check. The error
// wraps ErrInvalidSink and says what to fix.
func (s *Subscription) ValidateSink() (Sink, error) {
	sink, err := ParseSink(s.Spec.Sink)
	if err != nil {
		return Sink{}, err
	}
	if sink.Namespace != s.Namespace {
		return Sink{}, fmt.Errorf("%w %q: the Service must be in the Subscription's namespace %q, not %q",
			ErrInvalidSink, s.Spec.Sink, s.Namespace, sink.Namespace)
	}
	return sink, nil
}
