package jsstream

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A NATS server before 2.11 ignores a consumer's priority group (JSON it
// does not know): what it answers is checked, and an ordered consumer
// that it would hand to every replica is refused. (The embedded server is
// 2.15: the old server's answer is made here.)
func TestAPriorityGroupTheServerIgnoredIsAnError(t *testing.T) {
	want := jetstream.ConsumerConfig{PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{"kfn"}}
	require.ErrorIs(t, applied(want, jetstream.ConsumerConfig{}), ErrNoPriorityGroups)
	assert.NoError(t, applied(want, want))
	assert.NoError(t, applied(jetstream.ConsumerConfig{}, jetstream.ConsumerConfig{}))
}
