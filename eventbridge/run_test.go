package eventbridge_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/depcache"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/test/natstest"
	"github.com/kfn-dev/kfn/test/testcluster"
	"github.com/kfn-dev/kfn/test/testport"
)

// TestRunInACluster runs the whole event bridge (publisher, reconciler,
// feeder, dispatcher, EndpointSlice watcher, admin and metrics) against a
// real API server and NATS: a Subscription becomes ready, an event
// published over HTTP reaches the sink only once the sink has a ready
// endpoint, and the metrics count it.
func TestRunInACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	var got atomic.Int32
	senders := make(chan string, 10)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Ce-Type") == "order.created.v1" {
			got.Add(1)
			senders <- r.Header.Get("Ce-Id") + " from " + r.Header.Get("Ce-"+publisher.SenderExtension)
		}
	}))
	defer sink.Close()
	cfg, cluster := runInCluster(t, func(cfg *eventbridge.Process, _ *testcluster.Cluster) {
		cfg.Resolve = map[string]string{"orders.default": sink.URL}
		cfg.Dispatcher.Egress.AllowLoopback = true
	})

	c := cluster.Client
	bg := context.Background()
	require.NoError(t, c.Create(bg, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}))
	require.NoError(t, c.Create(bg, &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders"},
		Spec: v1alpha2.SubscriptionSpec{
			Sink: "http://orders.default.svc.cluster.local", Source: "shop", Types: []string{"order.created.v1"},
		},
	}))
	require.Eventually(t, func() bool {
		var s v1alpha2.Subscription
		return c.Get(bg, client.ObjectKey{Namespace: "default", Name: "orders"}, &s) == nil && s.Status.Ready
	}, 30*time.Second, 20*time.Millisecond, "the Subscription becomes ready")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := http.Get("http://" + cfg.Listen + "/shop/v1/events/subscribed")
		if !assert.NoError(c, err) {
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		assert.JSONEq(c, `{"eventsInfo":[{"name":"order.created","version":"v1"}]}`, string(b), "Kyma's subscribed events of application shop")
	}, 10*time.Second, 50*time.Millisecond)

	publishAs := func(id, token string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+cfg.Listen+"/publish", strings.NewReader(`{}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Id", id)
		req.Header.Set("Ce-Source", "shop")
		req.Header.Set("Ce-Type", "order.created.v1")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	publish := func(id string) int { return publishAs(id, "") }
	require.Equal(t, http.StatusNoContent, publish("1"))
	require.Never(t, func() bool { return got.Load() > 0 }, 500*time.Millisecond, 20*time.Millisecond,
		"no ready endpoint (the function is at zero): the event waits")

	// The function scales up: its EndpointSlice gets a ready endpoint.
	require.NoError(t, c.Create(bg, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "orders-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "orders"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}))
	require.Eventually(t, func() bool { return got.Load() == 1 }, 10*time.Second, 10*time.Millisecond, "delivered once the sink is ready")
	assert.Equal(t, "1 from ", <-senders, "no token, no sender")

	// The delivery is counted once the sink's answer is in, after the sink
	// saw the request.
	var body []byte
	require.Eventually(t, func() bool {
		resp, err := adminClient(t, cluster.Config).Get("https://" + cfg.MetricsListen + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return strings.Contains(string(body), `kfn_eventbridge_delivered_total{namespace="default",subscription="orders"} 1`)
	}, 10*time.Second, 10*time.Millisecond, "the delivery counted: %s", body)
	assert.Contains(t, string(body), `kfn_eventbridge_publish_requests_total{code="204",endpoint="publish"} 1`)

	// The admin API: over TLS, to whom the cluster authenticates, as far
	// as RBAC lets them.
	resp, err := adminClient(t, cluster.Config).Get("https://" + cfg.AdminListen + "/deadletters")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `[]`, string(body))
	nobody, err := cluster.AddUser("nobody")
	require.NoError(t, err)
	resp, err = adminClient(t, nobody).Get("https://" + cfg.AdminListen + "/deadletters?namespace=default")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a user RBAC grants nothing")
	assert.Contains(t, string(body), "nobody may not list subscriptions/deadletters.eventing.kyma-project.io in namespace default")
	resp, err = adminClient(t, nil).Get("https://" + cfg.AdminListen + "/deadletters")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no credential")
	resp, err = http.Get("http://" + cfg.AdminListen + "/deadletters")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "no plain HTTP")

	// The event's path (kfn trace), to whom RBAC lets read the namespace's:
	// the Subscription's attempt and outcome.
	get := func(user *rest.Config, path string) (int, string) {
		resp, err := adminClient(t, user).Get("https://" + cfg.AdminListen + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	var found eventpath.Found
	require.Eventually(t, func() bool {
		code, body := get(cluster.Config, "/events/1?namespace=default")
		found = eventpath.Found{}
		return code == http.StatusOK && json.Unmarshal([]byte(body), &found) == nil && len(found.Chains) == 1 &&
			len(found.Chains[0].Events) == 1 && len(found.Chains[0].Events[0].Deliveries) == 1 &&
			found.Chains[0].Events[0].Deliveries[0].Outcome == dispatcher.Delivered
	}, 10*time.Second, 20*time.Millisecond, "the event's path: %+v", found)
	assert.Equal(t, "orders", found.Chains[0].Events[0].Deliveries[0].Subscription)
	code, text := get(nobody, "/_kfn/events/1?namespace=default")
	assert.Equal(t, http.StatusForbidden, code, "a user RBAC grants nothing")
	assert.Contains(t, text, "nobody may not get subscriptions/events.eventing.kyma-project.io in namespace default")
	code, text = get(cluster.Config, "/_kfn/events?namespace=default&limit=5")
	assert.Equal(t, http.StatusOK, code, "the namespace's recent chains: %s", text)
	assert.Contains(t, text, `"id":"1"`)
	code, text = get(cluster.Config, "/events/1")
	assert.Equal(t, http.StatusBadRequest, code, text)
	code, text = get(cluster.Config, "/events/1?namespace=other")
	assert.Equal(t, http.StatusNotFound, code, "another namespace never saw it: %s", text)

	// Senders: a Function's host sends its pod's ServiceAccount token of
	// kfn's audience; the event names the ServiceAccount's namespace.
	admin, err := kubernetes.NewForConfig(cluster.Config)
	require.NoError(t, err)
	_, err = admin.CoreV1().ServiceAccounts("default").Create(bg, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "emitter"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(bg, "emitter", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{auth.Audience}, ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, publishAs("2", tr.Status.Token))
	select {
	case s := <-senders:
		assert.Equal(t, "2 from default", s)
	case <-time.After(10 * time.Second):
		t.Fatal("the event with a sender was not delivered")
	}
	assert.Equal(t, http.StatusUnauthorized, publishAs("3", "not-a-token-the-cluster-knows"))

	// The dependency cache, on the publisher's listener: a Function pod's
	// token reads its namespace's dependencies, and stores them with the
	// writer token of its install step, bound to the pod and made for this
	// dependency set.
	deps := "http://" + cfg.Listen + depcache.PathPrefix + "nodejs24/" + strings.Repeat("ab", 32)
	cached := []byte{0x1f, 0x8b, 8, 0, 1, 2, 3}
	pod, err := admin.CoreV1().Pods("default").Create(bg, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "emitter"},
		Spec: corev1.PodSpec{ServiceAccountName: "emitter", Containers: []corev1.Container{{Name: "fn", Image: "fn"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	wr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(bg, "emitter", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{runtimes.DependencyWriterAudience("nodejs24", strings.Repeat("ab", 32))},
			ExpirationSeconds: ptr.To[int64](600), BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	writer := ""
	dependencies := func(method, token string, body []byte) (int, []byte) {
		req, _ := http.NewRequest(method, deps, bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if writer != "" {
			req.Header.Set(runtimes.DependencyWriterHeader, writer)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var page string
	code, _ = dependencies(http.MethodPut, "", cached)
	assert.Equal(t, http.StatusUnauthorized, code, "no token")
	code, _ = dependencies(http.MethodPut, tr.Status.Token, cached)
	assert.Equal(t, http.StatusForbidden, code, "the identity alone stores nothing")
	writer = wr.Status.Token
	code, _ = dependencies(http.MethodPut, tr.Status.Token, cached)
	assert.Equal(t, http.StatusCreated, code)
	code, stored := dependencies(http.MethodGet, tr.Status.Token, nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, cached, stored)

	resp, err = http.Get("http://" + cfg.Listen + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// The metrics name every tenant's namespaces: over TLS, to whom RBAC
	// lets get /metrics (the chart's metrics-reader role, here one alike).
	metrics := func(c *rest.Config) (int, string) {
		resp, err := adminClient(t, c).Get("https://" + cfg.MetricsListen + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, page = metrics(nil)
	assert.Equal(t, http.StatusUnauthorized, code, "no credential")
	code, page = metrics(nobody)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, page, "nobody may not get /metrics")
	_, err = admin.RbacV1().ClusterRoles().Create(bg, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(bg, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "prometheus"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	prometheus, err := cluster.AddUser("prometheus")
	require.NoError(t, err)
	require.Eventually(t, func() bool { code, page = metrics(prometheus); return code == http.StatusOK }, 10*time.Second, 50*time.Millisecond,
		"the metrics reader is served: %d %s", code, page)
	assert.Contains(t, page, "kfn_eventbridge_delivered_total")
	assert.Contains(t, page, `kfn_eventbridge_dependency_cache_requests_total{code="201",route="put"} 1`)
	resp, err = http.Get("http://" + cfg.MetricsListen + "/metrics")
	if err == nil {
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "no plain HTTP")
	}
}

// runInCluster runs the whole event bridge against a real API server (a
// cluster of its own) and NATS, with mod applied to its configuration,
// until the test ends; the bridge must then stop cleanly.
func runInCluster(t *testing.T, mod func(*eventbridge.Process, *testcluster.Cluster)) (eventbridge.Process, *testcluster.Cluster) {
	t.Helper()
	cluster := testcluster.New(t, testcluster.WithScheme(v1alpha2.AddToScheme))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, cluster.KubeConfig, 0o600))
	t.Setenv("KUBECONFIG", kubeconfig)

	ns := natstest.Start(t)
	cfg := eventbridge.DefaultProcess()
	cfg.NATSURL = ns.URL()
	cfg.Listen, cfg.AdminListen, cfg.MetricsListen = testport.Addr(t), testport.Addr(t), testport.Addr(t)
	cfg.LeaderElection = false
	if mod != nil {
		mod(&cfg, cluster)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- eventbridge.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "a clean shutdown")
		case <-time.After(20 * time.Second):
			t.Error("the event bridge did not stop within 20s")
		}
	})
	return cfg, cluster
}

// adminClient reaches the admin API as the user of cfg, as the kfn command
// does (auth.ClientTransport); with nil, without a credential.
func adminClient(t *testing.T, cfg *rest.Config) *http.Client {
	t.Helper()
	if cfg == nil {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the admin API's own certificate
	}
	rt, err := auth.ClientTransport(cfg)
	require.NoError(t, err)
	return &http.Client{Transport: rt}
}

// TestSharedTokenAndSenderIdentityBothApply runs the publisher with the
// shared bearer token (-token-file) and sender identity (its default)
// against a real API server, with the source shop reserved for namespace
// default: a Function's host sends its pod's identity token (Authorization)
// and the shared token (auth.TokenHeader); the event is taken only when
// both are right, so the shared token does not turn sender identity off.
// A producer outside Kubernetes sends the shared token alone, as before,
// and is taken as a sender of no namespace.
func TestSharedTokenAndSenderIdentityBothApply(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	const shared = "a-shared-token-of-the-publisher"
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(shared), 0o600))
	cfg, cluster := runInCluster(t, func(cfg *eventbridge.Process, _ *testcluster.Cluster) {
		cfg.Components = []string{eventbridge.ComponentPublisher}
		cfg.AdminListen, cfg.MetricsListen = "", ""
		cfg.TokenFile = tokenFile
		r, err := admission.ParseReservation("shop=default")
		require.NoError(t, err)
		cfg.Publisher.Reserved = []admission.Reservation{r}
	})
	admin, err := kubernetes.NewForConfig(cluster.Config)
	require.NoError(t, err)
	bg := context.Background()
	_, err = admin.CoreV1().ServiceAccounts("default").Create(bg, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "emitter"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(bg, "emitter", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{auth.Audience}, ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	identity := tr.Status.Token

	publish := func(source string, headers map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+cfg.Listen+"/publish", strings.NewReader(`{}`))
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Id", fmt.Sprint(time.Now().UnixNano()))
		req.Header.Set("Ce-Source", source)
		req.Header.Set("Ce-Type", "order.created.v1")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + cfg.Listen + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "the publisher is ready")

	for name, c := range map[string]struct {
		source  string
		headers map[string]string
		code    int
	}{
		"both, a reserved source":                 {"shop", map[string]string{"Authorization": "Bearer " + identity, auth.TokenHeader: shared}, http.StatusNoContent},
		"both, an open source":                    {"other", map[string]string{"Authorization": "Bearer " + identity, auth.TokenHeader: shared}, http.StatusNoContent},
		"the shared token alone, an open source":  {"other", map[string]string{"Authorization": "Bearer " + shared}, http.StatusNoContent},
		"the shared token alone, a reserved one":  {"shop", map[string]string{"Authorization": "Bearer " + shared}, http.StatusUnauthorized},
		"the shared token in its header alone":    {"shop", map[string]string{auth.TokenHeader: shared}, http.StatusUnauthorized},
		"the identity alone":                      {"shop", map[string]string{"Authorization": "Bearer " + identity}, http.StatusUnauthorized},
		"the identity and a wrong shared token":   {"shop", map[string]string{"Authorization": "Bearer " + identity, auth.TokenHeader: shared + "x"}, http.StatusUnauthorized},
		"a made-up identity and the shared token": {"other", map[string]string{"Authorization": "Bearer made-up", auth.TokenHeader: shared}, http.StatusUnauthorized},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := publish(c.source, c.headers)
			assert.Equal(t, c.code, code, body)
		})
	}
}
