package webview_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/local/webview"
)

// The page shows the start of each dead letter's data and reads no more
// of it: 100 letters of 900 KiB each (90 MiB) cost the page the bytes of
// their headers, not their data, and the start of the data is shown as
// before.
func TestDeadLetterPreviewsReadABoundedPrefix(t *testing.T) {
	const letters, size = 100, 900 << 10
	f := newFixture(t, webview.Config{Interval: time.Hour, MaxDeadLetters: letters})
	data := []byte(`{"pad":"` + strings.Repeat("x", size) + `"}`)
	for i := range letters {
		msg := deadletter.NewMsg(nil, data, deadletter.Failure{
			Namespace: "default", Subscription: "payments", Status: 500, Error: "sink answered 500", Attempts: 2,
			Sequence: uint64(i + 1), At: time.Now(),
		})
		msg.Header.Set("ce-id", "big")
		_, err := f.js.PublishMsg(context.Background(), msg)
		require.NoError(t, err)
	}
	ctx := context.Background()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	read := f.nc.Stats().InBytes
	start := time.Now()
	st := f.view.State(ctx)
	took := time.Since(start)
	read = f.nc.Stats().InBytes - read
	runtime.ReadMemStats(&after)
	// The allocations include the embedded NATS server's (it loads each
	// message from its store to send its headers): logged, not asserted.
	t.Logf("a page of %d dead letters of %d KiB: %v, %d bytes read from NATS and %d allocated per letter",
		letters, size>>10, took, read/letters, (after.TotalAlloc-before.TotalAlloc)/letters)

	require.Len(t, st.DeadLetters, letters)
	assert.Equal(t, `{"pad":"`+strings.Repeat("x", 192)+"…", st.DeadLetters[0].Data, "the preview is the data's first 200 bytes")
	assert.Less(t, read/letters, uint64(4<<10), "bytes read from NATS per letter listed")
}
