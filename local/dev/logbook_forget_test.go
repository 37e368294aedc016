package dev

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLogBookForgetsAFunction: Forget drops a function's lines and what
// they counted against the book's bound; the function's later lines are
// kept anew and still go to its followers; other functions keep theirs.
func TestLogBookForgetsAFunction(t *testing.T) {
	b := newLogBook(1000)
	printLines(t, b, "default/renamed", 3, 100)
	printLines(t, b, "default/other", 2, 100)
	_, next, stop := b.Follow("default/renamed")
	defer stop()

	b.Forget("default/renamed")
	assert.Empty(t, b.Lines("default/renamed"))
	assert.Len(t, b.Lines("default/other"), 2)
	b.mu.Lock()
	assert.Equal(t, b.bytes["default/other"], b.total, "only the other function's lines count")
	_, ok := b.lines["default/renamed"]
	b.mu.Unlock()
	assert.False(t, ok, "no entry is left of the forgotten function")
	b.Forget("default/never") // forgetting an unknown function is harmless

	printLines(t, b, "default/renamed", 1, 100)
	assert.Len(t, b.Lines("default/renamed"), 1)
	select {
	case line := <-next:
		assert.True(t, strings.HasPrefix(line, "default/renamed-1 | 0 "), "a follower still follows: %.40q", line)
	default:
		t.Error("a follower of a forgotten function no longer gets its lines")
	}
}

// TestLogBookKeysLinesByFunction: a process's lines and kfn's lines about
// a function go to the function's key, also when its name has a dash, so
// that Forget of the function leaves none of them.
func TestLogBookKeysLinesByFunction(t *testing.T) {
	for line, key := range map[string]string{
		"default/fn-1 | hello":                    "default/fn",
		"default/my-fn-12 | kfn: not loaded":      "default/my-fn",
		"default/my-fn | kfn: warning: something": "default/my-fn",
		"default/fn | kfn: process exited":        "default/fn",
		"kfn: project changed, reloading":         kfnLog,
		"time=... level=INFO msg=x":               kfnLog,
	} {
		assert.Equal(t, key, lineKey(line), "%q", line)
	}
}
