package eventbridge_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/test/testcluster"
	"github.com/kfn-dev/kfn/test/testport"
)

// TestGatewayCallersAsRBACAllows runs the gateway with its default
// -gateway-auth=kubernetes against a real API server with RBAC: a user
// granted functions/invoke on one Function of team-a (resourceNames) calls
// it over TLS with a client certificate, as kfn invoke does, and is refused
// the namespace's other Function; a ServiceAccount of team-a granted the
// namespace's functions/invoke calls with a bearer token of kfn's audience
// over plain HTTP, as a pod does, and with one of the API server's
// audience only over TLS; a user granted nothing is refused (403
// naming the permission) even for a Function that does not exist; no
// credential is 401. The Function never sees the caller's credential.
func TestGatewayCallersAsRBACAllows(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	// The Functions' pods, reached through -resolve; each answer says
	// whether a credential reached the Function.
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header.Values("Authorization")) > 0 {
			_, _ = io.WriteString(w, "credential passed on")
			return
		}
		_, _ = io.WriteString(w, "served "+r.URL.Path)
	}))
	defer backend.Close()
	const ns = "team-a"
	cfg, cluster := runInCluster(t, func(cfg *eventbridge.Process, _ *testcluster.Cluster) {
		require.Equal(t, eventbridge.GatewayAuthKubernetes, cfg.GatewayAuth, "the default")
		cfg.Components = []string{eventbridge.ComponentGateway}
		cfg.GatewayListen, cfg.AdminListen, cfg.MetricsListen = testport.Addr(t), "", ""
		cfg.NewTokensPerSecond = 20 // bursts of 100, 10 for one caller address
		cfg.Resolve = map[string]string{"orders." + ns: backend.URL, "payments." + ns: backend.URL}
		cfg.Dispatcher.Egress.AllowLoopback = true // the backend listens there
	})
	bg := context.Background()
	admin, err := kubernetes.NewForConfig(cluster.Config)
	require.NoError(t, err)
	_, err = admin.CoreV1().Namespaces().Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	invoke := func(names ...string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{"serverless.kyma-project.io"}, Resources: []string{"functions/invoke"}, Verbs: []string{"create"}, ResourceNames: names}}
	}
	for name, rules := range map[string][]rbacv1.PolicyRule{"orders-only": invoke("orders"), "every-function": invoke()} {
		_, err = admin.RbacV1().Roles(ns).Create(bg, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = admin.CoreV1().ServiceAccounts(ns).Create(bg, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "caller"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for role, subject := range map[string]rbacv1.Subject{
		"orders-only":    {Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"},
		"every-function": {Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "caller"},
	} {
		_, err = admin.RbacV1().RoleBindings(ns).Create(bg, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
			Subjects:   []rbacv1.Subject{subject},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	alice, err := cluster.AddUser("alice")
	require.NoError(t, err)
	bob, err := cluster.AddUser("bob")
	require.NoError(t, err)
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(bg, "caller", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{auth.Audience}, ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiTR, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(bg, "caller", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	for _, fn := range []string{"orders", "payments"} {
		require.NoError(t, cluster.Client.Create(bg, functionSlice(ns, fn, true)))
	}

	plain := "http://" + cfg.GatewayListen + "/" + ns
	secure := "https://" + cfg.GatewayListen + "/" + ns
	call := func(c *http.Client, url, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the gateway's own certificate
	require.Eventually(t, func() bool {
		resp, err := http.Get(plain + "/orders/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the gateway serves")
	for _, fn := range []string{"orders", "payments"} { // their slices were made after the start
		require.Eventually(t, func() bool {
			code, _ := call(http.DefaultClient, plain+"/"+fn+"/", tr.Status.Token)
			return code == http.StatusOK
		}, 30*time.Second, 20*time.Millisecond, "the gateway knows %s", fn)
	}

	code, body := call(http.DefaultClient, plain+"/orders/", "")
	assert.Equal(t, http.StatusUnauthorized, code, "no credential: %s", body)
	code, _ = call(anonymous, secure+"/orders/", "")
	assert.Equal(t, http.StatusUnauthorized, code, "no credential over TLS either")
	code, _ = call(http.DefaultClient, plain+"/orders/", "not-a-token-the-cluster-knows")
	assert.Equal(t, http.StatusUnauthorized, code, "a made-up token")

	code, body = call(adminClient(t, alice), secure+"/orders/hi", "")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "served /hi", body, "alice's Function, without her credential")
	code, body = call(adminClient(t, alice), secure+"/payments/", "")
	assert.Equal(t, http.StatusForbidden, code, "not the Function alice was granted")
	assert.Contains(t, body, "alice may not create functions/invoke.serverless.kyma-project.io payments in namespace team-a")

	code, body = call(http.DefaultClient, plain+"/payments/x", tr.Status.Token)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "served /x", body, "the ServiceAccount's bearer token over plain HTTP, not passed on")

	// A token the API server takes is never taken over plain HTTP, where
	// whoever sees it could replay it there; over TLS (kfn invoke through
	// a port-forward) it is.
	code, body = call(http.DefaultClient, plain+"/payments/x", apiTR.Status.Token)
	assert.Equal(t, http.StatusUnauthorized, code, "the API server's token over plain HTTP: %s", body)
	assert.Contains(t, body, "over plain HTTP only a ServiceAccount token of audience kfn is taken")
	code, body = call(anonymous, secure+"/payments/x", apiTR.Status.Token)
	assert.Equal(t, http.StatusOK, code, "the API server's token over TLS: %s", body)
	assert.Equal(t, "served /x", body)

	// Made-up tokens cannot flood the API server with TokenReviews: past
	// the rate of new tokens they are answered 429 without a review, and a
	// token accepted before still goes through.
	tooMany := 0
	for i := range 30 {
		code, _ := call(http.DefaultClient, plain+"/payments/", fmt.Sprintf("made-up-%d", i))
		if code == http.StatusTooManyRequests {
			tooMany++
		} else {
			assert.Equal(t, http.StatusUnauthorized, code)
		}
	}
	assert.Positive(t, tooMany, "new tokens past the rate are refused before a review")
	code, body = call(http.DefaultClient, plain+"/payments/x", tr.Status.Token)
	assert.Equal(t, http.StatusOK, code, "a known token through the flood: %s", body)

	for _, fn := range []string{"orders", "does-not-exist"} {
		code, body = call(adminClient(t, bob), secure+"/"+fn+"/", "")
		assert.Equal(t, http.StatusForbidden, code, "bob may call nothing, known or not: %s", body)
		assert.Contains(t, body, "bob may not create functions/invoke")
	}
}
