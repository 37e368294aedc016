package logging_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/logging"
)

// lines parses every JSON line of buf.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		out = append(out, m)
	}
	return out
}

func TestLayout(t *testing.T) {
	var buf bytes.Buffer
	log, err := logging.New(&buf, "info", logging.JSON)
	require.NoError(t, err)
	logging.Component(log, "dispatcher").Warn("delivery failed", "eventID", "e1", "error", errors.New("boom"))
	got := lines(t, &buf)
	require.Len(t, got, 1)
	l := got[0]
	assert.Equal(t, "WARN", l["level"])
	assert.Equal(t, "delivery failed", l["msg"])
	assert.Equal(t, "dispatcher", l["component"])
	assert.Equal(t, "boom", l["error"])
	assert.Equal(t, "e1", l["eventID"])
	_, err = time.Parse(time.RFC3339Nano, l["time"].(string))
	assert.NoError(t, err, "time is RFC 3339")
}

func TestLogrBridge(t *testing.T) {
	var buf bytes.Buffer
	log, err := logging.New(&buf, "debug", logging.JSON)
	require.NoError(t, err)
	lr := logging.Logr(logging.Component(log, "controller")).WithName("setup")
	lr.Error(errors.New("no cache"), "starting failed", "workers", 8)
	lr.V(1).Info("detail")
	lr.V(4).Info("deeper")
	lr.V(5).Info("below debug")
	got := lines(t, &buf)
	require.Len(t, got, 3)
	assert.Equal(t, "ERROR", got[0]["level"])
	assert.Equal(t, "no cache", got[0]["error"], "logr's err key is the layout's error")
	assert.NotContains(t, got[0], "err")
	assert.Equal(t, "setup", got[0]["logger"])
	assert.Equal(t, "controller", got[0]["component"])
	assert.Equal(t, "DEBUG", got[1]["level"], "V(1) is debug, not DEBUG+3")
	assert.Equal(t, "DEBUG", got[2]["level"])

	buf.Reset()
	log, err = logging.New(&buf, "info", logging.JSON)
	require.NoError(t, err)
	logging.Logr(log).V(1).Info("hidden")
	assert.Empty(t, buf.String(), "V(1) is below info")
}

func TestText(t *testing.T) {
	var buf bytes.Buffer
	log, err := logging.New(&buf, "warn", logging.Text)
	require.NoError(t, err)
	logging.Component(log, "gateway").Info("hidden")
	logging.Component(log, "gateway").Error("failed", "err", "x")
	assert.Contains(t, buf.String(), "level=ERROR msg=failed component=gateway error=x")
	assert.NotContains(t, buf.String(), "hidden")
}

func TestParseRefusesUnknownValues(t *testing.T) {
	tests := map[string]struct {
		parse func() error
		want  error
	}{
		"level loud":    {func() error { _, err := logging.ParseLevel("loud"); return err }, logging.ErrInvalidLevel},
		"level empty":   {func() error { _, err := logging.ParseLevel(""); return err }, logging.ErrInvalidLevel},
		"level number":  {func() error { _, err := logging.ParseLevel("-4"); return err }, logging.ErrInvalidLevel},
		"format yaml":   {func() error { _, err := logging.ParseFormat("yaml"); return err }, logging.ErrInvalidFormat},
		"new bad level": {func() error { _, err := logging.New(&bytes.Buffer{}, "trace", logging.JSON); return err }, logging.ErrInvalidLevel},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, tt.parse(), tt.want)
		})
	}
	for _, s := range []string{"debug", "INFO", "Warn", "error"} {
		_, err := logging.ParseLevel(s)
		assert.NoError(t, err, s)
	}
}
