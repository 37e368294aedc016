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

// senderFunctions are two functions of namespace team-a: relay emits an
// event for each it receives, which witness logs with the namespace the
// event bridge recorded as its sender (the header ce-kfnsendernamespace).
var senderFunctions = map[string]struct{ handler, config string }{
	"relay": {`module.exports = {
  main: async function (event) {
    await event.emitCloudEvent('relayed.v1', 'relay', {});
    return '';
  },
};
`, `name: relay
namespace: team-a
runtime: nodejs22
source:
  sourceType: inline
subscriptions:
  - name: relay
    source: outside
    types:
      - seed.v1
schemaVersion: v1
`},
	"witness": {`module.exports = {
  main: async function (event) {
    console.log('sent by [' + (event.extensions.request.headers['ce-kfnsendernamespace'] || '') + ']');
    return '';
  },
};
`, `name: witness
namespace: team-a
runtime: nodejs22
source:
  sourceType: inline
subscriptions:
  - name: witness
    source: relay
    types:
      - relayed.v1
schemaVersion: v1
`},
}

// TestEmittedEventsCarryTheirNamespace: an event a function emits is
// recorded as sent by the function's namespace (kfn dev gives each
// namespace's processes a token of its own, as a pod's ServiceAccount
// token in a cluster), so that it is held to that namespace's bounds (its
// publish rate and bytes, its turns); the user's own publish stays
// anonymous. Before, kfn dev's functions sent no token: every emitted
// event was anonymous, held to no namespace's bounds, and stood in front
// of every namespace's publishes.
func TestEmittedEventsCarryTheirNamespace(t *testing.T) {
	dir := t.TempDir()
	for name, f := range senderFunctions {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, "handler.js"), []byte(f.handler), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, "config.yaml"), []byte(f.config), 0o644))
	}
	dev := startDev(t, dir)

	publishEvent(t, dev.addr, "seed.v1", "outside", "seed", `{}`)

	require.Eventually(t, func() bool { return strings.Contains(dev.out.String(), "sent by [") }, 60*time.Second, 50*time.Millisecond,
		"the emitted event is delivered: %s", lastLines(dev.out.String(), 20))
	assert.Contains(t, dev.out.String(), "sent by [team-a]")
}
