package cluster

import (
	"fmt"
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
