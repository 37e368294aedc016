package dispatcher

import (
	"fmt"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// Endpoints tells whether a sink Service can take requests now. In a
// cluster it watches EndpointSlices (package endpoints); in local mode it
// is the process supervisor.
type Endpoints interface {
	// Ready reports whether the Service namespace/name has at least one
	// ready endpoint, and returns a channel that is closed when that may
	// have changed (the caller then asks again). The channel is never nil.
	Ready(namespace, service string) (ready bool, changed <-chan struct{})
}

// AlwaysReady is an Endpoints for which every Service is always ready.
type AlwaysReady struct{}

// never is a channel that is never closed.
var never = make(chan struct{})

// Ready reports true and a channel that never closes.
func (AlwaysReady) Ready(string, string) (bool, <-chan struct{}) { return true, never }

var _ Endpoints = AlwaysReady{}

// Resolver maps a Subscription's sink to the URL the dispatcher POSTs to.
// In a cluster the sink URL is used as written (cluster DNS resolves it);
// local mode maps http://<fn>.<ns>.svc.cluster.local to a local process.
type Resolver interface {
	// Resolve returns the absolute URL to deliver to. An error is a failed
	// delivery attempt, retried like a network error.
	Resolve(sink v1alpha2.Sink) (string, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(sink v1alpha2.Sink) (string, error)

// Resolve calls f.
func (f ResolverFunc) Resolve(sink v1alpha2.Sink) (string, error) { return f(sink) }

// DirectResolver delivers to the sink URL as written.
var DirectResolver Resolver = ResolverFunc(func(sink v1alpha2.Sink) (string, error) {
	if sink.URL == nil {
		return "", fmt.Errorf("sink %s/%s has no URL", sink.Namespace, sink.Service)
	}
	return sink.URL.String(), nil
})
