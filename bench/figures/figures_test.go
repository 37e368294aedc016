package figures

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTargetMet(t *testing.T) {
	tests := map[string]struct {
		target       Target
		value, ratio float64
		want         bool
	}{
		"unset":              {Target{}, 1, 1, true},
		"under max":          {Target{Max: 5}, 4, 0, true},
		"over max":           {Target{Max: 5}, 6, 0, false},
		"under min":          {Target{Min: 10}, 9, 0, false},
		"ratio under min":    {Target{MinRatio: 0.85}, 1, 0.84, false},
		"ratio at min":       {Target{MinRatio: 0.85}, 1, 0.85, true},
		"ratio under max":    {Target{MaxRatio: 1.5}, 1, 1.2, true},
		"ratio over max":     {Target{MaxRatio: 1.5}, 1, 1.6, false},
		"both bounds, value": {Target{Max: 5, MaxRatio: 1.5}, 6, 1, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.target.Met(tt.value, tt.ratio))
			assert.Equal(t, tt.target != Target{}, tt.target.Set())
		})
	}
}
