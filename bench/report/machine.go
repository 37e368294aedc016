package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/kfn-dev/kfn/bench/procstat"
)

// machine is what the report says about where and with what it ran.
type machine struct {
	Date       time.Time
	CPUs       int
	CPUModel   string
	Versions   [][2]string // name, version, in order
	LoadBefore string
	LoadAfter  string
	// Stolen is the share of the CPU time the host of this virtual
	// machine took during the whole run ("12%", or "-").
	Stolen string
	cpu    procstat.CPUTimes
	Quick  bool
	Reps   int
}

func describeMachine(ctx context.Context) machine {
	m := machine{Date: time.Now().UTC(), CPUs: runtime.NumCPU(), CPUModel: cpuModel(), LoadBefore: procstat.LoadAvg(), cpu: readCPU()}
	m.Versions = append(m.Versions,
		[2]string{"Go", runtime.Version()},
		[2]string{"Node.js", output(ctx, "node", "--version")},
		[2]string{"Python", strings.TrimPrefix(output(ctx, "python3", "--version"), "Python ")},
		[2]string{"nats-server (embedded)", output(ctx, "go", "list", "-m", "-f", "{{.Version}}", "github.com/nats-io/nats-server/v2")},
		[2]string{"nats.go", output(ctx, "go", "list", "-m", "-f", "{{.Version}}", "github.com/nats-io/nats.go")},
	)
	return m
}

func output(ctx context.Context, name string, args ...string) string {
	b, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return "not found"
	}
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
