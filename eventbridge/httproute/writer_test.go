package httproute_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
	"github.com/kfn-dev/kfn/eventbridge/httproute"
	"github.com/kfn-dev/kfn/test/testcluster"
)

// gatewayAPICRD is the HTTPRoute CRD of the Gateway API module kfn builds
// with (its standard channel).
func gatewayAPICRD(t *testing.T) string {
	return filepath.Join(testcluster.ModuleDir(t, "sigs.k8s.io/gateway-api"), "config", "crd", "standard", "gateway.networking.k8s.io_httproutes.yaml")
}

// The Writer, against a real API server with the Gateway API's HTTPRoute
// CRD: every kept APIRule gets its route (its CEL validation passed),
// not applied again while unchanged; an APIRule whose host another holds is an
// Error with no route; one with a jwt rule a Warning whose route leaves
// the rule out; the route of an APIRule gone, or now refused, is deleted;
// a route kfn did not write is left alone.
func TestWriterAppliesAndDeletesRoutes(t *testing.T) {
	c := testcluster.New(t, testcluster.WithCRDPaths(gatewayAPICRD(t)), testcluster.WithScheme(gatewayapiv1.Install))
	ctx := context.Background()
	for _, ns := range []string{"shop", "mallory"} {
		require.NoError(t, c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	cw, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Scheme})
	require.NoError(t, err)
	var applies atomic.Int32 // the writes kfn makes, through the interceptor
	counted := interceptor.NewClient(cw, interceptor.Funcs{Apply: func(ctx context.Context, cl client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
		applies.Add(1)
		return cl.Apply(ctx, obj, opts...)
	}})
	w := httproute.NewWriter(counted, httproute.Config{Parent: parent, Domain: "local.kyma.dev", Reserved: []string{"svc.cluster.local"}}, slog.New(slog.DiscardHandler))

	orders := apiRule(noAuth("/orders/{*}", "GET", "POST"), noAuth("/*", "GET"))
	orders.CreationTimestamp = metav1.NewTime(time.Unix(1, 0))
	thief := apiRule(noAuth("/*", "GET"))
	thief.Namespace, thief.Name, thief.CreationTimestamp = "mallory", "thief", metav1.NewTime(time.Unix(2, 0))
	secret := apiRule(gatewayv2.Rule{Path: "/secret", Methods: []gatewayv2.HttpMethod{"GET"}, Jwt: &gatewayv2.JwtConfig{}}, noAuth("/open", "GET"))
	secretHost := gatewayv2.Host("secret")
	secret.Name, secret.Spec.Hosts = "secret", []*gatewayv2.Host{&secretHost}
	foreign := &gatewayapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "theirs"},
		Spec: gatewayapiv1.HTTPRouteSpec{CommonRouteSpec: gatewayapiv1.CommonRouteSpec{ParentRefs: []gatewayapiv1.ParentReference{{Name: "public"}}}}}
	require.NoError(t, c.Client.Create(ctx, foreign))

	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	for range 2 { // written, then left as it is
		st := w.SetAPIRules([]*gatewayv2.APIRule{orders, thief, secret})
		assert.Equal(t, gatewayv2.StateWarning, st[key("shop", "orders")].State, "the rule order note")
		assert.Equal(t, gatewayv2.StateError, st[key("mallory", "thief")].State)
		assert.Contains(t, st[key("mallory", "thief")].Description, "is held by APIRule shop/orders")
		assert.Contains(t, st[key("shop", "secret")].Description, "rule 0 (/secret) left out: jwt is not enforced")
	}
	assert.EqualValues(t, 2, applies.Load(), "two routes, each applied once: a route as wanted is not applied again")
	var got gatewayapiv1.HTTPRoute
	require.NoError(t, c.Client.Get(ctx, key("shop", "orders"), &got))
	assert.Equal(t, []gatewayapiv1.Hostname{"orders.local.kyma.dev"}, got.Spec.Hostnames)
	assert.Equal(t, ptr.To(gatewayapiv1.Namespace("gateways")), got.Spec.ParentRefs[0].Namespace)
	require.Len(t, got.Spec.Rules, 2)
	assert.Equal(t, "RegularExpression /orders/[^/]+", path(got.Spec.Rules[0].Matches[0].Path))
	require.NoError(t, c.Client.Get(ctx, key("shop", "secret"), &got))
	require.Len(t, got.Spec.Rules, 1, "the jwt rule is not routed")
	assert.True(t, apierrors.IsNotFound(c.Client.Get(ctx, key("mallory", "thief"), &got)), "a refused APIRule gets no route")

	// orders goes; secret now takes a reserved host.
	reserved := gatewayv2.Host("x.svc.cluster.local")
	secret.Spec.Hosts = []*gatewayv2.Host{&reserved}
	st := w.SetAPIRules([]*gatewayv2.APIRule{secret})
	assert.Equal(t, gatewayv2.StateError, st[key("shop", "secret")].State)
	for _, name := range []string{"orders", "secret"} {
		assert.True(t, apierrors.IsNotFound(c.Client.Get(ctx, key("shop", name), &got)), name+": deleted")
	}
	require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(foreign), &got), "a route kfn did not write stays")
}
