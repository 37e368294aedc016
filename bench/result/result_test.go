package result

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoundTripSkipsText(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	want := []Figure{
		{Name: "a/b", Unit: "ms", Value: 1.5, Anchor: &Anchor{Name: "plain", Value: 1}},
		{Name: "a/c", Unit: "events/s", Value: 10, X: 100, XLabel: "Subscriptions"},
	}
	b.WriteString("a human line\n")
	for _, f := range want {
		require.NoError(t, w.Emit(f))
	}
	got, err := Parse(&b)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestInvalid(t *testing.T) {
	tests := map[string]string{
		"no name":     `{"unit":"ms","value":1}`,
		"no unit":     `{"name":"x","value":1}`,
		"broken JSON": `{"name":`,
		"anchor name": `{"name":"x","unit":"ms","anchor":{"value":1}}`,
	}
	for name, line := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(line + "\n"))
			assert.True(t, errors.Is(err, ErrInvalid), "%v", err)
		})
	}
	assert.ErrorIs(t, NewWriter(nil).Emit(Figure{Name: "x"}), ErrInvalid)
}

func TestRatio(t *testing.T) {
	assert.Equal(t, 0.5, Figure{Value: 1, Anchor: &Anchor{Value: 2}}.RatioOrComputed())
	assert.Equal(t, 0.7, Figure{Value: 1, Anchor: &Anchor{Value: 2}, Ratio: 0.7}.RatioOrComputed())
	assert.Equal(t, 0.0, Figure{Value: 1}.RatioOrComputed())
}
