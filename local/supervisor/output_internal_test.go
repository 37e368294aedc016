package supervisor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/test/logtest"
)

// gatedWriter holds its writes until open is closed, and keeps them.
type gatedWriter struct {
	open    chan struct{}
	entered chan struct{} // gets a value when a write starts waiting
	logtest.Buffer
}

func newGatedWriter() *gatedWriter {
	return &gatedWriter{open: make(chan struct{}), entered: make(chan struct{}, 1)}
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.open
	return g.Buffer.Write(p)
}

// TestBacklogOfOneFunctionDoesNotDelayAnother: with 1 MiB of 64 KiB lines
// of one function waiting, the few short lines of another, queued after
// them, are written before any of them: each function's turn gives it
// about outputQuantum bytes, which a long line needs several turns for.
func TestBacklogOfOneFunctionDoesNotDelayAnother(t *testing.T) {
	g := newGatedWriter()
	w := NewSyncWriter(g)
	gate := w.newShare().newSource("gate | ")
	require.NoError(t, gate.push([]byte("first")))
	<-g.entered // the writer holds the gate's line: the others queue

	noisy := w.newShare().newSource("default/noisy-1 | ")
	long := []byte(strings.Repeat("x", maxLine-64))
	for range 16 {
		require.NoError(t, noisy.push(long))
	}
	quiet := w.newShare().newSource("default/quiet-1 | ")
	for i := range 10 {
		require.NoError(t, quiet.push(fmt.Appendf(nil, "line %d", i)))
	}
	close(g.open)
	require.Eventually(t, func() bool { return strings.Count(g.String(), "\n") == 1+16+10 }, 10*time.Second, time.Millisecond)
	out := g.String()
	assert.Less(t, strings.Index(out, "default/quiet-1 | line 9\n"), strings.Index(out, "default/noisy-1 | "),
		"the quiet function's lines come before the noisy one's backlog")
}

// TestSourceSaysHowManyLinesItDropped: lines past its function's bound are
// dropped whole, and once the lines kept are written, one line says how
// many were dropped, without the process having to end or print again.
func TestSourceSaysHowManyLinesItDropped(t *testing.T) {
	g := newGatedWriter()
	w := NewSyncWriter(g)
	src := w.newShare().newSource("default/fn-1 | ")
	require.NoError(t, src.push([]byte("first")))
	<-g.entered
	line := []byte(strings.Repeat("x", 1000))
	kept := outputBudget / (len("default/fn-1 | ") + len(line) + 1)
	for range kept + 250 {
		require.NoError(t, src.push(line))
	}
	close(g.open)
	want := "default/fn-1 | kfn: 250 lines dropped: the output came faster than it could be written\n"
	require.Eventually(t, func() bool { return strings.HasSuffix(g.String(), want) }, 10*time.Second, time.Millisecond)
	assert.Equal(t, 1+kept+1, strings.Count(g.String(), "\n"), "the first line, those kept, and the one saying how many were dropped")
}
