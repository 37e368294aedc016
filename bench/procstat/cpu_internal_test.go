package procstat

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCPUTimes(t *testing.T) {
	// A 2-CPU virtual machine's /proc/stat (kernel 6): user nice system
	// idle iowait irq softirq steal guest guest_nice.
	c, err := parseCPUTimes("cpu  6205316 129976 1166446 4782823 129314 0 138770 270767 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
	require.NoError(t, err)
	assert.Equal(t, CPUTimes{Total: 6205316 + 129976 + 1166446 + 4782823 + 129314 + 138770 + 270767, Idle: 4782823 + 129314, Steal: 270767}, c)

	// A kernel before 2.6.11 counts only user, nice, system and idle.
	c, err = parseCPUTimes("cpu 10 0 5 85\n")
	require.NoError(t, err)
	assert.Equal(t, CPUTimes{Total: 100, Idle: 85}, c)

	for name, stat := range map[string]string{
		"empty":           "",
		"no aggregate":    "cpu0 1 2 3 4 5 6 7 8\n",
		"too few fields":  "cpu 1 2 3\n",
		"not a number":    "cpu 1 2 x 4 5 6 7 8\n",
		"negative":        "cpu 1 2 -3 4 5 6 7 8\n",
		"overflowing sum": "cpu 18446744073709551615 1 0 0\n",
		"another first":   "intr 1 2 3 4 5\ncpu 1 2 3 4\n",
	} {
		_, err := parseCPUTimes(stat)
		assert.Error(t, err, name)
	}
}

func TestStolenSince(t *testing.T) {
	before := CPUTimes{Total: 1000, Idle: 400, Steal: 100}
	share, ok := CPUTimes{Total: 2000, Idle: 600, Steal: 400}.StolenSince(before)
	require.True(t, ok)
	assert.InDelta(t, 0.3, share, 1e-9, "300 of the 1000 ticks since were stolen")

	share, ok = CPUTimes{Total: 2000, Idle: 600, Steal: 100}.StolenSince(before)
	require.True(t, ok)
	assert.Zero(t, share, "none stolen")

	share, ok = CPUTimes{Total: 2000, Idle: 400, Steal: 1100}.StolenSince(before)
	require.True(t, ok, "busy all along: no idle tick since")
	assert.InDelta(t, 1.0, share, 1e-9)

	for name, now := range map[string]CPUTimes{
		"no time passed":  before,
		"total went back": {Total: 900, Idle: 400, Steal: 100},
		"steal went back": {Total: 2000, Idle: 600, Steal: 50},
		"idle went back":  {Total: 2000, Idle: 300, Steal: 200},
		"a zero reading":  {},
	} {
		_, ok := now.StolenSince(before)
		assert.False(t, ok, name)
	}
}

func TestReadCPUTimes(t *testing.T) {
	c, err := ReadCPUTimes()
	require.NoError(t, err)
	assert.Positive(t, c.Total)
	assert.LessOrEqual(t, c.Idle+c.Steal, c.Total)
	assert.Equal(t, "-", Stolen(CPUTimes{}), "no earlier reading")
	assert.Regexp(t, `^(\d+%|-)$`, Stolen(c))

	// Since boot (a reading of 1 tick, none stolen): the share the
	// counters give now, which move little meanwhile.
	got := Stolen(CPUTimes{Total: 1})
	require.Regexp(t, `^\d+%$`, got)
	percent, err := strconv.Atoi(strings.TrimSuffix(got, "%"))
	require.NoError(t, err)
	assert.InDelta(t, 100*float64(c.Steal)/float64(c.Total), percent, 2)
}
