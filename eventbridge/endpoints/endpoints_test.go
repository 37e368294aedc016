package endpoints_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
)

func slice(name, service string, ready ...*bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service},
	}}
	for _, r := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: r}})
	}
	return s
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestReadiness(t *testing.T) {
	w, err := endpoints.New()
	require.NoError(t, err)
	ready, ch := w.Ready("default", "fn")
	assert.False(t, ready, "not ready before sync")
	w.MarkSynced()
	assert.True(t, closed(ch), "sync wakes waiters")

	ready, ch = w.Ready("default", "fn")
	assert.False(t, ready, "no slices")

	w.OnAdd(slice("fn-a", "fn", ptr.To(false)), true)
	ready, _ = w.Ready("default", "fn")
	assert.False(t, ready, "an endpoint that is not ready")
	assert.False(t, closed(ch), "no flip, no wake-up")

	w.OnUpdate(nil, slice("fn-a", "fn", ptr.To(false), nil))
	assert.True(t, closed(ch), "unset condition means ready: flip")
	ready, ch = w.Ready("default", "fn")
	assert.True(t, ready)

	w.OnAdd(slice("fn-b", "fn", ptr.To(true)), false)
	assert.False(t, closed(ch), "more endpoints, still ready: no wake-up")
	other, _ := w.Ready("default", "other")
	assert.False(t, other, "other Services are unaffected")
	elsewhere, _ := w.Ready("prod", "fn")
	assert.False(t, elsewhere, "namespaces are apart")

	w.OnDelete(slice("fn-a", "fn"))
	ready, _ = w.Ready("default", "fn")
	assert.True(t, ready, "fn-b is still ready")
	w.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "default/fn-b", Obj: slice("fn-b", "fn")})
	assert.True(t, closed(ch), "scaled to zero: flip")
	ready, _ = w.Ready("default", "fn")
	assert.False(t, ready)

	w.OnAdd(slice("orphan", ""), false) // no service label: ignored
	w.OnAdd("not a slice", false)
}

func TestFunction(t *testing.T) {
	w, err := endpoints.New()
	require.NoError(t, err)
	fnSlice := func(name, service string, ready ...*bool) *discoveryv1.EndpointSlice {
		s := slice(name, service, ready...)
		s.Labels[serverlessv1alpha2.LabelManagedBy] = serverlessv1alpha2.LabelManagedByValue
		s.Labels[serverlessv1alpha2.LabelFunctionName] = service
		return s
	}
	w.OnAdd(fnSlice("fn-a", "fn"), true) // at zero: one empty slice
	w.OnAdd(slice("db-a", "db", ptr.To(true)), true)
	w.MarkSynced()
	assert.True(t, closed(w.Synced()))
	assert.True(t, w.Function("default", "fn"), "a Function at zero is known")
	assert.False(t, w.Function("default", "db"), "a Service that is no Function is not")
	assert.False(t, w.Function("other", "fn"))

	w.OnAdd(fnSlice("fn-b", "fn", ptr.To(true)), false)
	w.OnDelete(fnSlice("fn-a", "fn"))
	assert.True(t, w.Function("default", "fn"), "one slice left")
	unlabelled := slice("fn-b", "fn", ptr.To(true))
	w.OnUpdate(nil, unlabelled)
	assert.False(t, w.Function("default", "fn"), "labels removed")
	w.OnUpdate(nil, fnSlice("fn-b", "fn"))
	assert.True(t, w.Function("default", "fn"))
	w.OnDelete(toolscache.DeletedFinalStateUnknown{Obj: fnSlice("fn-b", "fn")})
	assert.False(t, w.Function("default", "fn"), "all slices gone")
}

// withAddresses gives a slice one port and an address per endpoint.
func withAddresses(s *discoveryv1.EndpointSlice, port int32, addrs ...string) *discoveryv1.EndpointSlice {
	s.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port)}}
	for i, a := range addrs {
		s.Endpoints[i].Addresses = []string{a}
	}
	return s
}

func TestPickTakesReadyEndpointsInTurn(t *testing.T) {
	w, err := endpoints.New()
	require.NoError(t, err)
	w.MarkSynced()
	_, ok := w.Pick("default", "fn")
	assert.False(t, ok, "no endpoints")

	w.OnAdd(withAddresses(slice("fn-a", "fn", ptr.To(true), ptr.To(false), nil), 8080, "10.0.0.1", "10.0.0.2", "10.0.0.3"), false)
	w.OnAdd(withAddresses(slice("fn-b", "fn", ptr.To(true)), 8080, "fd00::4"), false)
	seen := map[string]int{}
	for range 30 {
		a, ok := w.Pick("default", "fn")
		assert.True(t, ok)
		seen[a]++
	}
	assert.Equal(t, map[string]int{"10.0.0.1:8080": 10, "10.0.0.3:8080": 10, "[fd00::4]:8080": 10}, seen,
		"every ready endpoint in turn, the not-ready one never")

	w.OnDelete(slice("fn-b", "fn"))
	w.OnUpdate(nil, withAddresses(slice("fn-a", "fn", ptr.To(false), ptr.To(false), ptr.To(false)), 8080, "10.0.0.1", "10.0.0.2", "10.0.0.3"))
	_, ok = w.Pick("default", "fn")
	assert.False(t, ok, "scaled to zero")

	multi := withAddresses(slice("db-a", "db", ptr.To(true)), 5432, "10.0.0.9")
	multi.Ports = append(multi.Ports, discoveryv1.EndpointPort{Name: ptr.To("metrics"), Port: ptr.To[int32](9090)})
	w.OnAdd(multi, false)
	ready, _ := w.Ready("default", "db")
	assert.True(t, ready)
	_, ok = w.Pick("default", "db")
	assert.False(t, ok, "which port of several a request is for only the Service knows")
}

// TestRunWithoutACacheWaitsForItsContext: a Watcher fed by hand has
// nothing to follow; Run returns nil once its context ends, and New refuses
// a nil cache and a nil option.
func TestRunWithoutACacheWaitsForItsContext(t *testing.T) {
	w, err := endpoints.New()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	require.Never(t, func() bool { return len(done) > 0 }, 50*time.Millisecond, 5*time.Millisecond, "Run runs until its context ends")
	cancel()
	require.NoError(t, <-done)

	_, err = endpoints.New(endpoints.WithCache(nil))
	require.ErrorIs(t, err, endpoints.ErrInvalidOption)
	_, err = endpoints.New(nil)
	require.ErrorIs(t, err, endpoints.ErrInvalidOption)
}
