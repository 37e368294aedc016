package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Functions on Kyma's newest runtimes, written as Kyma's documentation
// writes them: nodejs26's main(req, res) and python314's main() with Flask,
// both with the sdk module, and the libraries Kyma's images provide used
// without declaring them (axios, requests).
const (
	kymaNode26 = `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: hello-node26
spec:
  runtime: nodejs26
  source:
    inline:
      source: |
        const { getFunctionName } = require('sdk');
        module.exports = {
          main: function (req, res) {
            res.json({ hello: getFunctionName(), version: process.versions.node.split(".")[0], query: req.query.q || null });
          }
        }
`
	kymaPython314 = `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: hello-python314
spec:
  runtime: python314
  env:
    - name: GREETING
      value: hi
  source:
    inline:
      source: |
        import os
        import sys
        import flask
        import sdk
        def main():
            v = sys.version_info
            return f"{os.environ['GREETING']} from {sdk.get_function_name()} on {v.major}.{v.minor} q={flask.request.args.get('q')}"
`
)

// pythonForwarder is a python314 Function that records each event with
// requests and emits it on as emitType with id "<id>-next", through
// sdk.emit_cloud_event.
func pythonForwarder(name, emitType string) string {
	return inlineFunction(name, "python314", recorderEnv(), fmt.Sprintf(`
import os
import socket
import requests
import sdk
def main():
    event = sdk.get_cloud_event()
    requests.post(os.environ["RECORDER_URL"] + "/record",
                  json={"fn": %q, "id": event.get_id(), "pod": socket.gethostname()}, timeout=10).raise_for_status()
    sdk.emit_cloud_event(%q, "shop", event.get_data(), {"id": event.get_id() + "-next"})
    return ""
`, name, emitType))
}

// nodeRecorder is a nodejs26 Function that records each event's id with
// axios.
func nodeRecorder(name string) string {
	return inlineFunction(name, "nodejs26", recorderEnv(), fmt.Sprintf(`
const axios = require('axios');
const { getCloudEvent } = require('sdk');
module.exports = {
  main: async function (req, res) {
    const ce = getCloudEvent(req);
    await axios.post(process.env.RECORDER_URL + "/record", { fn: %q, id: ce ? ce.id : "", pod: require("node:os").hostname() });
    res.status(200).send("done");
  }
}
`, name))
}

// TestKymaNewestRuntimes runs Kyma's nodejs26 and python314 Functions on
// the node, on kfn's images: they answer through their Services on Node.js
// 26 and Python 3.14, and an event chains from a python314 Function
// (get_cloud_event, emit_cloud_event) to a nodejs26 one (getCloudEvent)
// through the event bridge.
func TestKymaNewestRuntimes(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "newest")
	apply(t, ns, kymaNode26)
	apply(t, ns, kymaPython314)
	apply(t, ns, pythonForwarder("py-first", "order.forwarded.v1"))
	apply(t, ns, nodeRecorder("node-second"))
	apply(t, ns, subscription(ns, "py-first", "py-first", "order.placed.v1", nil))
	apply(t, ns, subscription(ns, "node-second", "node-second", "order.forwarded.v1", nil))

	for name, want := range map[string]string{
		"hello-node26":    `{"hello":"hello-node26","version":"26","query":"x"}`,
		"hello-python314": "hi from hello-python314 on 3.14 q=x",
	} {
		t.Run(name+" answers through its Service", func(t *testing.T) {
			waitRunning(t, ns, name, 3*time.Minute)
			url := functionURL(t, ns, name) + "/?q=x"
			waitAnswer(t, url, want)
		})
	}

	t.Run("an event chains from python314 to nodejs26 through the sdk", func(t *testing.T) {
		for _, name := range []string{"py-first", "node-second"} {
			waitRunning(t, ns, name, 3*time.Minute)
			waitSubscriptionReady(t, ns, name)
		}
		placed := ids(ns+"-placed", 10)
		for _, id := range placed {
			publish(t, "order.placed.v1", "shop", id, `{"n": 1}`)
		}
		require.NoError(t, platform.recorder.waitAll(t.Context(), "py-first", placed, 2*time.Minute))
		next := make([]string, len(placed))
		for i, id := range placed {
			next[i] = id + "-next"
		}
		require.NoError(t, platform.recorder.waitAll(t.Context(), "node-second", next, 2*time.Minute))
	})
}
