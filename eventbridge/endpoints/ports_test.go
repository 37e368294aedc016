package endpoints_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/eventbridge/endpoints"
)

// TestPickPortTakesTheNamedPortOfEverySlice: a Service's port is picked
// by its name among a slice's several, in every slice of the Service
// (whose pods may serve it at other numbers), ready endpoints only, in
// turn; a Service's one unnamed port is "", a port no slice has or a
// Service without slices none.
func TestPickPortTakesTheNamedPortOfEverySlice(t *testing.T) {
	w, err := endpoints.New()
	require.NoError(t, err)
	w.MarkSynced()

	a := withAddresses(slice("legacy-a", "legacy", ptr.To(true), ptr.To(false)), 8080, "10.0.0.1", "10.0.0.2")
	a.Ports = append(a.Ports, discoveryv1.EndpointPort{Name: ptr.To("metrics"), Port: ptr.To[int32](9090)})
	b := withAddresses(slice("legacy-b", "legacy", ptr.To(true)), 8081, "10.0.0.3")
	w.OnAdd(a, false)
	w.OnAdd(b, false)
	seen := map[string]int{}
	for range 20 {
		addr, ok := w.PickPort("default", "legacy", "http")
		require.True(t, ok)
		seen[addr]++
	}
	assert.Equal(t, map[string]int{"10.0.0.1:8080": 10, "10.0.0.3:8081": 10}, seen, "port http of both slices, the ready endpoints in turn")
	addr, ok := w.PickPort("default", "legacy", "metrics")
	assert.True(t, ok)
	assert.Equal(t, "10.0.0.1:9090", addr)
	_, ok = w.PickPort("default", "legacy", "admin")
	assert.False(t, ok, "no such port")
	_, ok = w.PickPort("other", "legacy", "http")
	assert.False(t, ok, "another namespace's Service of that name")

	plain := withAddresses(slice("plain-a", "plain", ptr.To(true)), 3000, "10.0.0.4")
	plain.Ports[0].Name = nil
	w.OnAdd(plain, false)
	addr, ok = w.PickPort("default", "plain", "")
	assert.True(t, ok)
	assert.Equal(t, "10.0.0.4:3000", addr, "a Service's one unnamed port")

	w.OnDelete(a)
	w.OnUpdate(nil, withAddresses(slice("legacy-b", "legacy", ptr.To(false)), 8081, "10.0.0.3"))
	_, ok = w.PickPort("default", "legacy", "http")
	assert.False(t, ok, "no ready endpoint left")
}
