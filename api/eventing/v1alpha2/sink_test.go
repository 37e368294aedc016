package v1alpha2_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	. "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

func TestParseSink(t *testing.T) {
	tests := map[string]struct {
		sink, service, namespace, wantErr string
	}{
		"http":              {sink: "http://orders.shop.svc.cluster.local", service: "orders", namespace: "shop"},
		"https, port, path": {sink: "https://orders.shop.svc.cluster.local:8443/events?x=1", service: "orders", namespace: "shop"},
		"empty":             {sink: "", wantErr: "must not be empty"},
		"no scheme":         {sink: "orders.shop.svc.cluster.local", wantErr: "must have URL scheme 'http' or 'https'"},
		"ftp":               {sink: "ftp://orders.shop.svc.cluster.local", wantErr: "must have URL scheme"},
		"external host":     {sink: "https://example.com/hook", wantErr: "must be a cluster-local Service URL"},
		"four labels":       {sink: "http://orders.svc.cluster.local", wantErr: "the host must have 5 labels"},
		"six labels":        {sink: "http://a.orders.shop.svc.cluster.local", wantErr: "the host must have 5 labels"},
		"bad service name":  {sink: "http://Orders_1.shop.svc.cluster.local", wantErr: `"Orders_1" is not a valid name`},
		"unparsable":        {sink: "http://%zz", wantErr: "invalid sink"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSink(tt.sink)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrInvalidSink)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.service, got.Service)
			assert.Equal(t, tt.namespace, got.Namespace)
			assert.Equal(t, tt.sink, got.URL.String())
		})
	}
}

func TestValidateSinkNamespace(t *testing.T) {
	sub := subscription(TypeMatchingStandard, "app", "a.b")
	sub.Spec.Sink = "http://fn.other.svc.cluster.local"
	_, err := sub.ValidateSink()
	require.ErrorIs(t, err, ErrInvalidSink)
	assert.Contains(t, err.Error(), `the Service must be in the Subscription's namespace "default", not "other"`)

	sub.Spec.Sink = "http://fn.default.svc.cluster.local"
	got, err := sub.ValidateSink()
	require.NoError(t, err)
	assert.Equal(t, "fn", got.Service)
}

func FuzzParseSink(f *testing.F) {
	f.Add("http://orders.shop.svc.cluster.local:8080/x")
	f.Add("https://a.b.svc.cluster.local")
	f.Add("http://[::1]:80")
	f.Fuzz(func(t *testing.T, sink string) {
		got, err := ParseSink(sink)
		if err != nil {
			return
		}
		if got.Service == "" || got.Namespace == "" {
			t.Fatalf("accepted %q without a service or namespace", sink)
		}
		if got.URL.Hostname() != got.Service+"."+got.Namespace+ClusterLocalSuffix {
			t.Fatalf("accepted %q with host %q", sink, got.URL.Hostname())
		}
	})
}
