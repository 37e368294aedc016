package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPUTimes is the machine's CPU time so far, all CPUs together, in the
// kernel's clock ticks, as the first line of /proc/stat counts it.
type CPUTimes struct {
	// Total is every tick counted: user, nice, system, idle, iowait, irq,
	// softirq and steal (guest time is within user and nice).
	Total uint64
	// Idle is the ticks no process wanted (idle and iowait).
	Idle uint64
	// Steal is the ticks a virtual machine's CPUs were ready to run but
	// the host ran something else: the machine's other tenants.
	Steal uint64
}

// ReadCPUTimes reads the machine's CPU times from /proc/stat.
func ReadCPUTimes() (CPUTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, fmt.Errorf("read cpu times: %w", err)
	}
	return parseCPUTimes(string(b))
}

// parseCPUTimes reads the aggregate "cpu" line of /proc/stat's text: at
// least user, nice, system and idle; the fields a kernel before 2.6.11
// lacks (iowait, irq, softirq, steal) count as 0.
func parseCPUTimes(stat string) (CPUTimes, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return CPUTimes{}, fmt.Errorf("cpu times: no aggregate cpu line in /proc/stat (%.40q)", line)
	}
	var v [8]uint64 // user nice system idle iowait irq softirq steal
	for i := range min(len(f)-1, len(v)) {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("cpu times: field %d of /proc/stat's cpu line: %w", i+1, err)
		}
		v[i] = n
	}
	var c CPUTimes
	for _, n := range v {
		if c.Total+n < c.Total {
			return CPUTimes{}, fmt.Errorf("cpu times: /proc/stat's cpu line overflows")
		}
		c.Total += n
	}
	c.Idle, c.Steal = v[3]+v[4], v[7]
	return c, nil
}

// StolenSince returns the share (0 to 1) of the CPU time since before
// that the host took from this virtual machine (steal), and false when
// no time passed or the counters went back (before is not an earlier
// reading of this machine).
func (c CPUTimes) StolenSince(before CPUTimes) (float64, bool) {
	if c.Total <= before.Total || c.Steal < before.Steal || c.Idle < before.Idle {
		return 0, false
	}
	return float64(c.Steal-before.Steal) / float64(c.Total-before.Total), true
}

// Stolen formats the share of the CPU time the host took since before
// ("12%"), or "-" when before is not an earlier reading (zero, or a
// failed read) or the counters do not say.
func Stolen(before CPUTimes) string {
	if before.Total == 0 {
		return "-"
	}
	now, err := ReadCPUTimes()
	if err != nil {
		return "-"
	}
	share, ok := now.StolenSince(before)
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*share)
}
