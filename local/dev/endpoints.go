package dev

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/local/runner"
)

// localEndpoints answers, from the runner's process pools, the questions a
// cluster answers with EndpointSlices and Service DNS: is a function's
// Service ready, and where does http://<fn>.<ns>.svc.cluster.local go.
// It implements dispatcher.Endpoints, dispatcher.Resolver and
// gateway.Backends.
type localEndpoints struct {
	runner *runner.Runner

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	next    atomic.Uint64 // round robin
}

func newLocalEndpoints() *localEndpoints {
	return &localEndpoints{changed: make(chan struct{})}
}

// notify is the runner's OnChange: wake everyone who waits for readiness.
func (e *localEndpoints) notify() {
	e.mu.Lock()
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

// Known reports whether the project defines the function.
func (e *localEndpoints) Known(namespace, name string) bool {
	return e.runner != nil && e.runner.Get(namespace, name) != nil
}

// Ready reports whether the function behind the Service has a ready process.
func (e *localEndpoints) Ready(namespace, service string) (bool, <-chan struct{}) {
	e.mu.Lock()
	ch := e.changed
	e.mu.Unlock()
	return len(e.addrs(namespace, service)) > 0, ch
}

// Resolve maps a sink to one of its function's processes, keeping the
// sink's path and query.
func (e *localEndpoints) Resolve(sink eventingv1alpha2.Sink) (string, error) {
	addr, err := e.Pick(sink.Namespace, sink.Service)
	if err != nil {
		return "", err
	}
	u := *sink.URL
	u.Scheme = "http"
	u.Host = addr
	return u.String(), nil
}

// errNoEndpoint is returned when a function has no ready process.
var errNoEndpoint = errors.New("no ready process")

// Pick returns host:port of a ready process of namespace/name, round robin.
func (e *localEndpoints) Pick(namespace, name string) (string, error) {
	addrs := e.addrs(namespace, name)
	if len(addrs) == 0 {
		return "", fmt.Errorf("function %s/%s: %w", namespace, name, errNoEndpoint)
	}
	return addrs[int(e.next.Add(1)%uint64(len(addrs)))], nil
}

func (e *localEndpoints) addrs(namespace, name string) []string {
	if e.runner == nil {
		return nil
	}
	f := e.runner.Get(namespace, name)
	if f == nil {
		return nil
	}
	return f.Pool.Endpoints()
}
