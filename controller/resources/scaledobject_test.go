package resources_test

import (
	"testing"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/trigger"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/test/fntest"
)

func TestScaledObject(t *testing.T) {
	p := planFor(t, fntest.Function("f", "ns", fntest.Scale(0, 7), fntest.ScaleTargets(4, 2, 30)))
	cfg := testConfig()
	so := resources.ScaledObject(p, cfg)
	assert.Equal(t, "f", so.Name)
	assert.Equal(t, &kedav1alpha1.ScaleTarget{APIVersion: "apps/v1", Kind: "Deployment", Name: "f"}, so.Spec.ScaleTargetRef)
	assert.Equal(t, []int32{0, 7, 30}, []int32{*so.Spec.MinReplicaCount, *so.Spec.MaxReplicaCount, *so.Spec.CooldownPeriod},
		"min and max replicas, cooldown")
	require.Len(t, so.Spec.Triggers, 1)
	assert.Equal(t, "external-push", so.Spec.Triggers[0].Type)
	assert.Equal(t, map[string]string{
		trigger.KeyScalerAddress:     "scaler.test:9090",
		trigger.KeyFunctionNamespace: "ns",
		trigger.KeyFunctionName:      "f",
		trigger.KeyTargetBacklog:     "4",
		trigger.KeyTargetConcurrency: "2",
	}, so.Spec.Triggers[0].Metadata)
	assert.Equal(t, p.UID, so.OwnerReferences[0].UID)
	assert.Nil(t, so.Spec.Triggers[0].AuthenticationRef, "plain gRPC: no authentication")

	auth := &kedav1alpha1.AuthenticationRef{Kind: "ClusterTriggerAuthentication", Name: "kfn-scaler"}
	cfg.ScalerAuthentication = auth
	so = resources.ScaledObject(p, cfg)
	assert.Equal(t, auth, so.Spec.Triggers[0].AuthenticationRef, "KEDA reads the scaler's CA and client certificate from it")
	auth.Name = "changed"
	assert.Equal(t, "kfn-scaler", so.Spec.Triggers[0].AuthenticationRef.Name, "the builder keeps its own copy")
}
