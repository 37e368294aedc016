package chart_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The real node is one node, where no spreading shows (issue 33 item 5):
// these tests hold the rendered manifests of profile ha to what spreads
// kfn's replicas over several nodes.

// workload is a Deployment's or StatefulSet's replicas, selector and pod
// template.
type workload struct {
	replicas int32
	selector *metav1.LabelSelector
	template *corev1.PodTemplateSpec
}

// workloads are the rendered Deployments and StatefulSets by name.
func (r rendered) workloads() map[string]workload {
	out := map[string]workload{}
	for n, d := range r.deployments {
		out[n] = workload{replicas: *d.Spec.Replicas, selector: d.Spec.Selector, template: &d.Spec.Template}
	}
	for n, s := range r.statefulSets {
		out[n] = workload{replicas: *s.Spec.Replicas, selector: s.Spec.Selector, template: &s.Spec.Template}
	}
	return out
}

// TestProfileHASpreadsEveryReplicatedWorkload: every Deployment and
// StatefulSet of profile ha runs more than one replica, and each prefers
// (never requires) nodes without a pod of its own selector, the whole
// selector (release and component), so that two releases do not repel
// each other and one component's replicas do repel; and each has a
// PodDisruptionBudget selecting exactly its pods, one down at a time, so
// a node drain moves one replica at a time.
func TestProfileHASpreadsEveryReplicatedWorkload(t *testing.T) {
	r := typed(t, render(t, nil))
	ws := r.workloads()
	require.NotEmpty(t, ws)
	for name, w := range ws {
		assert.Greater(t, w.replicas, int32(1), "%s: profile ha runs more than one replica", name)
		aff := w.template.Spec.Affinity
		if !assert.NotNil(t, aff, "%s spreads its replicas", name) || !assert.NotNil(t, aff.PodAntiAffinity, name) {
			continue
		}
		assert.Empty(t, aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, "%s: soft, so one node runs them all", name)
		terms := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		if assert.Len(t, terms, 1, name) {
			term := terms[0].PodAffinityTerm
			assert.Equal(t, corev1.LabelHostname, term.TopologyKey, "%s: one replica per node", name)
			require.NotNil(t, term.LabelSelector, name)
			assert.Equal(t, w.selector.MatchLabels, term.LabelSelector.MatchLabels, "%s: repels its own replicas, not another component's or release's", name)
			for k, v := range term.LabelSelector.MatchLabels {
				assert.Equal(t, v, w.template.Labels[k], "%s: its pods carry %s", name, k)
			}
		}
		pdb := r.pdbs[name]
		if assert.NotNil(t, pdb, "%s has a PodDisruptionBudget", name) {
			assert.Equal(t, w.selector.MatchLabels, pdb.Spec.Selector.MatchLabels, "%s: the budget selects exactly its pods", name)
			assert.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue(), name)
		}
	}
	assert.Len(t, r.pdbs, len(ws), "no budget without its workload")
}

// TestSpreadingValuesReachEveryComponent: a component's
// topologySpreadConstraints (for example across zones) render into its
// pods beside the default anti-affinity, and its affinity replaces the
// default.
func TestSpreadingValuesReachEveryComponent(t *testing.T) {
	components := map[string]string{"controller": "kfn-controller", "eventbridge": "kfn-eventbridge", "scaler": "kfn-scaler", "nats": "kfn-nats"}
	zones := []any{map[string]any{"maxSkew": 1, "topologyKey": corev1.LabelTopologyZone, "whenUnsatisfiable": "ScheduleAnyway",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"spread": "me"}}}}
	nodeAffinity := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"kfn"}}}}}}}}
	vals := map[string]any{}
	for component := range components {
		vals[component] = map[string]any{"topologySpreadConstraints": zones}
	}
	r := typed(t, render(t, vals))
	ws := r.workloads()
	assert.Len(t, ws, len(components), "every workload of the chart is listed here")
	for component, name := range components {
		require.Contains(t, ws, name)
		spec := ws[name].template.Spec
		if assert.Len(t, spec.TopologySpreadConstraints, 1, name) {
			assert.Equal(t, corev1.LabelTopologyZone, spec.TopologySpreadConstraints[0].TopologyKey, name)
		}
		assert.NotNil(t, spec.Affinity.PodAntiAffinity, "%s keeps the default anti-affinity", name)

		r := typed(t, render(t, map[string]any{component: map[string]any{"affinity": nodeAffinity}}))
		aff := r.workloads()[name].template.Spec.Affinity
		if assert.NotNil(t, aff, name) {
			assert.Nil(t, aff.PodAntiAffinity, "%s: its affinity replaces the default", name)
			assert.NotNil(t, aff.NodeAffinity, name)
		}
	}
}
