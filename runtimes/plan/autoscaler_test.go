package plan_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/runtimes/plan"
	"github.com/kfn-dev/kfn/test/fntest"
)

func scalingOf(t *testing.T, fn *v1alpha2.Function) plan.Scaling {
	t.Helper()
	p, err := plan.For(fn, cfg)
	require.NoError(t, err)
	return p.Scaling
}

func TestChooseAutoscaler(t *testing.T) {
	tests := map[string]struct {
		mods             []fntest.Modifier
		keda, subscribed bool
		want             plan.Autoscaler
		wantErr          error
		fixed            int32
	}{
		"replicas":                        {mods: []fntest.Modifier{fntest.Replicas(2)}, keda: true, subscribed: true, want: plan.AutoscalerNone, fixed: 2},
		"cpu range without KEDA":          {mods: []fntest.Modifier{fntest.Scale(1, 3)}, want: plan.AutoscalerHPA},
		"cpu range with KEDA, no events":  {mods: []fntest.Modifier{fntest.Scale(1, 3)}, keda: true, want: plan.AutoscalerHPA},
		"subscribed range with KEDA":      {mods: []fntest.Modifier{fntest.Scale(1, 3)}, keda: true, subscribed: true, want: plan.AutoscalerKEDA},
		"subscribed range without KEDA":   {mods: []fntest.Modifier{fntest.Scale(1, 3)}, subscribed: true, want: plan.AutoscalerHPA},
		"scale to zero with KEDA":         {mods: []fntest.Modifier{fntest.Scale(0, 3)}, keda: true, want: plan.AutoscalerKEDA},
		"scale to zero without KEDA":      {mods: []fntest.Modifier{fntest.Scale(0, 3)}, wantErr: plan.ErrNeedsKEDA, want: plan.AutoscalerNone},
		"min == max is a fixed count":     {mods: []fntest.Modifier{fntest.Scale(2, 2)}, keda: true, subscribed: true, want: plan.AutoscalerNone, fixed: 2},
		"default is one unscaled replica": {want: plan.AutoscalerNone, fixed: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := scalingOf(t, fntest.Function("f", "ns", tc.mods...))
			got, err := plan.ChooseAutoscaler(s, tc.keda, tc.subscribed)
			assert.ErrorIs(t, err, tc.wantErr)
			assert.Equal(t, tc.want, got)
			if tc.fixed != 0 {
				assert.Equal(t, tc.fixed, s.FixedReplicas())
			}
		})
	}
	assert.True(t, strings.Contains(plan.ErrNeedsKEDA.Error(), "KEDA"))

	// Fixed: an autoscaler of the user's sets spec.replicas; scaleConfig
	// is left out, even scale to zero without KEDA.
	s := scalingOf(t, fntest.Function("f", "ns", fntest.Scale(0, 3), fntest.Replicas(4))).Fixed()
	got, err := plan.ChooseAutoscaler(s, false, true)
	require.NoError(t, err)
	assert.Equal(t, plan.AutoscalerNone, got)
	assert.Equal(t, int32(4), s.FixedReplicas())
	assert.False(t, s.ScalesToZero())
}

func TestDeploymentReplicas(t *testing.T) {
	tests := map[string]struct {
		mods             []fntest.Modifier
		keda, subscribed bool
		want             int32
		set              bool
		wantErr          error
	}{
		"spec.replicas":              {mods: []fntest.Modifier{fntest.Replicas(3)}, want: 3, set: true},
		"min == max":                 {mods: []fntest.Modifier{fntest.Scale(2, 2)}, want: 2, set: true},
		"HPA owns it":                {mods: []fntest.Modifier{fntest.Scale(1, 3)}},
		"KEDA owns it":               {mods: []fntest.Modifier{fntest.Scale(1, 3)}, keda: true, subscribed: true},
		"scale to zero without KEDA": {mods: []fntest.Modifier{fntest.Scale(0, 3)}, wantErr: plan.ErrNeedsKEDA},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := plan.For(fntest.Function("f", "ns", tc.mods...), cfg)
			require.NoError(t, err)
			_, set := p.DeploymentReplicas()
			assert.False(t, set, "no autoscaler chosen yet: spec.replicas is left alone")
			err = p.SetAutoscaler(tc.keda, tc.subscribed)
			require.ErrorIs(t, err, tc.wantErr)
			if err != nil {
				assert.Empty(t, p.Autoscaler, "an error leaves the plan as it was")
				return
			}
			n, set := p.DeploymentReplicas()
			assert.Equal(t, tc.set, set)
			assert.Equal(t, tc.want, n)
		})
	}
}
