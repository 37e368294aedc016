package publisher

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPublishingSharesOnlyAmongSenders: past its bound, the publisher
// refuses a sender at its share only while another sender has requests
// in progress; a sender alone, anonymous publishers in Kyma's model, is
// never refused.
func TestPublishingSharesOnlyAmongSenders(t *testing.T) {
	p := newPublishing(4)
	for range 6 {
		require.NoError(t, p.enter(""), "a sender alone")
	}
	require.NoError(t, p.enter("team-b"), "another sender, below its share")
	assert.ErrorIs(t, p.enter(""), ErrOverShare, "past its share beside another")
	p.leave("team-b")
	assert.NoError(t, p.enter(""), "alone again")
}
