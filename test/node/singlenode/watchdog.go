package singlenode

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// watchdogEnv carries the cluster's configuration (JSON) to the watchdog
// process; its presence is what makes a test binary act as one.
const watchdogEnv = "KFN_SINGLENODE_WATCHDOG"

// Watchdog tears the cluster down if the process that started it dies
// without doing so (a panic, a go test timeout, kill -9, Ctrl-C). It is the
// caller's own executable run again in watchdog mode (see [RunWatchdog]),
// holding the read end of a pipe: end of file without "done" means the
// caller died.
type Watchdog struct {
	cmd  *exec.Cmd
	pipe *os.File
}

// StartWatchdog starts a watchdog for the cluster of cfg. The caller's
// main or TestMain must call [RunWatchdog] first thing.
func StartWatchdog(cfg Config) (*Watchdog, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for the watchdog: %w", err)
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode configuration for the watchdog: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), watchdogEnv+"="+string(data))
	cmd.Stdin = r
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	// Its own session: Ctrl-C to the caller's group must not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start watchdog: %w", err)
	}
	r.Close()
	go func() { _ = cmd.Wait() }()
	return &Watchdog{cmd: cmd, pipe: w}, nil
}

// Dismiss tells the watchdog that the caller tears the cluster down itself.
func (w *Watchdog) Dismiss() {
	_, _ = io.WriteString(w.pipe, "done\n")
	_ = w.pipe.Close()
}

// RunWatchdog returns at once unless this process was started by
// [StartWatchdog]; then it waits for its parent's verdict, runs [Down] if
// the parent died, and exits.
func RunWatchdog() {
	raw, ok := os.LookupEnv(watchdogEnv)
	if !ok {
		return
	}
	// Alive through the signals that end its parent's terminal session.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM)
	var cfg Config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "singlenode watchdog: bad configuration:", err)
		os.Exit(2)
	}
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if strings.TrimSpace(line) == "done" {
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, "singlenode watchdog: the test process died; tearing the cluster down")
	if err := Down(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "singlenode watchdog:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// SaveConfig records cfg in StateDir, so that [LoadConfig] (and `cluster
// down` without flags) finds the binaries and directories of the running
// cluster.
func SaveConfig(cfg Config) error {
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("encode cluster configuration: %w", err)
	}
	return writeFile(filepath.Join(cfg.StateDir, "config.json"), data)
}

// LoadConfig reads the configuration of the cluster whose state is in
// stateDir; it fails with an error wrapping os.ErrNotExist when no cluster
// was started there.
func LoadConfig(stateDir string) (Config, error) {
	var cfg Config
	data, err := os.ReadFile(filepath.Join(stateDir, "config.json"))
	if err != nil {
		return cfg, fmt.Errorf("read cluster configuration: %w", err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return cfg, fmt.Errorf("read cluster configuration %s: %w", filepath.Join(stateDir, "config.json"), err)
	}
	return cfg, nil
}
