package main

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// describeMachine fills in the CPUs and tool versions of this machine;
// anything it cannot find is "unknown".
func describeMachine(ctx context.Context) machine {
	return machine{
		cpus:       runtime.NumCPU(),
		cpuModel:   cpuModel(),
		goVersion:  output(ctx, "go", "env", "GOVERSION"),
		node:       output(ctx, "node", "--version"),
		python:     strings.TrimPrefix(output(ctx, "python3", "--version"), "Python "),
		natsServer: output(ctx, "go", "list", "-m", "-f", "{{.Version}}", "github.com/nats-io/nats-server/v2"),
		loadBefore: loadavg(),
		started:    time.Now(),
	}
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func output(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil || len(strings.TrimSpace(string(out))) == 0 {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
