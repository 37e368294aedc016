package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The source the shared install keeps for the namespace bankNamespace
// (eventbridge.publisher.reservedSources), for TestSendersOnTheRealNode.
const (
	bankSource    = "kfn-e2e-bank"
	bankNamespace = "e2e-bank"
)

// reserveBankSource adds the reservation of bankSource to the install's
// values.
func reserveBankSource(vals map[string]any) {
	eb, _ := vals["eventbridge"].(map[string]any)
	if eb == nil {
		eb = map[string]any{}
		vals["eventbridge"] = eb
	}
	pub, _ := eb["publisher"].(map[string]any)
	if pub == nil {
		pub = map[string]any{}
		eb["publisher"] = pub
	}
	pub["reservedSources"] = []any{map[string]any{"source": bankSource, "namespaces": []any{bankNamespace}}}
}

// tellerFunction is a Function that, for each event it gets, emits an
// account.opened.v1 event of bankSource (id "<id>-opened") and reports to
// the recorder as fn "<id>-emitted" or "<id>-refused-<status>".
func tellerFunction(fn string) string {
	return inlineFunction("teller", "nodejs22", recorderEnv(), fmt.Sprintf(`
module.exports = {
  main: async function (event, context) {
    let result = event["ce-id"] + "-emitted";
    try {
      await event.emitCloudEvent("account.opened.v1", %q, {}, { id: event["ce-id"] + "-opened" });
    } catch (err) {
      result = event["ce-id"] + "-refused-" + (err.response ? err.response.status : err.message);
    }
    await fetch(process.env.RECORDER_URL + "/record", {
      method: "POST",
      body: JSON.stringify({ fn: %q, id: result, pod: require("node:os").hostname() }),
    });
    return "done";
  }
}
`, bankSource, fn))
}

// auditorFunction reports each event it gets as fn "<id>@<sender
// namespace>".
func auditorFunction(fn string) string {
	return inlineFunction("auditor", "nodejs22", recorderEnv(), fmt.Sprintf(`
module.exports = {
  main: async function (event, context) {
    await fetch(process.env.RECORDER_URL + "/record", {
      method: "POST",
      body: JSON.stringify({ fn: %q, id: event["ce-id"] + "@" + (event["ce-kfnsendernamespace"] || "nobody"), pod: require("node:os").hostname() }),
    });
    return "done";
  }
}
`, fn))
}

// TestSendersOnTheRealNode runs a teller Function in the namespace the
// install reserves bankSource for and one in another namespace, each
// emitting events of bankSource through its host (which sends the pod's
// ServiceAccount token of audience kfn): the owner's are delivered to an
// auditor with kfnsendernamespace naming the owner's namespace; the
// other's are refused (403) by the publisher and reach nobody.
func TestSendersOnTheRealNode(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ctx := context.Background()
	bank := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bankNamespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	require.NoError(t, platform.client.Create(ctx, bank))
	t.Cleanup(func() { _ = platform.client.Delete(context.Background(), bank) })
	mallory := namespace(t, "mallory-id")
	run := suffix()
	for ns, typ := range map[string]string{bankNamespace: "teller.bank" + run + ".v1", mallory: "teller.mallory" + run + ".v1"} {
		apply(t, ns, tellerFunction("teller-"+ns+run))
		apply(t, ns, subscription(ns, "teller", "teller", typ, nil))
	}
	apply(t, bankNamespace, auditorFunction("auditor"+run))
	apply(t, bankNamespace, fmt.Sprintf(`
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata:
  name: auditor
spec:
  sink: http://auditor.%s.svc.cluster.local
  source: %s
  types:
    - account.opened.v1
`, bankNamespace, bankSource))
	for ns, fns := range map[string][]string{bankNamespace: {"teller", "auditor"}, mallory: {"teller"}} {
		for _, fn := range fns {
			waitRunning(t, ns, fn, 3*time.Minute)
			waitSubscriptionReady(t, ns, fn)
		}
	}

	publish(t, "teller.bank"+run+".v1", "shop", "own"+run, `{}`)
	publish(t, "teller.mallory"+run+".v1", "shop", "theft"+run, `{}`)
	require.NoError(t, platform.recorder.waitAll(t.Context(), "teller-"+bankNamespace+run, []string{"own" + run + "-emitted"}, 2*time.Minute))
	require.NoError(t, platform.recorder.waitAll(t.Context(), "teller-"+mallory+run, []string{"theft" + run + "-refused-403"}, 2*time.Minute),
		"the other namespace's emit is refused")
	require.NoError(t, platform.recorder.waitAll(t.Context(), "auditor"+run, []string{"own" + run + "-opened@" + bankNamespace}, 2*time.Minute),
		"the owner's event names its namespace")
}
