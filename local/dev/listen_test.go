package dev_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/local/dev"
)

// TestWarnsWhenListeningBeyondLoopback: kfn dev bound to every address
// says, once, who can then reach it; bound to loopback it says nothing.
func TestWarnsWhenListeningBeyondLoopback(t *testing.T) {
	for addr, warns := range map[string]bool{"127.0.0.1:0": false, "0.0.0.0:0": true} {
		t.Run(addr, func(t *testing.T) {
			dir := t.TempDir()
			out := &syncBuffer{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			started := make(chan struct{}, 1)
			go func() {
				done <- dev.Run(ctx, dev.Config{Dir: dir, Addr: addr, Output: out, WatchInterval: -1}, func(*dev.Platform) { started <- struct{}{} })
			}()
			select {
			case <-started:
			case err := <-done:
				t.Fatalf("kfn dev stopped: %v\n%s", err, out.String())
			case <-time.After(60 * time.Second):
				t.Fatalf("kfn dev did not start\n%s", out.String())
			}
			cancel()
			require.NoError(t, <-done)
			assert.Equal(t, warns, strings.Contains(out.String(), "kfn dev listens beyond this machine"), out.String())
		})
	}
}
