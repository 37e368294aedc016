package chart_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// TestProfileHA holds the default profile to its promise that no single
// pod's loss loses events or stops the platform: 3 NATS servers routed to
// each other, every stream (and the lock bucket, which follows
// -stream-replicas) on 3 of them, 2 of every other component, one
// PodDisruptionBudget each allowing one pod down, and replicas that prefer
// other nodes without requiring them (a one-node cluster still runs them
// all).
func TestProfileHA(t *testing.T) {
	r := typed(t, render(t, nil))
	nats := r.statefulSets["kfn-nats"]
	require.NotNil(t, nats)
	assert.Equal(t, int32(3), *nats.Spec.Replicas, "3 NATS servers")
	env := natsOf(t, r).env
	for i := range 3 {
		assert.Contains(t, env[fmt.Sprintf("KFN_NATS_ROUTE_%d", i)], fmt.Sprintf("@kfn-nats-%d.kfn-nats-headless.kfn-system.svc.cluster.local:6222", i), "routes to every server, with the routes' password")
	}
	assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-stream-replicas=3", "streams R3")
	assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-partitions=1", "3 servers and R3: every server would hold every partition")
	assert.Contains(t, container(t, r.deployments["kfn-scaler"]).Args, "-partitions=1", "the scaler reads what the event bridge writes")
	assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-leader-election=true")
	assert.Contains(t, r.configMaps["kfn-controller"].Data["controller.yaml"], "leaderElect: true")
	for _, name := range []string{"kfn-controller", "kfn-eventbridge", "kfn-scaler"} {
		require.Contains(t, r.deployments, name)
		assert.Equal(t, int32(2), *r.deployments[name].Spec.Replicas, "%s runs 2 replicas", name)
	}
	templates := r.podTemplates()
	for _, name := range []string{"kfn-controller", "kfn-eventbridge", "kfn-scaler", "kfn-nats"} {
		pdb := r.pdbs[name]
		if assert.NotNil(t, pdb, "%s has a PodDisruptionBudget", name) {
			assert.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue(), "%s: one pod down at a time", name)
		}
		aff := templates[name].Spec.Affinity
		if assert.NotNil(t, aff, "%s spreads its replicas", name) && assert.NotNil(t, aff.PodAntiAffinity, name) {
			assert.Empty(t, aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, "%s: soft, so one node runs them all", name)
			terms := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
			if assert.Len(t, terms, 1, name) {
				assert.Equal(t, corev1.LabelHostname, terms[0].PodAffinityTerm.TopologyKey, name)
				assert.Equal(t, templates[name].Labels["app.kubernetes.io/component"], terms[0].PodAffinityTerm.LabelSelector.MatchLabels["app.kubernetes.io/component"], "%s avoids its own siblings", name)
			}
		}
	}
}

// TestProfileSmall holds profile small to one pod of each, single-copy
// streams, no cluster routes, no PodDisruptionBudget (one would block
// every node drain) and no anti-affinity; and a replicas value set beside
// a profile wins over it.
func TestProfileSmall(t *testing.T) {
	r := typed(t, render(t, map[string]any{"profile": "small"}))
	assert.Equal(t, int32(1), *r.statefulSets["kfn-nats"].Spec.Replicas)
	assert.NotContains(t, r.configMaps["kfn-nats"].Data["nats.conf"], "cluster {", "one server has no routes")
	assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-stream-replicas=1")
	assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-partitions=1")
	assert.Contains(t, container(t, r.deployments["kfn-scaler"]).Args, "-partitions=1")
	for name, d := range r.deployments {
		assert.Equal(t, int32(1), *d.Spec.Replicas, name)
	}
	assert.Empty(t, r.pdbs)
	for name, pt := range r.podTemplates() {
		assert.Nil(t, pt.Spec.Affinity, name)
	}

	t.Run("a replicas value wins over the profile", func(t *testing.T) {
		r := typed(t, render(t, map[string]any{"profile": "small", "controller": map[string]any{"replicas": 2}}))
		assert.Equal(t, int32(2), *r.deployments["kfn-controller"].Spec.Replicas)
		assert.Contains(t, r.pdbs, "kfn-controller")
		r = typed(t, render(t, map[string]any{"nats": map[string]any{"replicas": 1}}))
		assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-stream-replicas=1", "ha with one NATS server: streams follow it")
		assert.Equal(t, int32(2), *r.deployments["kfn-eventbridge"].Spec.Replicas)
	})
	t.Run("external NATS", func(t *testing.T) {
		r := typed(t, render(t, map[string]any{"nats": map[string]any{"enabled": false}, "externalNATS": map[string]any{"url": "nats://n:4222"}}))
		assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-stream-replicas=1", "the chart does not know an external NATS's servers")
		assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-partitions=1")
		r = typed(t, render(t, map[string]any{"nats": map[string]any{"enabled": false}, "externalNATS": map[string]any{"url": "nats://n:4222"},
			"eventbridge": map[string]any{"streams": map[string]any{"replicas": 3, "partitions": 5}}}))
		assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-stream-replicas=3")
		assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-partitions=5", "a value set wins")
		assert.Contains(t, container(t, r.deployments["kfn-scaler"]).Args, "-partitions=5")
	})
}
