package trigger_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/contract/trigger"
)

func TestRenderThenParseIsTheSame(t *testing.T) {
	m := trigger.Metadata{
		ScalerAddress:     "kfn-scaler.kfn-system.svc.cluster.local:9090",
		Function:          types.NamespacedName{Namespace: "shop", Name: "orders"},
		TargetBacklog:     25,
		TargetConcurrency: 3,
	}
	md := m.Render()
	assert.Equal(t, map[string]string{
		"scalerAddress":     "kfn-scaler.kfn-system.svc.cluster.local:9090",
		"functionNamespace": "shop",
		"functionName":      "orders",
		"targetBacklog":     "25",
		"targetConcurrency": "3",
	}, md, "the keys are a contract with ScaledObjects already in clusters")
	got, err := trigger.Parse(md, "shop", "other")
	require.NoError(t, err)
	assert.Equal(t, m, got)
	assert.NotContains(t, trigger.Metadata{Function: m.Function}.Render(), trigger.KeyScalerAddress)
}

func TestParse(t *testing.T) {
	tests := map[string]struct {
		md            map[string]string
		ns, name      string
		want          trigger.Metadata
		wantErrSubstr string
	}{
		"defaults from the ScaledObject and the api package": {
			md: map[string]string{"scalerAddress": "x:1"}, ns: "shop", name: "orders",
			want: trigger.Metadata{ScalerAddress: "x:1", Function: types.NamespacedName{Namespace: "shop", Name: "orders"}, TargetBacklog: 10, TargetConcurrency: 10},
		},
		"empty targets are defaults": {
			md: map[string]string{"targetBacklog": "", "targetConcurrency": ""}, ns: "shop", name: "orders",
			want: trigger.Metadata{Function: types.NamespacedName{Namespace: "shop", Name: "orders"}, TargetBacklog: 10, TargetConcurrency: 10},
		},
		"KEDA's own keys are ignored": {
			md:   map[string]string{"functionNamespace": "a", "functionName": "b", "caCert": "...", "unsafeSsl": "true"},
			want: trigger.Metadata{Function: types.NamespacedName{Namespace: "a", Name: "b"}, TargetBacklog: 10, TargetConcurrency: 10},
		},
		"no Function": {md: map[string]string{}, wantErrSubstr: "no Function"},
		"another namespace's Function": {
			md: map[string]string{"functionNamespace": "bank", "functionName": "ledger"}, ns: "shop", name: "spy",
			wantErrSubstr: `functionNamespace "bank" is not the ScaledObject's namespace "shop"`,
		},
		"zero target":            {md: map[string]string{"targetBacklog": "0"}, ns: "a", name: "b", wantErrSubstr: `targetBacklog="0"`},
		"negative target":        {md: map[string]string{"targetConcurrency": "-2"}, ns: "a", name: "b", wantErrSubstr: `targetConcurrency="-2"`},
		"not a number":           {md: map[string]string{"targetConcurrency": "ten"}, ns: "a", name: "b", wantErrSubstr: `targetConcurrency="ten"`},
		"larger than an int32":   {md: map[string]string{"targetBacklog": "4294967296"}, ns: "a", name: "b", wantErrSubstr: "targetBacklog"},
		"a decimal is no number": {md: map[string]string{"targetBacklog": "1.5"}, ns: "a", name: "b", wantErrSubstr: "targetBacklog"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := trigger.Parse(tc.md, tc.ns, tc.name)
			if tc.wantErrSubstr != "" {
				require.ErrorIs(t, err, trigger.ErrInvalidMetadata)
				assert.Contains(t, err.Error(), tc.wantErrSubstr)
				assert.Zero(t, got, "no partial result")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzParse checks that whatever Parse accepts renders to metadata that
// parses to the same thing.
func FuzzParse(f *testing.F) {
	f.Add("shop", "orders", "10", "3", "", "")
	f.Add("", "", "0", "x", "ns", "n")
	f.Fuzz(func(t *testing.T, fns, fname, backlog, concurrency, ns, name string) {
		md := map[string]string{"functionNamespace": fns, "functionName": fname, "targetBacklog": backlog, "targetConcurrency": concurrency}
		m, err := trigger.Parse(md, ns, name)
		if err != nil {
			return
		}
		if m.TargetBacklog < 1 || m.TargetConcurrency < 1 || m.Function.Namespace == "" || m.Function.Name == "" {
			t.Fatalf("accepted %+v", m)
		}
		again, err := trigger.Parse(m.Render(), "", "")
		if err != nil || again != m {
			t.Fatalf("render/parse: %+v -> %+v, %v", m, again, err)
		}
	})
}
