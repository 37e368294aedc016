package controller

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kfn-dev/kfn/contract/claim"
	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/controller/pool"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/internal/claims"
	"github.com/kfn-dev/kfn/test/testcluster"
	"github.com/kfn-dev/kfn/test/testport"
)

// TestClaimsAreTheEventBridgesOnly runs the controller's claim listener
// against a real API server: a ServiceAccount with create on
// functions/claim (the chart grants it to the event bridge) is answered
// by the pool (here: it does not serve the Function), as is one granted
// it in the Function's namespace only, but not in another; a tenant's
// ServiceAccount without it gets 403 naming the permission; no token, a
// made-up one, and a token of the API server's audience get 401. Fails
// when the listener claims for a caller RBAC does not let, or takes a
// token the API server would take. The warm-up (claim.WarmPath) is
// answered to the event bridge's token only.
func TestClaimsAreTheEventBridgesOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	cluster := testcluster.New(t, testcluster.WithScheme(function.AddToScheme))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	ctrl.SetLogger(logr.Discard())
	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{
		Scheme: cluster.Scheme, Cache: function.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	require.NoError(t, err)
	p, err := pool.New(mgr.GetClient(), mgr.GetCache(), pool.Config{Size: 1, Resources: function.DefaultConfig().Resources})
	require.NoError(t, err)
	require.NoError(t, mgr.Add(p))
	port := testport.Port(t)
	require.NoError(t, addClaims(mgr, p, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), slog.New(slog.DiscardHandler)))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})

	admin, err := kubernetes.NewForConfig(cluster.Config)
	require.NoError(t, err)
	for _, ns := range []string{"kfn-system", "shop"} {
		_, err = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "claims"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"serverless.kyma-project.io"}, Resources: []string{"functions/claim"}, Verbs: []string{"create"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "claims"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "claims"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kfn-system", Name: "eventbridge"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	token := func(ns, sa string, audiences ...string) string {
		_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		if err != nil {
			require.ErrorContains(t, err, "already exists")
		}
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return tr.Status.Token
	}
	claimIn := func(tok, ns string) error {
		_, err := claims.NewClient("127.0.0.1", port, func() (string, error) { return tok, nil }).Claim(ctx, ns, "orders")
		return err
	}
	claimAs := func(tok string) error { return claimIn(tok, "shop") }

	eventbridge := token("kfn-system", "eventbridge", auth.Audience)
	require.Eventually(t, func() bool {
		return !errors.Is(claimAs(eventbridge), claim.ErrNoLeader)
	}, time.Minute, 20*time.Millisecond, "the listener serves once the manager runs")
	assert.ErrorIs(t, claimAs(eventbridge), claim.ErrNotPooled, "authorized: the pool answers")

	// A caller granted one namespace claims there only.
	_, err = admin.RbacV1().RoleBindings("shop").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "claims"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "claims"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kfn-system", Name: "scoped"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	scoped := token("kfn-system", "scoped", auth.Audience)
	require.Eventually(t, func() bool { return errors.Is(claimAs(scoped), claim.ErrNotPooled) }, time.Minute, 50*time.Millisecond,
		"granted in shop: the pool answers")
	err = claimIn(scoped, "kfn-system")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "answered 403", "not granted in kfn-system")

	err = claimAs(token("shop", "tenant", auth.Audience))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "answered 403")
	assert.Contains(t, err.Error(), "create functions/claim.serverless.kyma-project.io orders in namespace shop")
	for what, tok := range map[string]string{
		"no token":                  "",
		"a made-up token":           "not-a-token-of-this-cluster",
		"the API server's audience": token("kfn-system", "eventbridge"),
	} {
		err := claimAs(tok)
		require.Error(t, err, what)
		assert.Contains(t, err.Error(), "answered 401", what)
	}
	// The warm-up is the event bridge's only: a caller granted one
	// namespace, or none, is refused 403, and an unknown token 401.
	warmAs := func(tok string) error {
		return claims.NewClient("127.0.0.1", port, func() (string, error) { return tok, nil }).Warm(ctx)
	}
	assert.NoError(t, warmAs(eventbridge))
	for what, tok := range map[string]string{"granted one namespace": scoped, "a tenant": token("shop", "tenant", auth.Audience)} {
		err := warmAs(tok)
		require.Error(t, err, what)
		assert.Contains(t, err.Error(), "answered 403", what)
	}
	err = warmAs("not-a-token-of-this-cluster")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "answered 401")
	assert.True(t, (&claimServer{}).NeedLeaderElection(), "only the leader, where the pool runs, listens")
	resp, err := http.Get("http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "nothing is open")
}
