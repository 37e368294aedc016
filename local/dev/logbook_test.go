package dev

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// longLine is the longest line a process's output gives kfn dev: a 64 KiB
// line without its newline yet and the 32 KiB read that carried it on.
const longLine = 96 << 10

// printLines writes n lines of size bytes (with the prefix of process 1 of
// key) to b, numbered from 0.
func printLines(t *testing.T, b *logBook, key string, n, size int) {
	t.Helper()
	for i := range n {
		head := fmt.Sprintf("%s-1 | %d ", key, i)
		_, err := fmt.Fprintln(b, head+strings.Repeat("x", size-len(head)))
		require.NoError(t, err)
	}
}

func keptBytes(lines []string) int {
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	return n
}

// TestLogBookBoundsTheBytesOfEachFunction: a function printing its
// longest lines keeps at most 1 MiB of them, its newest, in order.
func TestLogBookBoundsTheBytesOfEachFunction(t *testing.T) {
	b := newLogBook(1000)
	printLines(t, b, "default/big", 200, longLine)
	kept := b.Lines("default/big")
	require.LessOrEqual(t, keptBytes(kept), 1<<20, "bytes kept of one function (%d lines)", len(kept))
	require.NotEmpty(t, kept)
	for i, l := range kept {
		assert.True(t, strings.HasPrefix(l, fmt.Sprintf("default/big-1 | %d ", 200-len(kept)+i)), "the newest lines, in order")
	}
	assert.Len(t, kept, 10, "as many as 1 MiB holds")
}

// TestLogBookBoundsTheBytesOfAllFunctions: 80 functions that each print
// less than their own bound make the book keep at most 64 MiB, and the
// lines given up are those of the functions that had the most, so a
// quiet function loses none of its lines and the noisy ones end up with
// as many as each other.
func TestLogBookBoundsTheBytesOfAllFunctions(t *testing.T) {
	b := newLogBook(1000)
	printLines(t, b, "default/quiet", 5, 80)
	keys := []string{"default/quiet"}
	for f := range 80 {
		key := fmt.Sprintf("default/noisy-%d", f)
		keys = append(keys, key)
		printLines(t, b, key, 10, longLine)
	}
	total, fewest, most := 0, 10, 0
	for _, key := range keys {
		kept := b.Lines(key)
		total += keptBytes(kept)
		if key != "default/quiet" {
			fewest, most = min(fewest, len(kept)), max(most, len(kept))
		}
	}
	assert.LessOrEqual(t, total, 64<<20, "bytes kept of all functions")
	assert.Len(t, b.Lines("default/quiet"), 5, "the quiet function keeps its lines")
	assert.LessOrEqual(t, most-fewest, 1, "the noisy functions gave up lines evenly (%d to %d kept)", fewest, most)
	assert.Positive(t, fewest, "every noisy function keeps some lines")
}
