package inflight_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/contract/inflight"
)

func TestDecode(t *testing.T) {
	tests := map[string]struct {
		msg     string
		wantErr string
		want    map[types.NamespacedName]int
	}{
		"a report": {
			msg:  `{"source":"gw-0","ttlMillis":1000,"functions":[{"namespace":"shop","name":"orders","inFlight":3}]}`,
			want: map[types.NamespacedName]int{{Namespace: "shop", Name: "orders"}: 3},
		},
		"nothing in flight": {msg: `{"source":"gw-0","ttlMillis":1000}`, want: map[types.NamespacedName]int{}},
		"not JSON":          {msg: `hello`, wantErr: "invalid character"},
		"no source":         {msg: `{"ttlMillis":1000}`, wantErr: "no source"},
		"no ttl":            {msg: `{"source":"gw-0"}`, wantErr: "ttlMillis 0"},
		"ttl too long":      {msg: `{"source":"gw-0","ttlMillis":3600000}`, wantErr: "ttlMillis 3600000"},
		"no name":           {msg: `{"source":"gw-0","ttlMillis":1000,"functions":[{"namespace":"shop","inFlight":3}]}`, wantErr: "bad count"},
		"negative count":    {msg: `{"source":"gw-0","ttlMillis":1000,"functions":[{"namespace":"shop","name":"a","inFlight":-1}]}`, wantErr: "bad count"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src, counts, ttl, err := inflight.Decode([]byte(tc.msg))
			if tc.wantErr != "" {
				require.ErrorIs(t, err, inflight.ErrInvalidReport)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Nil(t, counts)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "gw-0", src)
			assert.Equal(t, time.Second, ttl)
			assert.Equal(t, tc.want, counts)
		})
	}
}

func TestEncodeDecode(t *testing.T) {
	in := map[types.NamespacedName]int{{Namespace: "b", Name: "x"}: 2, {Namespace: "a", Name: "y"}: 1, {Namespace: "a", Name: "z"}: 0}
	data, err := inflight.Encode("gw-1", in, 750*time.Millisecond)
	require.NoError(t, err)
	assert.JSONEq(t, `{"source":"gw-1","ttlMillis":750,"functions":[{"namespace":"a","name":"y","inFlight":1},{"namespace":"b","name":"x","inFlight":2}]}`, string(data))
	src, out, ttl, err := inflight.Decode(data)
	require.NoError(t, err)
	assert.Equal(t, "gw-1", src)
	assert.Equal(t, 750*time.Millisecond, ttl)
	assert.Equal(t, map[types.NamespacedName]int{{Namespace: "b", Name: "x"}: 2, {Namespace: "a", Name: "y"}: 1}, out)
}
