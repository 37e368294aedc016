package testcluster

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTailBufferKeepsTheLastLines(t *testing.T) {
	tests := map[string]struct {
		writes []string
		want   string
	}{
		"short output whole": {
			writes: []string{"a\n", "b\n"},
			want:   "a\nb\n",
		},
		"long output from a line start": {
			writes: []string{"first line\n", "second\n", "third\n"},
			want:   "third\n",
		},
		"many writes bounded": {
			writes: append(strings.Split(strings.Repeat("x", 100), ""), "end\n"),
			want:   "xxxxend\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := &tailBuffer{max: 8}
			for _, w := range tc.writes {
				n, err := b.Write([]byte(w))
				require.NoError(t, err)
				require.Equal(t, len(w), n)
			}
			require.Equal(t, tc.want, b.String())
			require.LessOrEqual(t, len(b.buf), 2*b.max)
		})
	}
}
