package tail

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBufferKeepsTheLastLines(t *testing.T) {
	tests := map[string]struct {
		max    int
		writes []string
		want   string
	}{
		"nothing written":    {max: 8, want: ""},
		"short output whole": {max: 8, writes: []string{"a\n", "b\n"}, want: "a\nb\n"},
		"long output from a line start": {
			max: 8, writes: []string{"first line\n", "second\n", "third\n"}, want: "third\n",
		},
		"many writes bounded": {
			max: 8, writes: append(strings.Split(strings.Repeat("x", 100), ""), "end\n"), want: "xxxxend\n",
		},
		"one long line cut": {max: 4, writes: []string{"abcdefgh"}, want: "efgh"},
		"size below one":    {max: 0, writes: []string{"ab"}, want: "b"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := New(tc.max)
			for _, w := range tc.writes {
				n, err := b.Write([]byte(w))
				require.NoError(t, err)
				require.Equal(t, len(w), n)
			}
			require.Equal(t, tc.want, b.String())
			require.LessOrEqual(t, b.held(), 2*max(tc.max, 1))
		})
	}
}

func TestBufferConcurrentWrites(t *testing.T) {
	b := New(64)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
			}
		})
	}
	wg.Wait()
	require.Equal(t, strings.Repeat("line\n", 12), b.String(), "the last whole lines within 64 bytes")
}

// held is the size of what b holds now, for tests of its bound.
func (b *Buffer) held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf)
}
