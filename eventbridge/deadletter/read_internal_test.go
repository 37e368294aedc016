package deadletter

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
)

// A reader has read all a consumer sent when it read up to the consumer's
// last delivery; a consumer made anew by the ordered consumer's reset,
// numbered from 1 again, has sent nothing read unless it sent nothing.
func TestAllOfWhatAConsumerSent(t *testing.T) {
	info := func(name string, delivered uint64) *jetstream.ConsumerInfo {
		return &jetstream.ConsumerInfo{Name: name, Delivered: jetstream.SequenceInfo{Consumer: delivered}}
	}
	tests := map[string]struct {
		last read
		info *jetstream.ConsumerInfo
		want bool
	}{
		"nothing read, nothing sent":         {read{}, info("c1", 0), true},
		"nothing read, one on its way":       {read{}, info("c1", 1), false},
		"read up to the last sent":           {read{"c1", 50}, info("c1", 50), true},
		"one sent after the last read":       {read{"c1", 50}, info("c1", 51), false},
		"reset: ten sent by the new one":     {read{"c1", 50}, info("c2", 10), false},
		"reset: the new one has sent none":   {read{"c1", 50}, info("c2", 0), true},
		"read of the new one up to its last": {read{"c2", 10}, info("c2", 10), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.last.allOf(tc.info))
		})
	}
}
