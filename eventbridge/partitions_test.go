package eventbridge_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge"
)

// TestPartitionsWaitForTheDispatcher: the publisher would spread events
// over the partitions, whose events the dispatcher does not pull yet; an
// event bridge of more than one partition is refused rather than leaving
// them undelivered.
func TestPartitionsWaitForTheDispatcher(t *testing.T) {
	cfg := eventbridge.DefaultConfig()
	require.NoError(t, cfg.Validate())
	cfg.Streams.Partitions = 3
	err := cfg.Validate()
	require.ErrorIs(t, err, eventbridge.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "the dispatcher delivers the events of one partition only so far")
}
