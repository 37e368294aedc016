package natstest

import (
	"errors"
	"fmt"
	"os"
	"slices"
)

// LaunchCluster is StartCluster for a program that is not a test (a
// benchmark): n servers routed to each other with a meta leader elected,
// their stores in directories under dir. Stop shuts them down; an error
// says why they could not all start (those that did are shut down).
func LaunchCluster(n int, dir string) (c *Cluster, stop func(), err error) {
	h := &programHarness{dir: dir}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(programFailure)
			if !ok {
				panic(r)
			}
			h.stop()
			c, stop, err = nil, nil, f.err
		}
	}()
	return startCluster(h, n), h.stop, nil
}

// programHarness stands for testing.TB in a program: Fatal panics with a
// programFailure, which LaunchCluster recovers into its error; Cleanup
// collects what stop runs, last first; TempDir makes directories under
// dir.
type programHarness struct {
	dir      string
	cleanups []func()
}

// programFailure is what programHarness.Fatal panics with.
type programFailure struct{ err error }

func (*programHarness) Helper() {}

func (*programHarness) Fatal(args ...any) { panic(programFailure{errors.New(fmt.Sprint(args...))}) }

func (*programHarness) Fatalf(format string, args ...any) {
	panic(programFailure{fmt.Errorf(format, args...)})
}

func (h *programHarness) Cleanup(f func()) { h.cleanups = append(h.cleanups, f) }

func (h *programHarness) TempDir() string {
	d, err := os.MkdirTemp(h.dir, "nats-")
	if err != nil {
		h.Fatalf("store directory: %v", err)
	}
	return d
}

// stop runs the cleanups, last first.
func (h *programHarness) stop() {
	for _, f := range slices.Backward(h.cleanups) {
		f()
	}
	h.cleanups = nil
}
