package resources_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/test/fntest"
)

func TestConfigMap(t *testing.T) {
	fn := fntest.Function("hello", "ns", fntest.Source(fntest.HelloJS, fntest.PackageJSON))
	p := planFor(t, fn)
	cm := typed[corev1.ConfigMap](t, resources.ConfigMap(p))
	assert.Equal(t, "hello", cm.Name)
	assert.Equal(t, "ns", cm.Namespace)
	assert.Equal(t, map[string]string{"handler.js": fntest.HelloJS, "package.json": fntest.PackageJSON}, cm.Data)
	assert.Equal(t, p.Source.Hash, cm.Annotations[resources.AnnotationSourceHash])
	assert.Equal(t, "function-controller", cm.Labels[v1alpha2.LabelManagedBy])
	require.Len(t, cm.OwnerReferences, 1)
	assert.Equal(t, "Function", cm.OwnerReferences[0].Kind)
	assert.Equal(t, fn.UID, cm.OwnerReferences[0].UID)
	assert.True(t, *cm.OwnerReferences[0].Controller)

	envOnly := fntest.Function("hello", "ns", fntest.Source(fntest.HelloJS, fntest.PackageJSON), fntest.Env("A", "b"), fntest.Replicas(3), fntest.Profile("XS"))
	assert.Equal(t, cm, typed[corev1.ConfigMap](t, resources.ConfigMap(planFor(t, envOnly))), "only source and dependencies shape the ConfigMap")

	git := fntest.Function("g", "ns", fntest.Git("https://g/r.git", "d", "main", nil), fntest.Resolved("c1"))
	assert.Nil(t, resources.ConfigMap(planFor(t, git)))
}
