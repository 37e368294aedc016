package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kfn-dev/kfn/bench/result"
)

func main() {
	dir := flag.String("dir", "examples/shop", "project kfn dev runs")
	starts := flag.Int("starts", 5, "cold starts; the median is reported")
	jsonl := flag.Bool("jsonl", false, "print the figures as JSON lines (package bench/result) on stdout and the text on stderr")
	flag.Parse()
	human, figures := io.Writer(os.Stdout), io.Writer(nil)
	if *jsonl {
		human, figures = os.Stderr, os.Stdout
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dir, *starts, human, result.NewWriter(figures)); err != nil {
		fmt.Fprintln(os.Stderr, "bench/kfndev:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string, starts int, human io.Writer, out *result.Writer) error {
	if starts < 1 {
		return errors.New("-starts must be >= 1")
	}
	work, err := os.MkdirTemp("", "kfn-bench-kfndev-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "kfn")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kfn")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build kfn: %w", err)
	}
	var ds []time.Duration
	for i := range starts {
		d, err := coldStart(ctx, bin, dir, filepath.Join(work, fmt.Sprintf("state-%d", i)))
		if err != nil {
			return fmt.Errorf("start %d: %w", i+1, err)
		}
		fmt.Fprintf(human, "start %d: kfn dev %s up after %s\n", i+1, dir, d.Round(time.Millisecond))
		ds = append(ds, d)
	}
	slices.Sort(ds)
	med := ds[len(ds)/2]
	fmt.Fprintf(human, "kfn dev cold start to ready (%s, %d starts): median %s, min %s, max %s\n",
		dir, starts, med.Round(time.Millisecond), ds[0].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	return out.Emit(result.Figure{Name: "kfndev/cold-start", Unit: "ms", Value: float64(med) / float64(time.Millisecond),
		Note: "process start to the 'is up on' line, fresh state directory"})
}

// coldStart runs kfn dev on dir with a fresh state directory and returns
// the time from process start to its "is up on" line; it then stops kfn
// dev with SIGINT and waits for it to exit.
func coldStart(ctx context.Context, bin, dir, state string) (time.Duration, error) {
	cmd := exec.Command(bin, "dev", "--addr", "127.0.0.1:0", "--plain", "--no-watch", "--state-dir", state, dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	cmd.Stderr = cmd.Stdout
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start kfn dev: %w", err)
	}
	up := make(chan time.Duration, 1)
	done := make(chan struct{})
	var log strings.Builder
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if log.Len() < 16<<10 {
				log.WriteString(line + "\n")
			}
			if strings.Contains(line, " is up on http://") {
				select {
				case up <- time.Since(t0):
				default:
				}
			}
		}
	}()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = cmd.Wait()
	}()
	select {
	case d := <-up:
		return d, nil
	case <-done:
		return 0, fmt.Errorf("kfn dev exited before it was up:\n%s", log.String())
	case <-time.After(2 * time.Minute):
		return 0, errors.New("kfn dev not up within 2 minutes")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
