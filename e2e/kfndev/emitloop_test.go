package kfndev_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loopHandler emits every event it receives again, of the type it
// subscribes to: a loop that nothing in its code ends.
const loopHandler = `module.exports = {
  main: async function (event) {
    console.log('ping ' + (event.extensions.request.headers['ce-kfnhops'] || '0'));
    try {
      await event.emitCloudEvent('loop.ping.v1', 'loop', {});
    } catch (e) {
      console.log('emit refused: ' + e.message);
    }
    return '';
  },
};
`

const loopConfig = `name: echo
namespace: default
runtime: nodejs22
source:
  sourceType: inline
subscriptions:
  - name: echo
    source: loop
    types:
      - loop.ping.v1
schemaVersion: v1
`

// TestEmitLoopEndsAtTheHopLimit runs a function that emits each event it
// receives as a new one of the type it subscribes to, and publishes one
// seed: the chain goes 16 hops past the seed (the event bridge's hop limit),
// the 17th emit is refused with the reason, and nothing more is delivered.
// Without the hop count on emitted events it ran as a storm of ~2,900
// deliveries a second until kfn dev was stopped.
func TestEmitLoopEndsAtTheHopLimit(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "echo"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "echo", "handler.js"), []byte(loopHandler), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "echo", "config.yaml"), []byte(loopConfig), 0o644))
	dev := startDev(t, dir)

	publishEvent(t, dev.addr, "loop.ping.v1", "loop", "seed", `{}`)

	pings := func() int { return strings.Count(dev.out.String(), "ping ") }
	require.Eventually(t, func() bool { return strings.Contains(dev.out.String(), "emit refused") }, 60*time.Second, 50*time.Millisecond,
		"the emit past the hop limit is refused: %s", lastLines(dev.out.String(), 20))
	assert.Contains(t, dev.out.String(), "ping 16")
	assert.Contains(t, dev.out.String(), "at most 16 are allowed")
	require.Never(t, func() bool { return pings() > 17 }, 2*time.Second, 50*time.Millisecond, "no delivery past the limit")
	assert.Equal(t, 17, pings(), "the seed and 16 hops")
}
