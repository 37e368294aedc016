package depcachetest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kfn-dev/kfn/eventbridge/depcache"
	"github.com/kfn-dev/kfn/runtimes"
)

// TestTheCacheAndItsClientsNameTheWriterTokenAlike holds the two copies
// of the writer token's contract equal: the event bridge's (the cache,
// which may not import runtimes) and the runtimes' (the clients and the
// controller, which mounts the token).
func TestTheCacheAndItsClientsNameTheWriterTokenAlike(t *testing.T) {
	assert.Equal(t, runtimes.DependencyWriterHeader, depcache.WriterHeader)
	assert.Equal(t, runtimes.DependencyWriterAudience("nodejs22", "0123abcd"), depcache.WriterAudience("nodejs22", "0123abcd"))
}
