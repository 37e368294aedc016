package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kfn-dev/kfn/bench/figures"
)

func main() {
	starts := flag.Int("starts", 5, "cold starts; the median is reported")
	figuresOut := flag.String("figures", "", "also append the results as JSON lines (package bench/figures) to this file")
	flag.Parse()
	if err := run(*starts, *figuresOut); err != nil {
		fmt.Fprintln(os.Stderr, "bench/kfndev:", err)
		os.Exit(1)
	}
}

func run(starts int, figuresOut string) error {
	if starts < 1 {
		return errors.New("-starts must be at least 1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "kfn-bench-kfndev-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "kfn")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kfn")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build kfn (run from the repository root): %w", err)
	}
	var ready, stop []time.Duration
	for i := range starts {
		project := filepath.Join(dir, fmt.Sprintf("shop-%d", i))
		if err := copyTree("examples/shop", project); err != nil {
			return err
		}
		r, s, err := once(ctx, bin, project)
		if err != nil {
			return fmt.Errorf("start %d: %w", i+1, err)
		}
		fmt.Printf("start %d: ready after %s, stopped %s after Ctrl-C\n", i+1, r.Round(time.Millisecond), s.Round(time.Millisecond))
		ready, stop = append(ready, r), append(stop, s)
	}
	mr, ms := median(ready), median(stop)
	fmt.Printf("kfn dev examples/shop: cold start to ready median %s, Ctrl-C to exit median %s (%d starts)\n",
		mr.Round(time.Millisecond), ms.Round(time.Millisecond), starts)
	msf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return figures.Append(figuresOut,
		figures.Figure{Group: "kfn dev", Name: "cold start to ready, examples/shop (3 functions, NATS, publisher, scaler)", Unit: "ms", Value: msf(mr)},
		figures.Figure{Group: "kfn dev", Name: "Ctrl-C to every process gone", Unit: "ms", Value: msf(ms)},
	)
}

// once runs kfn dev on project until it is up, then interrupts it; it
// returns both durations.
func once(ctx context.Context, bin, project string) (ready, stop time.Duration, err error) {
	cmd := exec.CommandContext(ctx, bin, "dev", "--addr", "127.0.0.1:0", "--plain", project)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	cmd.Stderr = cmd.Stdout
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	up := make(chan time.Duration, 1)
	var tail []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			tail = append(tail, line)
			if strings.Contains(line, " is up on http://") {
				up <- time.Since(begin)
			}
		}
	}()
	select {
	case ready = <-up:
	case <-done:
		_ = cmd.Wait()
		return 0, 0, fmt.Errorf("kfn dev exited before it was up:\n%s", strings.Join(tail, "\n"))
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
		return 0, 0, errors.New("kfn dev was not up within 2 minutes")
	}
	interrupted := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		return 0, 0, err
	}
	<-done
	if err := cmd.Wait(); err != nil {
		return 0, 0, fmt.Errorf("kfn dev after Ctrl-C: %w", err)
	}
	return ready, time.Since(interrupted), nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// copyTree copies the example without its .kfn state.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".kfn" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
}
