package eventbridge_test

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge"
)

// TestPartitionsFlag: -partitions sets the count of the event stream's
// partitions, one by default; outside 1 to 16 it is refused, naming the
// bound.
func TestPartitionsFlag(t *testing.T) {
	cfg := eventbridge.DefaultProcess()
	require.NoError(t, cfg.Validate())
	assert.Equal(t, 1, cfg.Streams.PartitionCount())
	for _, n := range []string{"0", "17", "-1"} {
		cfg := eventbridge.DefaultProcess()
		fs := flag.NewFlagSet("eventbridge", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg.RegisterFlags(fs)
		require.NoError(t, fs.Parse([]string{"-partitions", n}))
		err := cfg.Validate()
		if n == "0" {
			require.NoError(t, err, "0 is 1")
			continue
		}
		require.ErrorIs(t, err, eventbridge.ErrInvalidConfig, n)
		assert.Contains(t, err.Error(), "partitions must be between 1 and 16", n)
	}
	fs := flag.NewFlagSet("eventbridge", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"-partitions", "3"}))
	require.NoError(t, cfg.Validate())
	assert.Equal(t, []string{"kfn-events", "kfn-events-1", "kfn-events-2"}, cfg.Streams.PartitionStreams())
}
