package stream_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"
)

// TestDeadLetterNamespaceBytes: a 16th of the dead-letter stream by
// default, at least one event of the largest size and at most the stream.
func TestDeadLetterNamespaceBytes(t *testing.T) {
	tests := map[string]struct {
		modify func(*stream.Config)
		want   int64
	}{
		"default":               {modify: func(*stream.Config) {}, want: 16 << 20},
		"set":                   {modify: func(c *stream.Config) { c.DeadLetterMaxBytesPerNamespace = 3 << 20 }, want: 3 << 20},
		"a small stream":        {modify: func(c *stream.Config) { c.DeadLetterMaxBytes = 8 << 20 }, want: 2 << 20},
		"smaller than an event": {modify: func(c *stream.Config) { c.DeadLetterMaxBytes = 1 << 20 }, want: 1 << 20},
		"unlimited":             {modify: func(c *stream.Config) { c.DeadLetterMaxBytes = -1 }, want: 16 << 20},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := stream.DefaultConfig()
			tt.modify(&c)
			require.NoError(t, c.Validate())
			assert.Equal(t, tt.want, c.DeadLetterNamespaceBytes())
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := map[string]struct {
		modify  func(*stream.Config)
		wantErr string
	}{
		"defaults":                      {modify: func(*stream.Config) {}},
		"memory":                        {modify: func(c *stream.Config) { c.Storage = stream.StorageMemory }},
		"unlimited":                     {modify: func(c *stream.Config) { c.MaxBytes, c.MaxMsgSize, c.DeadLetterMaxBytes = -1, -1, -1 }},
		"empty name":                    {modify: func(c *stream.Config) { c.EventStream = "" }, wantErr: "event stream name"},
		"dot in name":                   {modify: func(c *stream.Config) { c.DeadLetterStream = "a.b" }, wantErr: "dead-letter stream name"},
		"no bucket name":                {modify: func(c *stream.Config) { c.EventStream = "kfn:events" }, wantErr: `names the lock bucket "kfn:events-locks"`},
		"same names":                    {modify: func(c *stream.Config) { c.DeadLetterStream = c.EventStream }, wantErr: `must not have the name of an event stream's partition (kfn-events-1 to -15 included`},
		"a partition's name":            {modify: func(c *stream.Config) { c.Partitions, c.DeadLetterStream = 3, "kfn-events-2" }, wantErr: "must not have the name of an event stream's partition"},
		"a partition's name taken away": {modify: func(c *stream.Config) { c.Partitions, c.DeadLetterStream = 1, "kfn-events-15" }, wantErr: "must not have the name of an event stream's partition"},
		"partitions":                    {modify: func(c *stream.Config) { c.Partitions = stream.MaxPartitions }},
		"too many partitions":           {modify: func(c *stream.Config) { c.Partitions = stream.MaxPartitions + 1 }, wantErr: "partitions must be between 1 and 16, not 17"},
		"negative partitions":           {modify: func(c *stream.Config) { c.Partitions = -1 }, wantErr: "partitions must be between 1 and 16, not -1"},
		"bad storage":                   {modify: func(c *stream.Config) { c.Storage = "disk" }, wantErr: `storage must be "file" or "memory", not "disk"`},
		"zero replicas":                 {modify: func(c *stream.Config) { c.Replicas = 0 }, wantErr: "replicas must be between 1 and 5"},
		"zero bytes":                    {modify: func(c *stream.Config) { c.MaxBytes = 0 }, wantErr: "max bytes must be positive"},
		"zero msg size":                 {modify: func(c *stream.Config) { c.MaxMsgSize = 0 }, wantErr: "max message size"},
		"zero consumers":                {modify: func(c *stream.Config) { c.MaxConsumers = 0 }, wantErr: "max consumers (Subscriptions) must be positive"},
		"unlimited consumers":           {modify: func(c *stream.Config) { c.MaxConsumers = -1 }, wantErr: "the server's default, 1,000"},
		"no dedup window":               {modify: func(c *stream.Config) { c.Duplicates = 0 }, wantErr: "de-duplication window"},
		"negative dead age":             {modify: func(c *stream.Config) { c.DeadLetterMaxAge = -time.Second }, wantErr: "dead-letter max age"},
		"zero dead bytes":               {modify: func(c *stream.Config) { c.DeadLetterMaxBytes = 0 }, wantErr: "dead-letter max bytes"},
		"dead bytes per namespace over the stream": {modify: func(c *stream.Config) { c.DeadLetterMaxBytesPerNamespace = c.DeadLetterMaxBytes + 1 }, wantErr: "must not be above the dead-letter stream's"},
		"dead bytes per namespace below an event":  {modify: func(c *stream.Config) { c.DeadLetterMaxBytesPerNamespace = int64(c.MaxMsgSize) - 1 }, wantErr: "must hold one event of the largest size"},
		"negative dead bytes per namespace":        {modify: func(c *stream.Config) { c.DeadLetterMaxBytesPerNamespace = -1 }, wantErr: "dead-letter bytes per namespace must be positive"},
		"no dependency bucket":                     {modify: func(c *stream.Config) { c.DependencyBucket = "" }, wantErr: "dependency bucket name"},
		"dependency bucket dot":                    {modify: func(c *stream.Config) { c.DependencyBucket = "kfn.deps" }, wantErr: "dependency bucket name"},
		"zero dependency bytes":                    {modify: func(c *stream.Config) { c.DependencyMaxBytes = 0 }, wantErr: "dependency bucket max bytes"},
		"unlimited dependencies":                   {modify: func(c *stream.Config) { c.DependencyMaxBytes = -1 }},
		"dependencies forever":                     {modify: func(c *stream.Config) { c.DependencyMaxAge = 0 }},
		"negative dependency age":                  {modify: func(c *stream.Config) { c.DependencyMaxAge = -time.Second }, wantErr: "dependency max age"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := stream.DefaultConfig()
			tt.modify(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, stream.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestConsumerName(t *testing.T) {
	a := stream.ConsumerName("default", "orders")
	assert.Equal(t, a, stream.ConsumerName("default", "orders"), "deterministic")
	assert.Regexp(t, regexp.MustCompile(`^kfn-[0-9a-f]{40}$`), a)
	assert.NotEqual(t, a, stream.ConsumerName("default", "orders2"))
	assert.NotEqual(t, stream.ConsumerName("a", "b-c"), stream.ConsumerName("a-b", "c"))
	// A fixed value: changing the scheme orphans every consumer in every cluster.
	assert.Equal(t, "kfn-962fc807ee8f6dd9d4b7a820d5eef64fd99fb91f", stream.ConsumerName("default", "orders"))
}
