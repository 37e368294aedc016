package manifest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/manifest"
)

const multi = `# a function and its subscription, plus a Service kfn does not run
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: orders
spec:
  runtime: nodejs22
  source:
    inline:
      source: "module.exports = { main: () => 1 }"
---
---
# only a comment
---
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata:
  name: orders
  namespace: shop
spec:
  sink: http://orders.shop.svc.cluster.local
  source: app
  types: [order.created.v1]
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata:
    name: orders
`

func TestDecodeSplitsDocumentsAndLists(t *testing.T) {
	docs, err := manifest.Decode("app.yaml", []byte(multi))
	require.NoError(t, err)
	require.Len(t, docs, 3)
	assert.Equal(t, "Function", docs[0].Object.GetKind())
	assert.Equal(t, 1, docs[0].Index)
	assert.Equal(t, "Subscription", docs[1].Object.GetKind())
	assert.Equal(t, 3, docs[1].Index, "a comment-only document still counts in the position")
	assert.Equal(t, "Service", docs[2].Object.GetKind())
	assert.Equal(t, "app.yaml (document 4)", docs[2].Where())
}

func TestLoadDefaultsAndSorts(t *testing.T) {
	a, err := manifest.NewAdmitter()
	require.NoError(t, err)
	docs, err := manifest.Decode("app.yaml", []byte(multi))
	require.NoError(t, err)
	set := a.Load(context.Background(), docs)
	require.Empty(t, set.Invalid)
	require.Len(t, set.Functions, 1)
	require.Len(t, set.Subscriptions, 1)
	require.Len(t, set.Ignored, 1)

	fn := set.Functions[0]
	assert.Equal(t, "default", fn.Namespace)
	assert.Equal(t, ptr.To[int32](1), fn.Spec.Replicas)
	sub := set.Subscriptions[0]
	assert.Equal(t, eventingv1alpha2.TypeMatchingStandard, sub.Spec.TypeMatching)
	assert.Equal(t, map[string]eventingv1alpha2.ConfigValue{"maxInFlightMessages": "10"}, sub.Spec.Config)
}

func TestLoadReportsDuplicatesAndWrongVersions(t *testing.T) {
	a, err := manifest.NewAdmitter()
	require.NoError(t, err)
	const in = `apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata: {name: twice}
spec: {runtime: python312, source: {inline: {source: "def main(e, c): pass"}}}
---
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata: {name: twice}
spec: {runtime: python312, source: {inline: {source: "def main(e, c): return 1"}}}
---
apiVersion: serverless.kyma-project.io/v1alpha1
kind: Function
metadata: {name: old}
spec: {source: "x"}
---
apiVersion: gateway.kyma-project.io/v1beta1
kind: APIRule
metadata: {name: removed}
spec: {host: removed, service: {name: removed, port: 80}}
---
apiVersion: gateway.kyma-project.io/v2
kind: APIRule
metadata: {name: twice}
spec: {hosts: [twice], service: {name: twice, port: 80}, rules: [{path: /*, methods: [GET], noAuth: true}]}
---
apiVersion: gateway.kyma-project.io/v2alpha1
kind: APIRule
metadata: {name: twice}
spec: {hosts: [twice], service: {name: twice, port: 80}, rules: [{path: /*, methods: [GET], noAuth: true}]}
`
	docs, err := manifest.Decode("fns.yaml", []byte(in))
	require.NoError(t, err)
	set := a.Load(context.Background(), docs)
	require.Len(t, set.Functions, 1, "the first definition runs")
	require.Len(t, set.APIRules, 1, "the first definition runs, whatever its version")
	require.Len(t, set.Invalid, 4)
	// Kyma's v1beta1 APIRule is gone upstream: refused with the versions
	// served, not ignored.
	assert.Contains(t, set.Invalid[2].Error(), `fns.yaml (document 4)`)
	assert.Contains(t, set.Invalid[2].Error(), `Unsupported value: "gateway.kyma-project.io/v1beta1"`)
	assert.Contains(t, set.Invalid[2].Error(), `"APIRule.gateway.kyma-project.io/v2"`)
	assert.Contains(t, set.Invalid[3].Error(), `fns.yaml (document 6): APIRule "twice" is invalid: metadata.name: Duplicate value`)
	assert.Contains(t, set.Invalid[0].Error(), `fns.yaml (document 2): Function "twice" is invalid: metadata.name: Duplicate value`)
	assert.Contains(t, set.Invalid[0].Error(), "already defined in fns.yaml (document 1)")
	assert.Contains(t, set.Invalid[1].Error(), `fns.yaml (document 3)`)
	assert.Contains(t, set.Invalid[1].Error(), `Unsupported value: "serverless.kyma-project.io/v1alpha1"`)
}

func TestDecodeRefusesMalformedDocuments(t *testing.T) {
	tests := map[string]struct {
		in   string
		want string
	}{
		"bad yaml":        {in: "kind: [unclosed\n", want: "bad.yaml (document 1)"},
		"no kind":         {in: "apiVersion: v1\nmetadata: {name: x}\n", want: "apiVersion and kind are required"},
		"not an object":   {in: "- a\n- b\n", want: "bad.yaml (document 1)"},
		"second document": {in: "apiVersion: v1\nkind: ConfigMap\n---\n: : :\n", want: "bad.yaml (document 2)"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := manifest.Decode("bad.yaml", []byte(tt.in))
			require.ErrorIs(t, err, manifest.ErrMalformed)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
