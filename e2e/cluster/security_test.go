package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/test/node/singlenode"
)

// TestRestrictedPodSecurity checks both sides of the restricted Pod
// Security Standard on the real node: a Function whose security context
// would break it is refused, the namespace really enforces it, and the
// pods kfn runs are admitted under it (every other scenario's pods too, as
// each runs in a restricted namespace).
func TestRestrictedPodSecurity(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "restricted")

	t.Run("a Function that breaks restricted is refused", func(t *testing.T) {
		for name, sc := range map[string]string{
			"privileged": "  containerSecurityContext:\n    privileged: true\n",
			"root":       "  podSecurityContext:\n    runAsUser: 0\n",
		} {
			objs, err := singlenode.DecodeObjects([]byte(`
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: bad-` + name + `
spec:
  runtime: nodejs22
` + sc + `  source:
    inline:
      source: |
        module.exports = { main: () => "hi" }
`))
			require.NoError(t, err)
			o := objs[0]
			o.SetNamespace(ns)
			err = platform.client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fieldOwner))
			require.Error(t, err, name)
			assert.Contains(t, err.Error(), "SecurityContext", name)
			_, err = function(ns, "bad-"+name)
			assert.Error(t, err, "nothing of %s was stored", name)
		}
	})

	t.Run("the namespace enforces restricted", func(t *testing.T) {
		for name, sc := range map[string]*corev1.SecurityContext{
			"privileged": {Privileged: ptr.To(true)},
			"plain":      nil, // no runAsNonRoot, seccomp profile, dropped capabilities...
		} {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "c", Image: "localhost/kfn-cluster/pause:kfn", SecurityContext: sc,
				}}},
			}
			err := platform.client.Create(context.Background(), pod)
			require.Error(t, err, name)
			assert.Contains(t, err.Error(), "violates PodSecurity \"restricted", name)
		}
	})

	t.Run("a Function's pod is admitted and runs", func(t *testing.T) {
		apply(t, ns, kymaPython)
		fn := waitRunning(t, ns, "hello-python", 3*time.Minute)
		assert.Equal(t, string(serverlessv1alpha2.ReasonDeploymentReady), condition(fn, serverlessv1alpha2.ConditionRunning).Reason)
	})
}

// tokenFunction is a Function that answers whether its container has a
// ServiceAccount token and, if so, the namespace written beside it.
const tokenFunction = `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: %s
  annotations:
    serverless.kfn.dev/service-account-token: "%s"
spec:
  runtime: python312
  source:
    inline:
      source: |
        import os
        def main(event, context):
            d = "/var/run/secrets/kubernetes.io/serviceaccount"
            if not os.path.exists(d + "/token"):
                return "no token"
            with open(d + "/namespace") as f:
                return "token for " + f.read()
`

// TestFunctionPodsGetATokenOnlyWhenTheyAsk runs two Functions on the real
// node: one as Kyma writes it, whose container finds no ServiceAccount
// token (the API server added none to its pod), and one annotated
// serverless.kfn.dev/service-account-token: "true", whose function
// container finds one, with its namespace, while the pod's other
// containers have none.
func TestFunctionPodsGetATokenOnlyWhenTheyAsk(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "token")
	apply(t, ns, fmt.Sprintf(tokenFunction, "no-token", "false"))
	apply(t, ns, fmt.Sprintf(tokenFunction, "with-token", "true"))
	for name, want := range map[string]string{"no-token": "no token", "with-token": "token for " + ns} {
		t.Run(name, func(t *testing.T) {
			waitRunning(t, ns, name, 3*time.Minute)
			waitAnswer(t, functionURL(t, ns, name)+"/", want)
			pods, err := platform.cluster.Clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: functionLabel + "=" + name})
			require.NoError(t, err)
			require.NotEmpty(t, pods.Items)
			for _, p := range pods.Items {
				for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
					mounted := false
					for _, m := range c.VolumeMounts {
						mounted = mounted || m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount"
					}
					assert.Equal(t, name == "with-token" && c.Name == "function", mounted, "%s: token in container %s", p.Name, c.Name)
				}
			}
		})
	}
}
