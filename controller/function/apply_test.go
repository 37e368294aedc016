package function

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes/plan"
	"github.com/kfn-dev/kfn/test/testcluster"
)

// unseen is the controller's cache in the moment after a user made an
// object and before its watch event arrived: Get answers NotFound for
// everything. A real informer cannot be held in that moment on purpose,
// which is why this one stand-in is used; the API server behind live is
// real.
type unseen struct{ client.Client }

func (unseen) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
}

// TestObjectOfTheUserMadeJustBeforeIsNotTakenOver: kfn applies its
// children (ConfigMap, Deployment, Service, autoscaler) with the
// Function's name and forced server-side apply, so an object of the
// user's with that name that the cache has not seen yet would be taken
// over (an HPA's target and owner rewritten, a ConfigMap's data replaced)
// if kfn believed the cache. It asks the API server first, refuses, and
// changes nothing; where there is nothing, kfn creates its own.
func TestObjectOfTheUserMadeJustBeforeIsNotTakenOver(t *testing.T) {
	c := testcluster.New(t, testcluster.WithScheme(AddToScheme))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "take-over-"}}
	require.NoError(t, c.Client.Create(ctx, ns))
	cfg := DefaultConfig()
	r := &Reconciler{client: unseen{c.Client}, live: c.Client, cfg: cfg}
	labels := map[string]string{"app": "orders"}

	for _, tc := range []struct {
		name  string
		users client.Object
		apply func(plan.Plan) error
		fresh func() client.Object
	}{{
		name:  "configmap",
		users: &corev1.ConfigMap{Data: map[string]string{"settings": "the user's"}},
		apply: func(p plan.Plan) error { _, err := r.applyConfigMap(ctx, p, true); return err },
		fresh: func() client.Object { return &corev1.ConfigMap{} },
	}, {
		name: "deployment",
		users: &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/orders:1"}}},
			},
		}},
		apply: func(p plan.Plan) error { _, _, err := r.applyDeployment(ctx, p, true); return err },
		fresh: func() client.Object { return &appsv1.Deployment{} },
	}, {
		name: "service",
		users: &corev1.Service{Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8080}},
		}},
		apply: func(p plan.Plan) error { return r.applyService(ctx, p, true) },
		fresh: func() client.Object { return &corev1.Service{} },
	}, {
		// What kubectl autoscale function NAME makes.
		name: "horizontalpodautoscaler",
		users: &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "serverless.kyma-project.io/v1alpha2", Kind: "Function", Name: "orders"},
			MinReplicas:    ptr.To[int32](2),
			MaxReplicas:    4,
		}},
		apply: func(p plan.Plan) error {
			require.NoError(t, p.SetAutoscaler(false, false))
			require.Equal(t, plan.AutoscalerHPA, p.Autoscaler)
			return r.applyOrDelete(ctx, p, &autoscalingv2.HorizontalPodAutoscaler{}, true,
				resources.HorizontalPodAutoscaler(p, cfg.Resources), "horizontalpodautoscaler", true)
		},
		fresh: func() client.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			users := tc.users
			users.SetName("orders-" + tc.name)
			users.SetNamespace(ns.Name)
			require.NoError(t, c.Client.Create(ctx, users))
			fn := &v1alpha2.Function{
				ObjectMeta: metav1.ObjectMeta{Name: users.GetName(), Namespace: ns.Name, UID: types.UID("6f1d0c52-0b1e-4c55-9d7e-" + tc.name[:1] + "f0a4a7c9e01")},
				Spec: v1alpha2.FunctionSpec{
					Runtime:     v1alpha2.NodeJS22,
					ScaleConfig: &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3)},
					Source:      v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: "module.exports = { main: () => 'ok' }"}},
				},
			}
			p, err := plan.For(fn, cfg.Plan)
			require.NoError(t, err)

			require.ErrorContains(t, tc.apply(p), "exists and is not managed by kfn")
			after := tc.fresh()
			require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(users), after))
			assert.Equal(t, users.GetResourceVersion(), after.GetResourceVersion(), "the user's %s was written", tc.name)
			assert.Nil(t, metav1.GetControllerOf(after))

			// Where there is nothing, kfn creates its own.
			p.Name, p.UID = "payments-"+tc.name, types.UID("0c7a4f3e-2d6b-4b1a-8e5f-"+tc.name[:1]+"a3c1d2e4f60")
			require.NoError(t, tc.apply(p))
			mine := tc.fresh()
			require.NoError(t, c.Client.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: p.Name}, mine))
			require.NotNil(t, metav1.GetControllerOf(mine))
			assert.Equal(t, p.UID, metav1.GetControllerOf(mine).UID)
		})
	}
}
