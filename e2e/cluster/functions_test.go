package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// A Kyma user's manifests, as they wrote them: inline sources, no kfn keys.
const (
	kymaNode = `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: hello-node
spec:
  runtime: nodejs22
  source:
    inline:
      source: |
        module.exports = {
          main: async function (event, context) {
            return { hello: "node", version: process.versions.node.split(".")[0], query: event.extensions.request.query.q || null, nodeEnv: process.env.NODE_ENV };
          }
        }
`
	kymaPython = `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: hello-python
spec:
  runtime: python312
  env:
    - name: GREETING
      value: hi
  source:
    inline:
      source: |
        import os
        def main(event, context):
            return os.environ["GREETING"] + " from " + context["function-name"]
`
)

func TestKymaFunctionsRunAndAnswerThroughTheirService(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "kyma")
	apply(t, ns, kymaNode)
	apply(t, ns, kymaPython)

	for name, want := range map[string]string{
		"hello-node":   `{"hello":"node","version":"22","query":"x","nodeEnv":""}`, // NODE_ENV empty, as Kyma's images
		"hello-python": "hi from hello-python",
	} {
		t.Run(name, func(t *testing.T) {
			fn := waitRunning(t, ns, name, 3*time.Minute)
			t.Run("reaches ConfigurationReady and Running with Kyma's reasons", func(t *testing.T) {
				assert.Equal(t, string(serverlessv1alpha2.ReasonFunctionSpecValidated), condition(fn, serverlessv1alpha2.ConditionConfigurationReady).Reason)
				assert.Equal(t, string(serverlessv1alpha2.ReasonDeploymentReady), condition(fn, serverlessv1alpha2.ConditionRunning).Reason)
			})
			t.Run("its Service answers the handler's output", func(t *testing.T) {
				url := functionURL(t, ns, name) + "/?q=x"
				waitAnswer(t, url, want)
			})
			t.Run("its pod was admitted under restricted", func(t *testing.T) {
				pods, err := platform.cluster.Clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: functionLabel + "=" + name})
				require.NoError(t, err)
				require.NotEmpty(t, pods.Items)
				for _, p := range pods.Items {
					sc := p.Spec.SecurityContext
					require.NotNil(t, sc)
					assert.True(t, sc.RunAsNonRoot != nil && *sc.RunAsNonRoot, "runAsNonRoot")
				}
			})
		})
	}
}

// TestSourceUpdateRollsWithoutAFailedRequest changes a running Function's
// source while a client calls it without pause: the Deployment rolls to
// the new version and the client sees no failed request.
func TestSourceUpdateRollsWithoutAFailedRequest(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "roll")
	manifest := func(v string) string {
		return fmt.Sprintf(`
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: roll
spec:
  runtime: nodejs22
  source:
    inline:
      source: |
        module.exports = { main: async () => "%s" }
`, v)
	}
	apply(t, ns, manifest("v1"))
	waitRunning(t, ns, "roll", 3*time.Minute)
	url := functionURL(t, ns, "roll")
	eventually(t, 30*time.Second, "v1 answers", func() error {
		_, body, err := get(url)
		if err == nil && body != "v1" {
			err = fmt.Errorf("got %q", body)
		}
		return err
	})

	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		answers  = map[string]int{}
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			code, body, err := get(url)
			mu.Lock()
			switch {
			case err != nil:
				failures = append(failures, err.Error())
			case code != 200:
				failures = append(failures, fmt.Sprintf("%d %s", code, body))
			default:
				answers[body]++
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()

	start := time.Now()
	apply(t, ns, manifest("v2"))
	eventually(t, 3*time.Minute, "the rollout completes", func() error {
		d, err := deployment(ns, "roll")
		if err != nil {
			return err
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != 1 || d.Status.Replicas != 1 || d.Status.AvailableReplicas != 1 {
			return fmt.Errorf("deployment status %+v", d.Status)
		}
		mu.Lock()
		defer mu.Unlock()
		if answers["v2"] == 0 {
			return fmt.Errorf("no v2 answer yet (%v)", answers)
		}
		return nil
	})
	rollout := time.Since(start)
	// Requests go on until the old pod is gone: its endpoint removal and
	// its shutdown are where a rollout drops requests.
	eventually(t, 3*time.Minute, "the old pod is gone", func() error {
		pods, err := platform.cluster.Clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: functionLabel + "=roll"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})
	stop.Store(true)
	wg.Wait()
	t.Logf("rollout v1 -> v2 in %s; answers %v", rollout.Round(100*time.Millisecond), answers)
	assert.Empty(t, failures, "no request failed during the rollout")
	assert.Positive(t, answers["v1"])
	assert.Positive(t, answers["v2"])
}

// TestKymaLibrariesInTheImages runs Kyma handlers that use the libraries
// Kyma's runtime images provide without declaring them: axios,
// cloudevents, express and @opentelemetry/api on Node.js; requests, bottle
// and prometheus_client on Python (Debian's, in the image built here without
// PyPI; cloudevents is not packaged by Debian).
func TestKymaLibrariesInTheImages(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "libs")
	apply(t, ns, `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: node-libs
spec:
  runtime: nodejs22
  source:
    inline:
      source: |
        const axios = require("axios");
        const { CloudEvent } = require("cloudevents");
        const express = require("express");
        const { trace } = require("@opentelemetry/api");
        module.exports = {
          main: () => [typeof axios.get, new CloudEvent({ type: "a.v1", source: "s" }).type, typeof express.Router, typeof trace.getTracer].join(" ")
        }
---
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: python-libs
spec:
  runtime: python312
  source:
    inline:
      source: |
        import bottle, prometheus_client, requests
        def main(event, context):
            return " ".join([bottle.__name__, prometheus_client.__name__, requests.__name__])
`)
	for name, want := range map[string]string{
		"node-libs":   "function a.v1 function function",
		"python-libs": "bottle prometheus_client requests",
	} {
		waitRunning(t, ns, name, 3*time.Minute)
		url := functionURL(t, ns, name)
		eventually(t, 30*time.Second, name+" answers", func() error {
			code, body, err := get(url)
			if err == nil && (code != 200 || strings.TrimSpace(body) != want) {
				err = fmt.Errorf("%d %q, want %q", code, body, want)
			}
			return err
		})
	}
}

// waitAnswer waits until url answers 200 with want (spaces trimmed).
func waitAnswer(t *testing.T, url, want string) {
	t.Helper()
	eventually(t, 30*time.Second, "answer", func() error {
		code, body, err := get(url)
		if err != nil {
			return err
		}
		if code != 200 || strings.TrimSpace(body) != want {
			return fmt.Errorf("%d %q, want 200 %q", code, body, want)
		}
		return nil
	})
}

// tracedPython is Kyma's tracing test function (its tests'
// BasicTracingNodeFunction) for python312: the handler makes a request of
// its own with requests, to a server it runs on the pod's loopback that
// answers with the trace headers it was sent.
const tracedPython = `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: traced-python
spec:
  runtime: python312
  source:
    inline:
      source: |
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, HTTPServer

        import requests

        TRACE = ('traceparent', 'x-b3-traceid', 'x-b3-spanid', 'x-b3-sampled')

        class Echo(BaseHTTPRequestHandler):
            def do_GET(self):
                body = json.dumps({k.lower(): v for k, v in self.headers.items() if k.lower() in TRACE}).encode()
                self.send_response(200)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        echo = HTTPServer(('127.0.0.1', 0), Echo)
        threading.Thread(target=echo.serve_forever, daemon=True).start()

        def main(event, context):
            if event['extensions']['request'].query.get('zero'):
                return 0  # bottle's _cast: an empty 200
            return requests.get('http://127.0.0.1:%d/' % echo.server_port, timeout=10).json()
`

// TestPythonHandlersRequestsCarryTheTraceOnTheNode runs Kyma's tracing test
// (runtimes TestPythonHandlersRequestsCarryTheTrace) in kfn's python312
// image: the handler's own request, made with requests, carries the
// caller's trace in W3C and B3 headers of one span of its own, sampled,
// without a trace collector.
func TestPythonHandlersRequestsCarryTheTraceOnTheNode(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "traced")
	apply(t, ns, tracedPython)
	waitRunning(t, ns, "traced-python", 3*time.Minute)
	url := functionURL(t, ns, "traced-python")
	const caller, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	var sent map[string]string
	eventually(t, 30*time.Second, "the handler answers what its request carried", func() error {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Traceparent", "00-"+caller+"-"+parent+"-01")
		resp, err := httpClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		return json.Unmarshal(body, &sent)
	})
	tp := strings.Split(sent["traceparent"], "-")
	require.Len(t, tp, 4, "the handler's request carried a traceparent: %v", sent)
	assert.Equal(t, caller, tp[1], "the caller's trace goes on")
	assert.NotEqual(t, parent, tp[2], "from a span of the call's")
	assert.Equal(t, "01", tp[3], "sampled")
	assert.Equal(t, caller, sent["x-b3-traceid"], "B3 names the same trace")
	assert.Equal(t, tp[2], sent["x-b3-spanid"], "and the same span")
	assert.Equal(t, "1", sent["x-b3-sampled"])

	code, body, err := get(url + "/?zero=1")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	assert.Empty(t, body, "0 returned is an empty 200, as bottle makes it")
}

// expressNode answers as Kyma's nodejs24 (Express 5, body-parser
// extended) would: a form as qs reads it, a Content-Type set with
// setResponseHeader with its charset, req.params.path as the catch-all
// route's.
const expressNode = `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: express-node
spec:
  runtime: nodejs24
  source:
    inline:
      source: |
        module.exports = {
          main: function (event, context) {
            const req = event.extensions.request;
            if (req.method === 'POST') return { data: event.data, own: event.data.hasOwnProperty('a') };
            if (req.path === '/ctype') {
              event.setResponseHeader('Content-Type', 'text/plain');
              return 'hi';
            }
            return { params: req.params.path, query: req.query };
          }
        }
`

// TestNodeImageAnswersAsExpressOnTheNode runs kfn's nodejs24 image on the
// real node and checks what runtimes TestContract checks of the host for
// Kyma's Express: the image carries the host that answers so.
func TestNodeImageAnswersAsExpressOnTheNode(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "express")
	apply(t, ns, expressNode)
	waitRunning(t, ns, "express-node", 3*time.Minute)
	url := functionURL(t, ns, "express-node")
	waitAnswer(t, url+"/params/b+c/?a%5Bb%5D=1", `{"params":["","params","b+c",""],"query":{"a[b]":"1"}}`)

	resp, err := httpClient.Post(url, "application/x-www-form-urlencoded", strings.NewReader("a[b][c]=1&x[0]=p&x[1]=q&__proto__[y]=1"))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.JSONEq(t, `{"data":{"a":{"b":{"c":"1"}},"x":["p","q"]},"own":true}`, string(body))

	resp, err = httpClient.Get(url + "/ctype")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "hi", string(body))
	assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
}
