package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// attributesFunction is a Node.js Function that reports, as the id of its
// record, the attributes Kyma's eventing documentation and this scenario
// look at: ce-type, ce-originaltype and ce-myext.
func attributesFunction(name string) string {
	return inlineFunction(name, "nodejs22", recorderEnv(), fmt.Sprintf(`
module.exports = {
  main: async function (event, context) {
    const id = JSON.stringify([event["ce-type"], event["ce-originaltype"] || null, event["ce-myext"] || null]);
    await fetch(process.env.RECORDER_URL + "/record", {
      method: "POST",
      body: JSON.stringify({ fn: %q, id, pod: require("node:os").hostname() }),
    });
    return "done";
  }
}
`, name))
}

// TestKymaTypeCleanupAndAttributesOnTheCluster follows Kyma's type-cleanup
// tutorial on the node: a Subscription to order.payment*success.v1 (a
// character Kyma cleans) is stored and ready with cleanType
// order.paymentsuccess.v1; the tutorial's binary curl reaches the
// function's pod with the type as published and ce-originaltype, as
// Kyma's publisher and dispatcher deliver it; a structured event whose
// extension holds %41, a space, quotes and non-ASCII travels
// percent-encoded and reaches the handler as published. About 30 s on the
// shared install (one Node.js pod).
func TestKymaTypeCleanupAndAttributesOnTheCluster(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "cleanup")
	apply(t, ns, attributesFunction("lastorder"))
	apply(t, ns, `
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata:
  name: lastorder-payment-sub
spec:
  sink: 'http://lastorder.`+ns+`.svc.cluster.local'
  source: myapp
  types:
    - order.payment*success.v1
`)
	waitRunning(t, ns, "lastorder", 3*time.Minute)
	waitSubscriptionReady(t, ns, "lastorder-payment-sub")

	t.Run("status.types has the cleaned type", func(t *testing.T) {
		out, err := platform.cluster.Clientset.Discovery().RESTClient().Get().
			AbsPath("/apis/eventing.kyma-project.io/v1alpha2/namespaces", ns, "subscriptions", "lastorder-payment-sub").DoRaw(context.Background())
		require.NoError(t, err)
		var s struct {
			Status struct {
				Types []map[string]string `json:"types"`
			} `json:"status"`
		}
		require.NoError(t, json.Unmarshal(out, &s))
		require.Equal(t, []map[string]string{{"originalType": "order.payment*success.v1", "cleanType": "order.paymentsuccess.v1"}}, s.Status.Types)
	})

	post := func(t *testing.T, header map[string]string, body string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, platform.publisher+"/publish", bytes.NewBufferString(body))
		require.NoError(t, err)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := httpClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
	}
	t.Run("the tutorial's curl reaches the function with the type as published", func(t *testing.T) {
		post(t, map[string]string{
			"ce-specversion": "1.0", "ce-type": "order.payment*success.v1", "ce-source": "myapp", "ce-eventtypeversion": "v1",
			"ce-id": "e4bcc616-c3a9-4840-9321-763aa23851fc", "content-type": "application/json",
		}, `{"orderCode":"3211213", "orderAmount":"1250"}`)
		want := `["order.payment*success.v1","order.payment*success.v1",null]`
		require.NoError(t, platform.recorder.waitAll(t.Context(), "lastorder", []string{want}, 2*time.Minute))
	})
	t.Run("an extension the binding percent-encodes reaches the handler as published", func(t *testing.T) {
		body, err := json.Marshal(map[string]any{
			"specversion": "1.0", "type": "order.payment*success.v1", "source": "myapp", "id": ns + "-ext",
			"myext": `%41 "quoted" café €`, "data": map[string]int{"n": 1},
		})
		require.NoError(t, err)
		post(t, map[string]string{"content-type": "application/cloudevents+json"}, string(body))
		want := `["order.payment*success.v1","order.payment*success.v1","%41 \"quoted\" café €"]`
		require.NoError(t, platform.recorder.waitAll(t.Context(), "lastorder", []string{want}, 2*time.Minute))
	})
}
