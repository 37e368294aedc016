package testcluster

import (
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
)

// Setup prepares what a package's tests need on a cluster that [Main] has
// just started (at least, it keeps the cluster for the tests; see [Into]).
// The teardown it returns, if not nil, runs after the tests and before the
// cluster stops; an error ends the run with exit code 1 before any test.
type Setup func(*Cluster) (teardown func(), err error)

// Into is the Setup that only stores the cluster in *c.
func Into(c **Cluster) Setup {
	return func(cl *Cluster) (func(), error) {
		*c = cl
		return nil, nil
	}
}

// Main is the TestMain of a package whose tests share one cluster:
//
//	var cluster *testcluster.Cluster
//
//	func TestMain(m *testing.M) {
//		os.Exit(testcluster.Main(m, testcluster.Into(&cluster), testcluster.WithScheme(v1alpha2.AddToScheme)))
//	}
//
// It starts the cluster with opts, runs setup, the tests and setup's
// teardown, then stops the cluster. It returns the exit code for os.Exit:
// the tests' code, or 1 when the cluster could not start or stop or setup
// failed; those errors are written to stderr.
func Main(m *testing.M, setup Setup, opts ...Option) int {
	return run(m, setup, os.Stderr, func() (*Cluster, error) { return Start(opts...) })
}

// runner runs a package's tests; *testing.M is one.
type runner interface{ Run() int }

// run is Main with the start and the error output as parameters.
func run(m runner, setup Setup, stderr io.Writer, start func() (*Cluster, error)) int {
	c, err := start()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	code := runWith(m, c, setup, stderr)
	if err := c.Stop(); err != nil {
		fmt.Fprintln(stderr, "stop test cluster:", err)
		return 1
	}
	return code
}

func runWith(m runner, c *Cluster, setup Setup, stderr io.Writer) int {
	teardown, err := setup(c)
	if err != nil {
		fmt.Fprintln(stderr, "set up the tests' cluster:", err)
		return 1
	}
	if teardown != nil {
		defer teardown()
	}
	return m.Run()
}

// Lazy is one cluster for a test package whose tests mostly do without
// one: the first test that calls [Lazy.Get] starts it, and [Lazy.Main]
// stops it after the tests. The zero value is ready to use with no
// options.
type Lazy struct {
	// Options configure the cluster; set them before the first Get.
	Options []Option

	once    sync.Once
	cluster *Cluster
	err     error
}

// Get returns the package's cluster, starting it on the first call; a
// cluster that could not start fails the test (and every later one that
// asks).
func (l *Lazy) Get(t testing.TB) *Cluster {
	t.Helper()
	l.once.Do(func() { l.cluster, l.err = Start(l.Options...) })
	if l.err != nil {
		t.Fatalf("start test cluster: %v", l.err)
	}
	return l.cluster
}

// Main is the package's TestMain: it runs the tests and stops the cluster
// if one was started. It returns the exit code for os.Exit: the tests', or
// 1 when the cluster could not stop (the error goes to stderr).
func (l *Lazy) Main(m *testing.M) int { return l.main(m, os.Stderr) }

func (l *Lazy) main(m runner, stderr io.Writer) int {
	code := m.Run()
	if l.cluster != nil {
		if err := l.cluster.Stop(); err != nil {
			fmt.Fprintln(stderr, "stop test cluster:", err)
			return 1
		}
	}
	return code
}
