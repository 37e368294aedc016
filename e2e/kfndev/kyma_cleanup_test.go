package kfndev_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// kymaCleanupTutorial is the Function and Subscription of Kyma's tutorial
// "Event name cleanup in Subscriptions" (kyma-project/kyma,
// docs/03-tutorials/00-eventing/evnt-03-type-cleanup.md) as it writes
// them, but for the runtime: nodejs18, which neither Kyma nor kfn serves
// any more, is nodejs24.
const kymaCleanupTutorial = `apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: lastorder
  namespace: default
spec:
  replicas: 1
  resourceConfiguration:
    function:
      profile: S
  runtime: nodejs24
  source:
    inline:
      source: |-
        module.exports = {
          main: async function (event, context) {
            console.log("Received event: ", event.data, ", Event Type: ", event.extensions.request.headers['ce-type']);
            return;
          }
        }
---
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata:
  name: lastorder-payment-sub
  namespace: default
spec:
  sink: 'http://lastorder.default.svc.cluster.local'
  source: myapp
  types:
    - order.payment*success.v1
`

// attributesFunction logs the attributes a Kyma subscriber reads: the
// type, Kyma's originaltype and an extension, as JSON.
const attributesFunction = `apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: attributes
  namespace: default
spec:
  runtime: python312
  source:
    inline:
      source: |-
        import json
        def main(event, context):
            print("attributes " + json.dumps([event.get("ce-type"), event.get("ce-originaltype"), event.get("ce-myext")], ensure_ascii=False), flush=True)
            return ""
---
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata:
  name: attributes
  namespace: default
spec:
  sink: http://attributes.default.svc.cluster.local
  source: myapp
  types:
    - order.payment*success.v1
`

// TestKymaTypeCleanupTutorialInKfnDev follows Kyma's type-cleanup
// tutorial in kfn dev: its Subscription, whose type holds the prohibited
// *, is accepted and shows the cleaned type Kyma's tutorial reads from
// status.types; the tutorial's curl publishes with the original type;
// the function logs the event, with the type as published (what Kyma's
// dispatcher delivers: it reverts the type to the originaltype extension).
// A second subscriber (python312) reads Kyma's originaltype too, and an
// extension holding %41, a space, quotes and non-ASCII as published,
// after the dispatcher's percent-encoding and the host's decoding.
func TestKymaTypeCleanupTutorialInKfnDev(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds and runs kfn dev")
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "lastorder.yaml"), []byte(kymaCleanupTutorial), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "attributes.yaml"), []byte(attributesFunction), 0o644))
	dev := startDev(t, dir)

	var out string
	require.Eventually(t, func() bool {
		var err error
		out, err = dev.kfn("get", "-o", "json")
		if err != nil {
			return false
		}
		var st struct {
			Subscriptions []struct {
				Name       string `json:"name"`
				Ready      bool   `json:"ready"`
				CleanTypes []struct {
					OriginalType string `json:"originalType"`
					CleanType    string `json:"cleanType"`
				} `json:"cleanTypes"`
			} `json:"subscriptions"`
		}
		if json.Unmarshal([]byte(out), &st) != nil || len(st.Subscriptions) != 2 {
			return false
		}
		for _, s := range st.Subscriptions {
			if !s.Ready || len(s.CleanTypes) != 1 || s.CleanTypes[0].OriginalType != "order.payment*success.v1" || s.CleanTypes[0].CleanType != "order.paymentsuccess.v1" {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "the Subscription is accepted and ready, its type cleaned: %s\n%s", out, dev.out)

	// The tutorial's curl, as it writes it.
	req, err := http.NewRequest(http.MethodPost, "http://"+dev.addr+"/publish", strings.NewReader(`{"orderCode":"3211213", "orderAmount":"1250"}`))
	require.NoError(t, err)
	for k, v := range map[string]string{
		"ce-specversion": "1.0", "ce-type": "order.payment*success.v1", "ce-source": "myapp", "ce-eventtypeversion": "v1",
		"ce-id": "e4bcc616-c3a9-4840-9321-763aa23851fc", "content-type": "application/json",
	} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	want := "Received event:  { orderCode: '3211213', orderAmount: '1250' } , Event Type:  order.payment*success.v1"
	require.Eventually(t, func() bool { return strings.Contains(dev.out.String(), want) }, 60*time.Second, 50*time.Millisecond,
		"the function logs the event:\n%s", dev.out)
	want = `attributes ["order.payment*success.v1", "order.payment*success.v1", null]`
	require.Eventually(t, func() bool { return strings.Contains(dev.out.String(), want) }, 60*time.Second, 50*time.Millisecond,
		"a subscriber reads the type as published and Kyma's originaltype:\n%s", dev.out)

	// A structured event whose extension the dispatcher must
	// percent-encode: the python312 handler reads it as published.
	body, err := json.Marshal(map[string]any{
		"specversion": "1.0", "type": "order.payment*success.v1", "source": "myapp", "id": "ext-1",
		"myext": `%41 "quoted" café €`, "data": map[string]int{"n": 1},
	})
	require.NoError(t, err)
	resp, err = http.Post("http://"+dev.addr+"/publish", "application/cloudevents+json", bytes.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	want = `attributes ["order.payment*success.v1", "order.payment*success.v1", "%41 \"quoted\" café €"]`
	require.Eventually(t, func() bool { return strings.Contains(dev.out.String(), want) }, 60*time.Second, 50*time.Millisecond,
		"the handler reads the extension as published:\n%s", dev.out)
}
