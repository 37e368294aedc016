package cluster

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/test/jwttest"
)

// scalingFunction is a Node.js Function with kfn's scaleConfig that reports
// each event or request to the recorder and takes delayMs to answer.
func scalingFunction(name string, minReplicas, maxReplicas, cooldown, targetBacklog, delayMs int) string {
	return fmt.Sprintf(`
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: %[1]s
spec:
  runtime: nodejs22
  scaleConfig:
    minReplicas: %[2]d
    maxReplicas: %[3]d
    cooldownPeriod: %[4]d
    targetBacklog: %[5]d
  env:
    - name: RECORDER_URL
      value: %[7]s
  source:
    inline:
      source: |
        module.exports = {
          main: async function (event, context) {
            const id = event["ce-id"] || event.extensions.request.query.id || "";
            console.log("handling " + id);
            await new Promise((resolve) => setTimeout(resolve, %[6]d));
            await fetch(process.env.RECORDER_URL + "/record", { method: "POST", body: JSON.stringify({ fn: %[1]q, id, pod: require("node:os").hostname() }) });
            console.log("recorded " + id);
            return "handled " + id;
          }
        }
`, name, minReplicas, maxReplicas, cooldown, targetBacklog, delayMs, platform.recorder.URL)
}

// replicas returns the Deployment's desired and ready replicas.
func replicas(ns, name string) (want, ready int32, err error) {
	d, err := deployment(ns, name)
	if err != nil {
		return 0, 0, err
	}
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return want, d.Status.ReadyReplicas, nil
}

// waitAtZero waits until the Function's Deployment is at zero replicas and
// its last pod is gone.
func waitAtZero(t *testing.T, ns, name string, d time.Duration) {
	t.Helper()
	eventually(t, d, name+" at zero", func() error {
		want, _, err := replicas(ns, name)
		if err != nil {
			return err
		}
		pods, err := platform.cluster.Clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: functionLabel + "=" + name})
		if err != nil {
			return err
		}
		if want != 0 || len(pods.Items) != 0 {
			return fmt.Errorf("%d replicas wanted, %d pods", want, len(pods.Items))
		}
		return nil
	})
}

// TestScaleToZeroAndBack runs a Function with minReplicas 0: it goes to
// zero after its cooldown, one published event brings a pod up through
// kfn's scaler (external-push) and KEDA and is delivered, and an HTTP
// request for it at zero is held by the gateway and answered.
func TestScaleToZeroAndBack(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "zero")
	apply(t, ns, scalingFunction("zero", 0, 2, 15, 10, 0))
	apply(t, ns, subscription(ns, "zero", "zero", "order.zero.v1", nil))
	waitSubscriptionReady(t, ns, "zero")

	// KEDA scales to zero from its polling loop (every 30 s by default)
	// once the cooldown has passed without activity.
	t.Run("goes to zero after the cooldown", func(t *testing.T) {
		waitAtZero(t, ns, "zero", 3*time.Minute)
	})

	t.Run("one event brings a pod up and is delivered", func(t *testing.T) {
		id := ns + "-wake"
		start := time.Now()
		publish(t, "order.zero.v1", "shop", id, `{"wake": true}`)
		var podReady time.Duration
		eventually(t, 2*time.Minute, "a ready pod", func() error {
			_, ready, err := replicas(ns, "zero")
			if err == nil && ready < 1 {
				err = fmt.Errorf("%d ready", ready)
			}
			if err == nil && podReady == 0 {
				podReady = time.Since(start)
			}
			return err
		})
		require.NoError(t, platform.recorder.waitAll(t.Context(), "zero", []string{id}, time.Minute))
		delivered := time.Since(start)
		t.Logf("cold start by event: published -> pod ready %s -> delivered %s", podReady.Round(time.Millisecond), delivered.Round(time.Millisecond))
		coldStarts.add("event", podReady, delivered)
		// Once: by the time a second event, published after the first was
		// reported, is reported too, the first was reported once (the
		// dispatcher reaches the woken pod as soon as its host answers its
		// ready path, before the kubelet marks it ready: no attempt is
		// spent on a pod that does not listen yet).
		publish(t, "order.zero.v1", "shop", id+"-after", `{"wake": false}`)
		require.NoError(t, platform.recorder.waitAll(t.Context(), "zero", []string{id + "-after"}, time.Minute))
		assert.Equal(t, 1, platform.recorder.counts("zero")[id], "the event that woke the Function was delivered once")
	})

	t.Run("goes back to zero", func(t *testing.T) {
		waitAtZero(t, ns, "zero", 3*time.Minute)
	})

	t.Run("a request through the gateway at zero is held and answered", func(t *testing.T) {
		url := fmt.Sprintf("%s/%s/zero/?id=%s-http", platform.gateway, ns, ns)
		token := invoker(t, ns)
		code, body, err := get(url)
		require.NoError(t, err)
		require.Equal(t, 401, code, "the gateway asks who calls: %s", body)
		start := time.Now()
		code, body, err = getAs(url, token)
		elapsed := time.Since(start)
		require.NoError(t, err)
		assert.Equal(t, 200, code, body)
		assert.Equal(t, "handled "+ns+"-http", body, "held until the pod answers, never refused")
		assert.Equal(t, 1, platform.recorder.counts("zero")[ns+"-http"], "the request was handled once")
		t.Logf("cold start by HTTP through the gateway: %s", elapsed.Round(time.Millisecond))
		coldStarts.add("http", 0, elapsed)
	})

	t.Run("an APIRule exposes it on the external Service, to whoever calls", func(t *testing.T) {
		exposeByAPIRule(t, ns, "zero")
	})
}

// exposeByAPIRule applies Kyma's tutorial APIRule for Function name of ns
// (noAuth, GET and POST) on host <name>-<ns>.example.com, awaits its
// status Ready, and calls the Function through the event bridge's
// external Service with that Host and no credentials: answered; a method
// the rule lacks is 404; a jwt rule wants its issuer's token; a rule
// whose Service is not a Function's reaches that Service's port.
func exposeByAPIRule(t *testing.T, ns, name string) {
	t.Helper()
	host := name + "-" + ns + ".example.com"
	// A jwt rule's issuer: its key set served by a Function of the
	// namespace, which the event bridge fetches as it reaches sinks.
	issuer := jwttest.NewIssuer(t)
	apply(t, ns, inlineFunction("jwks", "python312", nil, "def main(event, context):\n    return r'''"+string(issuer.JWKSBody())+"'''\n"))
	waitRunning(t, ns, "jwks", 3*time.Minute)
	// A Service that is not a Function's, on its own port: the jwks
	// Function's pods, which the APIRule's /keys reaches through it.
	apply(t, ns, `apiVersion: v1
kind: Service
metadata:
  name: keys
spec:
  selector: {serverless.kyma-project.io/function-name: jwks}
  ports: [{name: web, port: 8081, targetPort: 8080}]
`)
	apply(t, ns, fmt.Sprintf(`apiVersion: gateway.kyma-project.io/v2
kind: APIRule
metadata:
  name: %[1]s
spec:
  hosts: [%[2]s]
  service: {name: %[1]s, port: 80}
  rules:
    - path: /secret
      methods: [GET]
      jwt:
        authentications:
          - issuer: %[3]s
            jwksUri: http://jwks.%[4]s.svc.cluster.local/
    - path: /keys
      methods: [GET]
      noAuth: true
      service: {name: keys, port: 8081}
    - path: /*
      methods: [GET, POST]
      noAuth: true
`, name, host, issuer.URL(), ns))
	eventually(t, time.Minute, "the APIRule Ready", func() error {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("gateway.kyma-project.io/v2")
		u.SetKind("APIRule")
		if err := platform.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			return err
		}
		if st, _, _ := unstructured.NestedString(u.Object, "status", "state"); st != "Ready" {
			desc, _, _ := unstructured.NestedString(u.Object, "status", "description")
			return fmt.Errorf("state %q: %s", st, desc)
		}
		return nil
	})
	base, err := serviceURL(t.Context(), platform.cluster, "kfn-gateway-external")
	require.NoError(t, err)
	callAs := func(method, path, token string) (int, string, error) {
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, nil)
		if err != nil {
			return 0, "", err
		}
		req.Host = host
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	call := func(method string) (int, string, error) { return callAs(method, "/?id="+ns+"-exposed", "") }
	eventually(t, time.Minute, "the Function answers on the APIRule's host", func() error {
		code, body, err := call(http.MethodGet)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%d %s", code, body)
		}
		if err == nil && body != "handled "+ns+"-exposed" {
			err = fmt.Errorf("answered %q", body)
		}
		return err
	})
	code, body, err := call(http.MethodDelete)
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, code, "a method the rule lacks: %s", body)

	code, body, err = callAs(http.MethodGet, "/secret?id="+ns+"-secret", "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, code, "the jwt rule, no token: %s", body)
	code, body, err = callAs(http.MethodGet, "/secret?id="+ns+"-secret", jwttest.NewIssuer(t).Token(nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, code, "another issuer's token: %s", body)
	// The issuer's token, its keys fetched from the jwks Function. The
	// gateway's first fetch may outlast its 5 s on a loaded node (the
	// Function's first request); the next is tried 30 s later at the
	// earliest (jwtrule.KeySetConfig.MinRefetch), meanwhile 401.
	eventually(t, 2*time.Minute, "the issuer's token accepted, its keys fetched from the jwks Function", func() error {
		code, body, err := callAs(http.MethodGet, "/secret?id="+ns+"-secret", issuer.Token(nil))
		switch {
		case err != nil:
			return err
		case code != http.StatusOK:
			return fmt.Errorf("%d %s", code, body)
		case body != "handled "+ns+"-secret":
			return fmt.Errorf("answered %q", body)
		}
		return nil
	})

	code, body, err = callAs(http.MethodGet, "/keys", "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code, "port 8081 of Service keys, not a Function's: %s", body)
	assert.Contains(t, body, `"keys"`, "the key set its pods serve")
}

// TestBacklogScalesOutAndBack publishes a burst of events to a slow
// Function that scales to zero, in a namespace whose warm pool keeps two
// standby pods: the backlog takes it above one replica through KEDA's HPA
// (the external metric served by KEDA's metrics API server from kfn's
// scaler), and each replica the HPA adds is served by a standby pod the
// pool gives it at once, until the Deployment's own pod is ready in its
// place; every event is delivered, once, and the replicas go back in.
func TestBacklogScalesOutAndBack(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "backlog")
	setPoolSize(t, ns, 2)
	// One pod takes 5 events/s (10 in flight, 2 s each): the burst lasts
	// about 30 s on one pod, well past the HPA's first scale-out (its sync
	// period is 5 s here), so the added pods find events left to take.
	apply(t, ns, scalingFunction("slow", 0, 3, 30, 5, 2000))
	apply(t, ns, subscription(ns, "slow", "slow", "order.backlog.v1", map[string]string{"maxInFlightMessages": "10"}))
	waitSubscriptionReady(t, ns, "slow")
	eventually(t, 2*time.Minute, "two started standby pods", func() error {
		pods, err := standbyPods(t, ns)
		if err == nil && len(pods) != 2 {
			err = fmt.Errorf("%d started standby pods", len(pods))
		}
		return err
	})

	given := watchGiven(t, ns, "slow")
	burst := ids(ns, 150)
	for _, id := range burst {
		publish(t, "order.backlog.v1", "shop", id, `{}`)
	}
	var most int32
	t.Run("scales above one replica", func(t *testing.T) {
		eventually(t, 3*time.Minute, "more than one ready replica", func() error {
			_, ready, err := replicas(ns, "slow")
			if err == nil && ready > most {
				most = ready
			}
			if err == nil && ready < 2 {
				err = fmt.Errorf("%d ready replicas", ready)
			}
			return err
		})
	})
	t.Run("delivers every event, once", func(t *testing.T) {
		require.NoError(t, platform.recorder.waitAll(t.Context(), "slow", burst, 5*time.Minute))
		counts := platform.recorder.counts("slow")
		for _, id := range burst {
			assert.Equal(t, 1, counts[id], "event %s handled once", id)
		}
	})
	t.Run("standby pods and the added replicas take a share of the events", func(t *testing.T) {
		pods := platform.recorder.podCounts("slow")
		gave := given()
		t.Logf("events per pod: %v; standby pods given: %v", pods, gave)
		standby := 0
		for pod := range pods {
			if strings.HasPrefix(pod, "kfn-pool-") {
				standby++
			}
		}
		assert.GreaterOrEqual(t, len(pods)-standby, 2, "more than one of the Deployment's own pods handled events")
		// The pool gives a standby pod to the wake from zero and one to
		// each replica the HPA adds, at once. The wake's handles events
		// (the dispatcher delivers to it before any other pod exists);
		// one given to an added replica serves until the Deployment's own
		// pod is ready in its place, which on this machine may be a second
		// or two later: too soon, under load, for its endpoint to reach
		// the dispatcher, so whether it handled events is not asserted.
		assert.GreaterOrEqual(t, len(gave), 2, "standby pods given to the wake and to the replicas the HPA added")
		assert.GreaterOrEqual(t, standby, 1, "a standby pod handled events")
	})
	t.Run("the standby pods go once the Deployment's own pods are ready", func(t *testing.T) {
		eventually(t, 2*time.Minute, "no pod of the pool's serving slow", func() error {
			pods, err := platform.cluster.Clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: poolClaimedByLabel + "=slow"})
			if err == nil && len(pods.Items) != 0 {
				err = fmt.Errorf("%d pods of the pool's still there", len(pods.Items))
			}
			return err
		})
	})
	t.Run("scales back in", func(t *testing.T) {
		eventually(t, 4*time.Minute, "back to one replica or none", func() error {
			want, ready, err := replicas(ns, "slow")
			if err == nil && ready > most {
				most = ready
			}
			if err == nil && (want > 1 || ready > 1) {
				err = fmt.Errorf("%d wanted, %d ready", want, ready)
			}
			return err
		})
		t.Logf("most ready replicas during the burst: %d", most)
	})
}

// watchGiven watches, until the test ends, the pods of ns the pool gives
// Function fn (labelled claimed by it), and returns what tells the names
// of all it saw, sorted: a watch sees a pod the pool gave and took back
// within a second, which a list now and then would miss.
func watchGiven(t *testing.T, ns, fn string) func() []string {
	t.Helper()
	w, err := platform.cluster.Clientset.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{LabelSelector: poolClaimedByLabel + "=" + fn})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	seen := map[string]bool{}
	go func() {
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				mu.Lock()
				seen[pod.Name] = true
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		names := make([]string, 0, len(seen))
		for name := range seen {
			names = append(names, name)
		}
		slices.Sort(names)
		return names
	}
}
