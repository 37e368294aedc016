package eventbridge_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge"
)

// TestPartitionsAreNotEnabledYet: an event bridge of more than one
// partition is refused until partitions taken away are drained.
func TestPartitionsAreNotEnabledYet(t *testing.T) {
	cfg := eventbridge.DefaultConfig()
	require.NoError(t, cfg.Validate())
	cfg.Streams.Partitions = 3
	err := cfg.Validate()
	require.ErrorIs(t, err, eventbridge.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "more than one is not enabled yet")
}
