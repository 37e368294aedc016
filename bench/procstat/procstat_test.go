package procstat_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/bench/procstat"
)

func TestMemory(t *testing.T) {
	hwm, rss, err := procstat.Memory(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, rss)
	assert.GreaterOrEqual(t, hwm, rss, "the peak is at least the current")
	_, _, err = procstat.Memory(-1)
	assert.Error(t, err)
}

func TestLoadAvg(t *testing.T) {
	assert.Regexp(t, regexp.MustCompile(`^\d+\.\d+ \d+\.\d+ \d+\.\d+$`), procstat.LoadAvg())
}
