package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingFunction is a Node.js Function that reports each event's id to
// the recorder as fn, answers status, and, when emitType is set, emits an
// event of that type with id "<id>-next".
func recordingFunction(name, fn string, status int, emitType string) string {
	emit := ""
	if emitType != "" {
		emit = fmt.Sprintf(`await event.emitCloudEvent(%q, "shop", event.data, { id: event["ce-id"] + "-next" });`, emitType)
	}
	return inlineFunction(name, "nodejs22", recorderEnv(), fmt.Sprintf(`
module.exports = {
  main: async function (event, context) {
    await fetch(process.env.RECORDER_URL + "/record", {
      method: "POST",
      body: JSON.stringify({ fn: %q, id: event["ce-id"] || "", pod: require("node:os").hostname() }),
    });
    %s
    event.extensions.response.status(%d);
    return "done";
  }
}
`, fn, emit, status))
}

// subscription subscribes a Function (its Service in namespace ns) to one
// event type from source "shop", with extra spec.config keys.
func subscription(ns, name, sink, typ string, config map[string]string) string {
	var cfg strings.Builder
	if len(config) > 0 {
		cfg.WriteString("  config:\n")
		for k, v := range config {
			fmt.Fprintf(&cfg, "    %s: %q\n", k, v)
		}
	}
	return fmt.Sprintf(`
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata:
  name: %s
spec:
  sink: http://%s.%s.svc.cluster.local
  source: shop
  types:
    - %s
%s`, name, sink, ns, typ, cfg.String())
}

// waitSubscriptionReady waits until the Subscription's status is ready.
func waitSubscriptionReady(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, time.Minute, "subscription "+name+" ready", func() error {
		out, err := platform.cluster.Clientset.Discovery().RESTClient().Get().
			AbsPath("/apis/eventing.kyma-project.io/v1alpha2/namespaces", ns, "subscriptions", name).DoRaw(context.Background())
		if err != nil {
			return err
		}
		var s struct {
			Status struct {
				Ready bool `json:"ready"`
			} `json:"status"`
		}
		if err := json.Unmarshal(out, &s); err != nil {
			return err
		}
		if !s.Status.Ready {
			return fmt.Errorf("not ready: %s", out)
		}
		return nil
	})
}

// TestEventsReachPodsChainAndDeadLetter publishes CloudEvents to kfn's
// publisher Service: a Subscription brings each to a function pod, whose
// emitCloudEvent reaches a second function (kfn trace shows the chain); a
// failing function's events end in the dead-letter stream, where `kfn dlq`
// lists them; once the function is fixed, kfn view's page (in a real
// Chromium) shows the chain and replays one, and `kfn dlq` the rest.
func TestEventsReachPodsChainAndDeadLetter(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "events")
	apply(t, ns, recordingFunction("first", "first", 200, "order.checked.v1"))
	apply(t, ns, recordingFunction("second", "second", 200, ""))
	apply(t, ns, recordingFunction("broken", "broken", 500, ""))
	apply(t, ns, subscription(ns, "first", "first", "order.created.v1", nil))
	apply(t, ns, subscription(ns, "second", "second", "order.checked.v1", nil))
	apply(t, ns, subscription(ns, "broken", "broken", "order.broken.v1",
		map[string]string{"maxDeliver": "2", "backoffInitial": "100ms", "backoffMax": "200ms"}))
	for _, name := range []string{"first", "second", "broken"} {
		waitRunning(t, ns, name, 3*time.Minute)
		waitSubscriptionReady(t, ns, name)
	}

	created := ids(ns+"-created", 20)
	t.Run("a published event reaches the subscribed function's pod", func(t *testing.T) {
		for _, id := range created {
			publish(t, "order.created.v1", "shop", id, `{"n": 1}`)
		}
		require.NoError(t, platform.recorder.waitAll(t.Context(), "first", created, 2*time.Minute))
	})
	t.Run("emitCloudEvent chains to a second function", func(t *testing.T) {
		next := make([]string, len(created))
		for i, id := range created {
			next[i] = id + "-next"
		}
		require.NoError(t, platform.recorder.waitAll(t.Context(), "second", next, 2*time.Minute))
	})
	t.Run("kfn trace follows an event through the chain", func(t *testing.T) {
		// The event bridge's record of the namespace's paths, through a
		// port-forward with the administrator's credentials: the event's
		// delivery to the first function and, in the same chain (one
		// trace), the event it emitted and that one's delivery.
		id := created[0]
		eventually(t, time.Minute, "the path of "+id, func() error {
			out, err := kfn(t, "trace", id, "-n", ns)
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			for _, want := range []string{
				id + " (order.created.v1 from shop",
				"-> " + ns + "/first at " + ns + "/first: delivered after 1 attempt",
				id + "-next (order.checked.v1 from shop",
				"-> " + ns + "/second at " + ns + "/second: delivered",
			} {
				if !strings.Contains(out, want) {
					return fmt.Errorf("no %q in:\n%s", want, out)
				}
			}
			return nil
		})
	})

	broken := ids(ns+"-broken", 3)
	t.Run("a failing function's events reach the dead-letter stream", func(t *testing.T) {
		for _, id := range broken {
			publish(t, "order.broken.v1", "shop", id, `{}`)
		}
		eventually(t, 2*time.Minute, "dead letters listed by kfn dlq", func() error {
			out, err := kfn(t, "dlq", "list", "--subscription", "broken", "-n", ns)
			if err != nil {
				return err
			}
			for _, id := range broken {
				if !strings.Contains(out, id) {
					return fmt.Errorf("%s not listed:\n%s", id, out)
				}
			}
			return nil
		})
		counts := platform.recorder.counts("broken")
		for _, id := range broken {
			assert.Equal(t, 2, counts[id], "event %s was attempted maxDeliver times", id)
		}
	})
	t.Run("the function is fixed", func(t *testing.T) {
		apply(t, ns, recordingFunction("broken", "fixed", 200, ""))
		waitRunning(t, ns, "broken", 3*time.Minute)
		eventually(t, 2*time.Minute, "the fixed version serves", func() error {
			code, _, err := get(functionURL(t, ns, "broken"))
			if err == nil && code != 200 {
				err = fmt.Errorf("status %d", code)
			}
			return err
		})
	})
	t.Run("kfn view shows the chain and replays a dead letter", func(t *testing.T) {
		checkClusterView(t, ns, created[0], broken[0])
	})
	t.Run("kfn dlq replays them to the fixed function", func(t *testing.T) {
		out, err := kfn(t, "dlq", "replay", "--all", "--subscription", "broken", "-n", ns)
		require.NoError(t, err, out)
		require.NoError(t, platform.recorder.waitAll(t.Context(), "fixed", broken, 2*time.Minute))
	})
}

// kfn runs bin/kfn against the cluster (the administrator's kubeconfig):
// its commands reach kfn's pods through port-forwards, as a user's do.
func kfn(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return kfnAs(t, platform.cluster.Config.KubeconfigPath(), args...)
}

// kfnAs is kfn as the user of kubeconfig.
func kfnAs(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(platform.root, "bin", "kfn"),
		append(args, "--kubeconfig", kubeconfig)...)
	cmd.Env = append(os.Environ(), "KFN_ADDR=", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kfn %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
