package activation_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/contract/activation"
)

func TestActivationsRoundTripAndRefuseTheRest(t *testing.T) {
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	got, err := activation.Decode(activation.Encode(fn))
	require.NoError(t, err)
	assert.Equal(t, fn, got)
	for _, bad := range []string{``, `{}`, `{"namespace":"shop"}`, `{"namespace":"Shop","name":"orders"}`,
		`{"namespace":"shop","name":"or/ders"}`, `{"namespace":"shop","name":"orders","extra":1}`,
		`{"namespace":"shop","name":"orders"}{"namespace":"shop","name":"orders"}`, `[1]`,
		`{"namespace":"shop","name":"` + strings.Repeat("a", 2000) + `"}`} {
		_, err := activation.Decode([]byte(bad))
		assert.ErrorIs(t, err, activation.ErrInvalid, bad)
	}
	// At most MaxBytes, white space included.
	msg := string(activation.Encode(fn))
	_, err = activation.Decode([]byte(msg + strings.Repeat(" ", activation.MaxBytes-len(msg))))
	assert.NoError(t, err, "exactly MaxBytes")
	_, err = activation.Decode([]byte(msg + strings.Repeat(" ", activation.MaxBytes-len(msg)+1)))
	assert.ErrorIs(t, err, activation.ErrInvalid, "one byte more")
}
