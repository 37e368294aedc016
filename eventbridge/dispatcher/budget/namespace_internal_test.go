package budget

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestWaterLevel: the level at which those holding more than it, cut to
// it, bring the sum to the target; those holding less keep theirs.
func TestWaterLevel(t *testing.T) {
	tests := map[string]struct {
		seen   map[string]int64
		target int64
		want   int64
	}{
		"equal shares":         {seen: map[string]int64{"a": 100, "b": 100, "c": 100}, target: 150, want: 50},
		"a small one kept":     {seen: map[string]int64{"a": 10, "b": 100, "c": 100}, target: 110, want: 50},
		"only the largest cut": {seen: map[string]int64{"a": 10, "b": 20, "c": 100}, target: 80, want: 50},
		"everything":           {seen: map[string]int64{"a": 10, "b": 20}, target: 30, want: 20},
		"nothing":              {seen: map[string]int64{"a": 10, "b": 20}, target: 0, want: 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.want, waterLevel(tt.seen, tt.target))
		})
	}
}
