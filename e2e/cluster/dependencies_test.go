package cluster

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/test/pkgindex"
)

// registrySecret is the Secret of a Function's namespace whose .npmrc and
// pip.conf the install container uses (the controller's
// -registry-secret-name, the chart's functions.registrySecretName).
const registrySecret = "serverless-package-registry-config"

// installContainer is the init container that installs a Function's
// dependencies (controller/resources.ContainerInstallDeps).
const installContainer = "install-dependencies"

// depsFunction is a Function named name of runtime rt (Node.js or Python)
// with kfn-greet from the test's package index as its inline dependency
// (for Node.js under devDependencies, which Kyma's images install too),
// minReplicas 0 and a cooldown of 15 s: for each event or request it
// reports its id to the recorder and answers kfn-greet's greeting and the
// id. It requires kfn-greet when it loads: without its dependency it
// never becomes ready.
func depsFunction(name, rt string) string {
	var source, deps string
	if strings.HasPrefix(rt, "python") {
		deps = pkgindex.Package + "==" + pkgindex.Version
		source = fmt.Sprintf(`
import json
import os
import socket
import urllib.request
from kfn_greet import greet
def main(event, context):
    id = event.get("ce-id") or event["extensions"]["request"].query.get("id") or ""
    body = json.dumps({"fn": %q, "id": id, "pod": socket.gethostname()}).encode()
    urllib.request.urlopen(urllib.request.Request(os.environ["RECORDER_URL"] + "/record", data=body, method="POST"), timeout=10).close()
    return greet("python") + " " + id
`, name)
	} else {
		deps = fmt.Sprintf(`{"devDependencies":{%q:%q}}`, pkgindex.Package, pkgindex.Version)
		source = fmt.Sprintf(`
const { greet } = require(%q);
module.exports = {
  main: async function (event, context) {
    const id = event["ce-id"] || event.extensions.request.query.id || "";
    await fetch(process.env.RECORDER_URL + "/record", { method: "POST", body: JSON.stringify({ fn: %q, id, pod: require("node:os").hostname() }) });
    return greet("node") + " " + id;
  }
}
`, pkgindex.Package, name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: %s
spec:
  runtime: %s
  scaleConfig:
    minReplicas: 0
    maxReplicas: 1
    cooldownPeriod: 15
  env:
    - name: RECORDER_URL
      value: %s
  source:
    inline:
      dependencies: %q
      source: |
`, name, rt, platform.recorder.URL, deps)
	for _, line := range strings.Split(strings.TrimPrefix(source, "\n"), "\n") {
		if line != "" {
			b.WriteString("        " + line)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// installRun is one run of a pod's install container.
type installRun struct {
	pod     string    // the pod's name (its ReplicaSet's hash is part of it)
	created time.Time // the pod's creation
	log     string    // the run's log
}

func (i installRun) String() string {
	return fmt.Sprintf("%s (created %s):\n%s", i.pod, i.created.Format(time.TimeOnly), i.log)
}

// installs returns, oldest pod first, every install container run that
// ended well in the pods of Function name now in ns, a restarted
// container's earlier run included. Which pod installed is not always the
// newest: a pod can be replaced (or a second one started beside it) while
// the first start's request is held, and the newer one then takes from
// the cache what the first stored (cold run 56 failed on looking at the
// newest only).
func installs(t *testing.T, ns, name string) ([]installRun, error) {
	cs := platform.cluster.Clientset
	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: functionLabel + "=" + name})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	var runs []installRun
	for _, p := range pods.Items {
		for _, s := range p.Status.InitContainerStatuses {
			if s.Name != installContainer {
				continue
			}
			logOf := func(previous bool) (string, error) {
				out, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: installContainer, Previous: previous}).DoRaw(t.Context())
				return string(out), err
			}
			if s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.ExitCode == 0 {
				log, err := logOf(true)
				if err != nil {
					return nil, fmt.Errorf("earlier install log of %s: %w", p.Name, err)
				}
				runs = append(runs, installRun{p.Name, p.CreationTimestamp.Time, log})
			}
			if s.State.Terminated != nil && s.State.Terminated.ExitCode == 0 {
				log, err := logOf(false)
				if err != nil {
					return nil, fmt.Errorf("install log of %s: %w", p.Name, err)
				}
				runs = append(runs, installRun{p.Name, p.CreationTimestamp.Time, log})
			}
		}
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("no pod of %s whose %s container ended well (%d pods)", name, installContainer, len(pods.Items))
	}
	return runs, nil
}

// TestFunctionsWithDependenciesInstallOnTheNode runs a Node.js and a
// Python Function whose inline dependency, kfn-greet, comes from a package
// index on the node's address (test/pkgindex: a private npm registry with
// a token and a PEP 503 index with basic auth), as a user's private
// registry would: the pods have no route out, so nothing else could serve
// it. Each runs in a namespace of its own (a warm pool is per namespace)
// whose registry config Secret (.npmrc, pip.conf) points the install
// container at the index; the chart and the controller put no
// NetworkPolicy in a Function's namespace, so the pods reach it (where a
// user's own policies restrict egress, they must let the Function's pods
// reach the registry, and the event bridge's publisher Service for the
// dependency cache). The first start installs from the index (npm and pip
// ask it), stores the result in the dependency cache, and the handler
// loads the package, and the install's termination message says the
// cache holds the set: at zero the Deployment's pods are rendered without
// the install container, and one event wakes the Function on a new pod
// that starts one container, whose host takes the dependencies from the
// cache as it starts (its log says so; the index is not asked), and is
// delivered once; with one standby pod
// in the namespace, the Function's next wake is served by it (the event
// claims it), again without asking the index (a standby pod never runs npm
// or pip), and without unpacking anything at the wake: the pool prepared
// the pod with the Function's dependencies as it started.
func TestFunctionsWithDependenciesInstallOnTheNode(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	index, err := pkgindex.Start(net.JoinHostPort(platform.cluster.Config.NodeIP, "0"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = index.Close() })

	for _, tc := range []struct {
		name, runtime, greeting string
		eco                     pkgindex.Ecosystem
	}{
		{"depnode", "nodejs22", "Hi node from kfn-greet", pkgindex.NPM},
		{"deppy", "python312", "Hi python from kfn-greet", pkgindex.PyPI},
	} {
		t.Run(tc.runtime, func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, tc.name)
			_, err := platform.cluster.Clientset.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: registrySecret},
				StringData: map[string]string{".npmrc": index.NPMRC(), "pip.conf": index.PipConf()},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			token := invoker(t, ns)
			typ := "order." + tc.name + ".v1"
			apply(t, ns, depsFunction(tc.name, tc.runtime))
			apply(t, ns, subscription(ns, tc.name, tc.name, typ, nil))
			asked := func() int { return index.Requests(tc.eco, pkgindex.Package) }
			// wake publishes one event to the Function at zero and waits
			// for it, then for a second one, and returns the pod that
			// handled the first, which was delivered once.
			wake := func(t *testing.T, id string) string {
				pods := platform.recorder.podCounts(tc.name)
				start := time.Now()
				publish(t, typ, "shop", id, `{"wake": true}`)
				require.NoError(t, platform.recorder.waitAll(t.Context(), tc.name, []string{id}, 2*time.Minute))
				t.Logf("%s woken by event with its dependencies: published -> delivered %s", tc.name, time.Since(start).Round(time.Millisecond))
				pod := podOf(pods, platform.recorder.podCounts(tc.name))
				publish(t, typ, "shop", id+"-after", `{"wake": false}`)
				require.NoError(t, platform.recorder.waitAll(t.Context(), tc.name, []string{id + "-after"}, time.Minute))
				assert.Equal(t, 1, platform.recorder.counts(tc.name)[id], "the event that woke the Function was delivered once")
				return pod
			}

			t.Run("the first start installs from the index and the handler loads the package", func(t *testing.T) {
				// The gateway holds the request until the pod answers,
				// after its install; a client's timeout (30 s) may end it
				// first on a loaded machine: then it asks again.
				url := fmt.Sprintf("%s/%s/%s/?id=%s-first", platform.gateway, ns, tc.name, ns)
				eventually(t, 3*time.Minute, tc.name+" answers", func() error {
					code, body, err := getAs(url, token)
					if err == nil && (code != 200 || body != tc.greeting+" "+ns+"-first") {
						err = fmt.Errorf("%d %q", code, body)
					}
					return err
				})
				assert.Positive(t, asked(), "the install asked the index for %s", pkgindex.Package)
				// The install that stored the set said so (its termination
				// message), and the Deployment remembers it after that pod
				// is gone: a pod whose request the client gave up on may
				// have been scaled away, and the answer come from a pod
				// that fetched the set at start (cold run of 2026-11-27).
				eventually(t, time.Minute, "the Deployment says the cache holds the set", func() error {
					d, err := platform.cluster.Clientset.AppsV1().Deployments(ns).Get(t.Context(), tc.name, metav1.GetOptions{})
					if err == nil && d.Annotations[dependenciesCached] == "" {
						err = fmt.Errorf("annotations %v", d.Annotations)
					}
					return err
				})
				runs, err := installs(t, ns, tc.name)
				if err != nil {
					t.Logf("%s: %v (%d requests to the index)", tc.name, err, asked())
					return
				}
				t.Logf("%s's installs (%d requests to the index):\n%v", tc.name, asked(), runs)
				// The oldest pod's install is the first start's: it ran
				// npm or pip and stored the result; a pod started after
				// it may have taken that from the cache.
				assert.NotRegexp(t, cacheHit, runs[0].log, "nothing was cached yet: npm or pip ran")
				assert.Regexp(t, stored, runs[0].log, "the first install stored its result in the cache")
			})

			waitSubscriptionReady(t, ns, tc.name)
			waitAtZero(t, ns, tc.name, 3*time.Minute)

			t.Run("one event wakes it at zero on a new pod that starts one container, its host fetching the dependencies from the cache, delivered once", func(t *testing.T) {
				// The first pod's install said the cache holds the set: the
				// Deployment remembers it, and at zero its pods were
				// rendered without the install container.
				cs := platform.cluster.Clientset
				eventually(t, time.Minute, "pods rendered to fetch their dependencies at start", func() error {
					d, err := cs.AppsV1().Deployments(ns).Get(t.Context(), tc.name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					if d.Annotations[dependenciesCached] == "" || len(d.Spec.Template.Spec.InitContainers) != 0 {
						return fmt.Errorf("annotations %v, %d init containers", d.Annotations, len(d.Spec.Template.Spec.InitContainers))
					}
					return nil
				})
				before := asked()
				served := wake(t, ns+"-wake")
				assert.Equal(t, before, asked(), "the wake did not ask the index: npm and pip did not run")
				require.NotEmpty(t, served, "the pod that handled the waking event")
				pod, err := cs.CoreV1().Pods(ns).Get(t.Context(), served, metav1.GetOptions{})
				require.NoError(t, err)
				assert.Empty(t, pod.Spec.InitContainers, "one container start: no install container")
				out, err := cs.CoreV1().Pods(ns).GetLogs(served, &corev1.PodLogOptions{Container: "function"}).DoRaw(t.Context())
				require.NoError(t, err)
				t.Logf("%s's host:\n%s", served, out)
				assert.Regexp(t, hostFetched, string(out), "the host took its dependencies from the cache as it started")
			})

			waitAtZero(t, ns, tc.name, 3*time.Minute)

			t.Run("a standby pod serves it at zero, without npm or pip", func(t *testing.T) {
				setPoolSize(t, ns, 1)
				// The first event claims the standby pod itself (the
				// scaler's activation, the event bridge's claim), so the
				// pod serves it before the Deployment's own pod has
				// started: no race with the Deployment path any more (it
				// lost 2 runs of 12 when the standby pod was given the
				// Function only once KEDA had scaled the Deployment).
				standby := waitStandby(t, ns)
				hostLog := func() string {
					out, err := platform.cluster.Clientset.CoreV1().Pods(ns).GetLogs(standby, &corev1.PodLogOptions{Timestamps: true}).DoRaw(context.Background())
					if err != nil {
						return fmt.Sprintf("(its log: %v)", err)
					}
					return string(out)
				}
				// The pool prepares the standby pod with the Function's
				// dependencies as it starts, before any wake.
				eventually(t, time.Minute, "the standby pod prepared", func() error {
					if log := hostLog(); !strings.Contains(log, "prepared from the cache") {
						return fmt.Errorf("its host logged:\n%s", log)
					}
					return nil
				})
				before := asked()
				served := wake(t, ns+"-pool")
				assert.Equal(t, before, asked(), "no pod asked the index: the standby pod and the Deployment's take the cache's")
				if served != standby {
					t.Fatalf("the Deployment's pod %s handled the waking event, not the standby pod %s, whose host logged:\n%s", served, standby, hostLog())
				}
				assert.Contains(t, hostLog(), "prepared before", "the wake unpacked nothing: the pod was prepared with them")
			})
		})
	}
}

// cacheHit is what an install container logs when it took the
// dependencies from the dependency cache instead of running npm or pip
// (runtimes' depcache clients: "kfn: dependencies nodejs22/0123456789ab
// from the cache in 12 ms: nothing to install").
var cacheHit = regexp.MustCompile(`dependencies [a-z0-9]+/[0-9a-f]+ from the cache in \d+ ms: nothing to install`)

// hostFetched is what a host logs when it fetched its dependencies from
// the cache as it started (a pod without the install container:
// "kfn: dependencies nodejs22/0123456789ab from the cache in 12 ms").
var hostFetched = regexp.MustCompile(`(?m)dependencies [a-z0-9]+/[0-9a-f]+ from the cache in \d+ ms$`)

// dependenciesCached is the annotation of a Function's Deployment whose
// pods said the dependency cache holds their set
// (controller/resources.AnnotationDependenciesCached).
const dependenciesCached = "kfn.dev/dependencies-cached"

// stored is what an install container logs when it ran npm or pip and
// the result is in the dependency cache (stored by it, or by a pod that
// installed at the same time).
var stored = regexp.MustCompile(`dependencies [a-z0-9]+/[0-9a-f]+ (stored in the cache|were in the cache already)`)

// podOf returns the one pod that reported once more in after than in
// before (or "" if none or several did).
func podOf(before, after map[string]int) string {
	var pod string
	for p, n := range after {
		if n == before[p]+1 {
			if pod != "" {
				return ""
			}
			pod = p
		}
	}
	return pod
}
