package deps_test

import (
	"context"
	"errors"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes/deps"
)

// TestEnsureGivesUpAfterItsTimeout: an installer that never ends (npm
// running a package.json's postinstall script that loops forever) is
// stopped at the Installer's timeout, not left to hold the caller, and the
// error says which limit it hit. The fake npm stands in for real npm: the
// deadline is the Installer's, whatever runs under it, and no registry is
// needed.
func TestEnsureGivesUpAfterItsTimeout(t *testing.T) {
	npm, calls := fakeInstaller(t, "echo 'running postinstall'; exec sleep 600")
	inst, err := deps.New(t.TempDir(), deps.WithNPM(npm), deps.WithTimeout(500*time.Millisecond))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := inst.Ensure(context.Background(), runtime(t, "nodejs22"), `{"dependencies":{"x":"1"},"scripts":{"postinstall":"while :; do :; done"}}`, deps.Registry{})
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Ensure did not give up on an installer that never ends")
	}
	require.Error(t, err)
	assert.True(t, errors.Is(err, deps.ErrInstall), err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), err)
	assert.Contains(t, err.Error(), "did not finish within 500ms")
	assert.Contains(t, err.Error(), "running postinstall", "with the installer's output")
	assert.Equal(t, 1, countCalls(t, calls))

	_, err = deps.New(t.TempDir(), deps.WithTimeout(0))
	assert.True(t, errors.Is(err, deps.ErrInvalidOption), "a zero timeout is refused: %v", err)
}

// TestEnsureKeepsABoundedTailOfOutput: an installer that writes a great
// deal without a newline (16 MiB here; 400 MB took kfn dev's heap to 2 GiB
// and minutes of rescanning) costs a bounded buffer: the error carries the
// tail of the output, the progress writer gets the line cut at its cap,
// and what the installation allocates stays far below the output's size.
func TestEnsureKeepsABoundedTailOfOutput(t *testing.T) {
	const size = 16 << 20
	npm, _ := fakeInstaller(t, `head -c `+itoa(size)+` /dev/zero | tr '\0' 'x'; echo; echo "npm error the last words"; exit 1`)
	progress := &lineStats{}
	inst, err := deps.New(t.TempDir(), deps.WithNPM(npm), deps.WithProgress(progress))
	require.NoError(t, err)

	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	_, err = inst.Ensure(context.Background(), runtime(t, "nodejs22"), `{"dependencies":{"x":"1"}}`, deps.Registry{})
	goruntime.ReadMemStats(&after)

	require.Error(t, err)
	assert.True(t, errors.Is(err, deps.ErrInstall), err)
	assert.Contains(t, err.Error(), "npm error the last words")
	assert.Less(t, len(err.Error()), 20<<10, "the error carries the output's tail only")
	assert.Less(t, progress.longest(), 8<<10, "a progress line is cut at the cap")
	assert.Contains(t, progress.text(), "kfn: npm install | npm error the last words", "lines after a cut one still come")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(size/2),
		"allocated %d bytes for %d bytes of output", after.TotalAlloc-before.TotalAlloc, size)
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// lineStats is a progress writer that keeps the length of the longest line
// written and the first 64 KiB of the text.
type lineStats struct {
	mu   sync.Mutex
	max  int
	head strings.Builder
}

func (l *lineStats) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimSuffix(string(p), "\n"), "\n") {
		l.max = max(l.max, len(line))
		if l.head.Len() < 64<<10 {
			l.head.WriteString(line[:min(len(line), 1024)] + "\n")
		}
	}
	return len(p), nil
}

func (l *lineStats) longest() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.max
}

func (l *lineStats) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head.String()
}
