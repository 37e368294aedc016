package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/test/logtest"
)

// TestDevLogger: kfn dev's components log in the layout of kfn's servers,
// at the level --log-level gives; --log-format text writes the same keys as
// key=value.
func TestDevLogger(t *testing.T) {
	var buf logtest.Buffer
	log, err := devLogger(&buf, "warn", "json")
	require.NoError(t, err)
	d := logging.Component(log, "dispatcher")
	d.Info("hidden")
	d.Warn("delivery failed", "eventID", "e-1", "namespace", "default", "subscription", "orders", "function", "orders")
	lines := logtest.CheckLayout(t, buf.String(), "dispatcher")
	require.Len(t, lines, 1)
	assert.Equal(t, "e-1", lines[0].String("eventID"))

	var text logtest.Buffer
	log, err = devLogger(&text, "info", "text")
	require.NoError(t, err)
	logging.Component(log, "scaler").Info("ready")
	assert.Contains(t, text.String(), "level=INFO msg=ready component=scaler")

	for _, bad := range [][2]string{{"loud", "json"}, {"info", "yaml"}} {
		_, err := devLogger(&buf, bad[0], bad[1])
		assert.Error(t, err, bad)
	}
}
