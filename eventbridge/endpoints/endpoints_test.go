package endpoints_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
	w := endpoints.New()
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
	w := endpoints.New()
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
