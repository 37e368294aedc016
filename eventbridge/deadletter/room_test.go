package deadletter

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTheTurnGoesRoundEveryNamespaceButTheTop: the namespace weighed in
// turn is each of those outside the 4 with the most letters, by name, and
// then the first again, never the writing one; none when the top is all.
func TestTheTurnGoesRoundEveryNamespaceButTheTop(t *testing.T) {
	h := holdings{held: []held{{"a", 1}, {"b", 9}, {"c", 2}, {"d", 9}, {"e", 9}, {"f", 9}, {"g", 3}}}
	assert.Equal(t, []int{1, 3, 4, 5}, h.top(), "b, d, e and f hold the most")
	var turns []string
	last := ""
	for range 5 {
		last = h.after(last, "c")
		turns = append(turns, last)
	}
	assert.Equal(t, []string{"a", "g", "a", "g", "a"}, turns, "a, then g (c writes), then a again")
	assert.Equal(t, "c", h.after("a", ""), "c is weighed in its turn when another writes")
	assert.Empty(t, holdings{held: h.held[1:2]}.after("", ""), "the only namespace is in the top")
}
