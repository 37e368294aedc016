package auth_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/test/testcluster"
)

// deadLetters is what the test's handler asks about: listing the dead
// letters of the namespace in the request's query.
func deadLetters(namespace string) auth.Attributes {
	return auth.Attributes{Verb: "list", Group: "eventing.kyma-project.io", Resource: "subscriptions", Subresource: "deadletters", Namespace: namespace}
}

// TestKubernetesAuthenticatesAndAuthorizesAsTheAPIServer runs a listener
// guarded by auth.Kubernetes against a real API server with RBAC: a user
// with a client certificate and a ServiceAccount with a bearer token, each
// granted subscriptions/deadletters in team-a only, list team-a's and are
// refused team-b's (403 naming the permission); a user granted nothing is
// refused; a request without a credential, or with one the cluster does
// not know, is 401; the cluster's administrators may do everything.
func TestKubernetesAuthenticatesAndAuthorizesAsTheAPIServer(t *testing.T) {
	c := testcluster.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	admin, err := kubernetes.NewForConfig(c.Config)
	require.NoError(t, err)

	for _, ns := range []string{"team-a", "team-b"} {
		_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = admin.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "dead-letters"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"eventing.kyma-project.io"}, Resources: []string{"subscriptions/deadletters"}, Verbs: []string{"list"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.CoreV1().ServiceAccounts("team-a").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ops"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dead-letters"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "dead-letters"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: "team-a", Name: "ops"},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	alice, err := c.AddUser("alice")
	require.NoError(t, err)
	bob, err := c.AddUser("bob")
	require.NoError(t, err)
	tr, err := admin.CoreV1().ServiceAccounts("team-a").CreateToken(ctx, "ops", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	ops := &rest.Config{Host: c.Config.Host, BearerToken: tr.Status.Token}
	kfnTR, err := admin.CoreV1().ServiceAccounts("team-a").CreateToken(ctx, "ops", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{auth.Audience}, ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	opsForKfn := &rest.Config{Host: c.Config.Host, BearerToken: kfnTR.Status.Token}
	otherTR, err := admin.CoreV1().ServiceAccounts("team-a").CreateToken(ctx, "ops", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"someone-else"}, ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	opsForOthers := &rest.Config{Host: c.Config.Host, BearerToken: otherTR.Status.Token}

	k, err := auth.NewKubernetes(admin, auth.KubernetesConfig{CacheTTL: time.Millisecond})
	require.NoError(t, err)
	go func() { _ = k.Run(ctx) }()
	srv := httptest.NewUnstartedServer(k.Authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Empty(t, r.Header.Get("Authorization"), "the credential stays with the listener")
		if err := k.Allow(r, deadLetters(r.URL.Query().Get("namespace"))); err != nil {
			http.Error(w, err.Error(), map[bool]int{true: http.StatusForbidden, false: http.StatusUnauthorized}[errors.Is(err, auth.ErrForbidden)])
			return
		}
		_, _ = io.WriteString(w, "letters")
	}), "/healthz"))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	get := func(cfg *rest.Config, path string) (int, string) {
		t.Helper()
		rt := http.RoundTripper(&http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}) //nolint:gosec // the test server's own certificate
		if cfg != nil {
			rt, err = auth.ClientTransport(cfg)
			require.NoError(t, err)
		}
		resp, err := (&http.Client{Transport: rt}).Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	// The client CA is read in the background: wait for a certificate to
	// be taken.
	require.Eventually(t, func() bool { code, _ := get(alice, "/?namespace=team-a"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond,
		"a client certificate is taken once the cluster's client CA is read")

	for name, c := range map[string]struct {
		cfg  *rest.Config
		path string
		code int
		body string
	}{
		"certificate, granted namespace":      {alice, "/?namespace=team-a", http.StatusOK, "letters"},
		"certificate, other namespace":        {alice, "/?namespace=team-b", http.StatusForbidden, "alice may not list subscriptions/deadletters.eventing.kyma-project.io in namespace team-b"},
		"certificate, every namespace":        {alice, "/", http.StatusForbidden, "alice may not list subscriptions/deadletters.eventing.kyma-project.io in every namespace"},
		"certificate granted nothing":         {bob, "/?namespace=team-a", http.StatusForbidden, "bob may not list"},
		"token, granted namespace":            {ops, "/?namespace=team-a", http.StatusOK, "letters"},
		"token, other namespace":              {ops, "/?namespace=team-b", http.StatusForbidden, "system:serviceaccount:team-a:ops may not list"},
		"token of kfn's audience":             {opsForKfn, "/?namespace=team-a", http.StatusOK, "letters"},
		"token of another audience":           {opsForOthers, "/?namespace=team-a", http.StatusUnauthorized, "unauthenticated"},
		"unknown token":                       {&rest.Config{Host: c.Config.Host, BearerToken: "not-a-token-the-cluster-made"}, "/?namespace=team-a", http.StatusUnauthorized, "unauthenticated"},
		"no credential":                       {nil, "/?namespace=team-a", http.StatusUnauthorized, "unauthenticated"},
		"administrator, every namespace":      {c.Config, "/", http.StatusOK, "letters"},
		"administrator, any single namespace": {c.Config, "/?namespace=team-b", http.StatusOK, "letters"},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := get(c.cfg, c.path)
			assert.Equal(t, c.code, code, body)
			assert.Contains(t, body, c.body)
		})
	}

	// Over plain HTTP, whoever sees a token could replay it: only a
	// ServiceAccount token of kfn's audience is taken, never one the API
	// server would take.
	plain := httptest.NewServer(srv.Config.Handler)
	t.Cleanup(plain.Close)
	for name, c := range map[string]struct {
		token string
		code  int
		body  string
	}{
		"token of kfn's audience": {kfnTR.Status.Token, http.StatusOK, "letters"},
		"token of the API server": {tr.Status.Token, http.StatusUnauthorized, "only a ServiceAccount token of audience kfn is taken"},
	} {
		t.Run("plain HTTP, "+name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, plain.URL+"/?namespace=team-a", nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+c.token)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			assert.Equal(t, c.code, resp.StatusCode, string(body))
			assert.Contains(t, string(body), c.body)
		})
	}
}

// reviewCounter counts the TokenReviews a client makes.
type reviewCounter struct {
	next   http.RoundTripper
	count  atomic.Int64 // TokenReviews
	checks atomic.Int64 // SubjectAccessReviews
}

func (c *reviewCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/tokenreviews") {
		c.count.Add(1)
	}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/subjectaccessreviews") {
		c.checks.Add(1)
	}
	return c.next.RoundTrip(r)
}

// from is a client whose connections leave from the loopback address ip,
// so that a listener on 127.0.0.1 sees it as a caller of its own.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestMadeUpTokensDoNotStarveOthersReviews: against a real API server, an
// attacker repeating one made-up bearer token costs one TokenReview and is
// answered 401, never 429; an attacker sending many distinct made-up
// tokens spends the budget of its own address only; meanwhile a
// legitimate new token from another caller is reviewed and accepted, on
// this listener and on another one of the same Kubernetes.
func TestMadeUpTokensDoNotStarveOthersReviews(t *testing.T) {
	c := testcluster.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	admin, err := kubernetes.NewForConfig(c.Config)
	require.NoError(t, err)
	_, err = admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "emitter"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	token := func() string {
		tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "emitter", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{auth.Audience}, ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return tr.Status.Token
	}

	client, reviews := countingClient(t, c.Config)
	k, err := auth.NewKubernetes(client, auth.KubernetesConfig{NewTokensPerSecond: 1}) // bursts of 5
	require.NoError(t, err)
	go func() { _ = k.Run(ctx) }()
	serve := func(k *auth.Kubernetes) string { return serveAuthenticated(t, k) }
	publisher := serve(k)
	call := func(c *http.Client, url, token string) int { t.Helper(); return bearerCall(t, c, url, token) }
	attacker, victim := from("127.0.0.2"), from("127.0.0.3")

	before := reviews.count.Load()
	for range 50 {
		assert.Equal(t, http.StatusUnauthorized, call(attacker, publisher, "the-same-made-up-token"), "a made-up token, again")
	}
	assert.LessOrEqual(t, reviews.count.Load()-before, int64(1), "a made-up token is reviewed once (for kfn's audience: plain HTTP)")

	tooMany := 0
	for i := range 50 {
		if call(attacker, publisher, fmt.Sprintf("made-up-%d", i)) == http.StatusTooManyRequests {
			tooMany++
		}
	}
	assert.Positive(t, tooMany, "distinct made-up tokens of one caller past its share are refused before a review")

	assert.Equal(t, http.StatusOK, call(victim, publisher, token()), "another caller's new token is reviewed and accepted")
	assert.Equal(t, http.StatusOK, call(attacker, serve(k.Listener()), token()),
		"another listener's budget is its own, even for the attacker's address")
}

// TestOneNamespaceCannotSpendAnothersReviews: against a real API server,
// the pods of one namespace, each sending a new token of the namespace
// from an address of its own, spend that namespace's share of the
// listener's budget of reviews, not the whole of it; tokens made up to
// claim another namespace (with the cluster's key id, but not its
// signature), from many addresses, are not counted as that namespace's
// and spend at most half of it. Meanwhile a new token of namespace victim
// is reviewed and accepted.
func TestOneNamespaceCannotSpendAnothersReviews(t *testing.T) {
	c := testcluster.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	token := appTokens(t, c, "attacker", "victim")
	const pods = 30
	genuine := make([]string, pods)
	for i := range genuine {
		genuine[i] = token("attacker")
	}
	// Made up: the header of a genuine token (the cluster's key id), claims
	// of namespace victim, and a signature of nothing.
	header := strings.Split(genuine[0], ".")[0]
	forged := make([]string, pods)
	for i := range forged {
		claims := fmt.Sprintf(`{"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:victim:app","aud":["kfn"],"exp":%d,"kubernetes.io":{"namespace":"victim","serviceaccount":{"name":"app","uid":"%d"}}}`,
			time.Now().Add(time.Hour).Unix(), i)
		forged[i] = header + "." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + "." + base64.RawURLEncoding.EncodeToString([]byte("not a signature"))
	}

	client, reviews := countingClient(t, c.Config)
	// 1 new token a second, bursts of 5: a namespace's share is 1, the
	// made-up tokens' half 2.
	k, err := auth.NewKubernetes(client, auth.KubernetesConfig{NewTokensPerSecond: 1})
	require.NoError(t, err)
	go func() { _ = k.Run(ctx) }()
	url := serveAuthenticated(t, k)
	call := func(c *http.Client, token string) int { t.Helper(); return bearerCall(t, c, url, token) }

	before := reviews.count.Load()
	accepted := 0
	for i, tok := range genuine {
		if call(from(fmt.Sprintf("127.0.1.%d", i+1)), tok) == http.StatusOK {
			accepted++
		}
	}
	assert.LessOrEqual(t, accepted, 3, "the attacker's new tokens past its namespace's share are refused, from whichever address")
	assert.LessOrEqual(t, reviews.count.Load()-before, int64(3), "and not reviewed")

	before = reviews.count.Load()
	for i, tok := range forged {
		assert.Contains(t, []int{http.StatusUnauthorized, http.StatusTooManyRequests}, call(from(fmt.Sprintf("127.0.2.%d", i+1)), tok))
	}
	assert.LessOrEqual(t, reviews.count.Load()-before, int64(4), "made-up tokens spend at most half the budget")

	assert.Equal(t, http.StatusOK, call(from("127.0.3.1"), token("victim")), "another namespace's new token is reviewed and accepted")
}

// countingClient is a client of c's API server that counts its
// TokenReviews.
func countingClient(t *testing.T, cfg *rest.Config) (kubernetes.Interface, *reviewCounter) {
	t.Helper()
	counted := rest.CopyConfig(cfg)
	reviews := &reviewCounter{}
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper { reviews.next = rt; return reviews })
	client, err := kubernetes.NewForConfig(counted)
	require.NoError(t, err)
	return client, reviews
}

// serveAuthenticated serves "served" to the callers k authenticates and
// returns the server's URL.
func serveAuthenticated(t *testing.T, k *auth.Kubernetes) string {
	t.Helper()
	srv := httptest.NewServer(k.Authenticate(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "served")
	})))
	t.Cleanup(srv.Close)
	return srv.URL
}

// bearerCall GETs url with token as c, and returns the status code.
func bearerCall(t *testing.T, c *http.Client, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestOneNamespaceCannotSpendAnothersAccessChecks: against a real API
// server, a caller of namespace attacker asks for ever new Function names
// it may not call (the gateway asks for each name a caller may not call
// namespace-wide): each is a decision not kept, a SubjectAccessReview;
// past its namespace's share it is answered 429 without one, and a caller
// of namespace victim still has its decision asked for (403 here: no
// RBAC grants it). Before, every name cost a review, without bound.
func TestOneNamespaceCannotSpendAnothersAccessChecks(t *testing.T) {
	c := testcluster.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	token := appTokens(t, c, "attacker", "victim")
	client, reviews := countingClient(t, c.Config)
	// 1 a second, bursts of 5: a namespace's share is 1, and past it a
	// namespace takes from the total while it holds over half.
	k, err := auth.NewKubernetes(client, auth.KubernetesConfig{NewTokensPerSecond: 1})
	require.NoError(t, err)
	go func() { _ = k.Run(ctx) }()
	srv := httptest.NewServer(k.Authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := auth.Attributes{Verb: "get", Group: "serverless.kyma-project.io", Resource: "functions",
			Namespace: r.URL.Query().Get("ns"), Name: r.URL.Query().Get("name")}
		if err := k.Allow(r, a); err != nil {
			http.Error(w, err.Error(), auth.Status(err))
		}
	})))
	t.Cleanup(srv.Close)
	call := func(tok, ns, name string) int {
		t.Helper()
		return bearerCall(t, http.DefaultClient, srv.URL+"?ns="+ns+"&name="+name, tok)
	}

	attacker := token("attacker")
	before := reviews.checks.Load()
	codes := map[int]int{}
	for i := range 50 {
		codes[call(attacker, "victim", fmt.Sprint("fn-", i))]++
	}
	assert.Positive(t, codes[http.StatusTooManyRequests], "past its namespace's share: %v", codes)
	assert.LessOrEqual(t, reviews.checks.Load()-before, int64(4), "and not asked for")
	assert.Equal(t, 50, codes[http.StatusTooManyRequests]+codes[http.StatusForbidden], "each denied or refused: %v", codes)

	before = reviews.checks.Load()
	assert.Equal(t, http.StatusForbidden, call(token("victim"), "victim", "orders"), "another namespace's decision is asked for")
	assert.Equal(t, int64(1), reviews.checks.Load()-before)
}

// appTokens makes namespaces in c's API server, each with a ServiceAccount
// "app", and returns what makes a new token of kfn's audience for the app
// of a namespace.
func appTokens(t *testing.T, c *testcluster.Cluster, namespaces ...string) func(namespace string) string {
	t.Helper()
	ctx := context.Background()
	admin, err := kubernetes.NewForConfig(c.Config)
	require.NoError(t, err)
	for _, ns := range namespaces {
		_, err = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return func(namespace string) string {
		tr, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "app", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{auth.Audience}, ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return tr.Status.Token
	}
}
