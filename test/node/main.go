package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/kfn-dev/kfn/test/node/install"
	"github.com/kfn-dev/kfn/test/node/singlenode"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

const usage = `usage: go run ./test/node up -bin DIR -images DIR [-nodes N]   start the cluster (N nodes), install KEDA and kfn
       go run ./test/node down                                  stop it and remove every trace`

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, usage)
		return flag.ErrHelp
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	bin := fs.String("bin", "", "directory of the cluster's binaries (test/node/assets.sh)")
	images := fs.String("images", "", "directory of the image archives (test/node/images.sh)")
	data := fs.String("data", defaultDataDir(), "directory kept between runs (containerd's images)")
	nodes := fs.Int("nodes", 1, "how many nodes (1 or 2): the first, and kfn2 in a network namespace of its own with every image imported")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	cfg := singlenode.DefaultConfig(*bin, *data)
	switch args[0] {
	case "up":
		if *bin == "" || *images == "" {
			fmt.Fprintln(os.Stderr, usage)
			return flag.ErrHelp
		}
		if *nodes < 1 || *nodes > 2 {
			return fmt.Errorf("-nodes %d: 1 or 2 nodes", *nodes)
		}
		return up(ctx, cfg, *images, *nodes)
	case "down":
		if *bin == "" {
			// The running cluster's own record, if there is one.
			saved, err := singlenode.LoadConfig(cfg.StateDir)
			if err != nil {
				fmt.Fprintln(os.Stderr, "cluster: no running cluster recorded; removing what is left of one anyway")
			} else {
				cfg = saved
			}
		}
		return singlenode.Down(cfg)
	default:
		fmt.Fprintln(os.Stderr, usage)
		return flag.ErrHelp
	}
}

func defaultDataDir() string {
	if d := os.Getenv("KFN_CACHE_DIR"); d != "" {
		return filepath.Join(d, "cluster", "data")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "kfn", "cluster", "data")
}

func up(ctx context.Context, cfg singlenode.Config, imageDir string, nodes int) error {
	archives, err := filepath.Glob(filepath.Join(imageDir, "*.tar"))
	if err != nil || len(archives) == 0 {
		return fmt.Errorf("no image archives in %s (run test/node/images.sh)", imageDir)
	}
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "cluster: "+format+"\n", a...) }
	c, err := singlenode.Up(ctx, cfg, archives, logf)
	if err != nil {
		return err
	}
	// Before kfn, so that the chart's anti-affinity spreads its replicas.
	for range nodes - 1 {
		if _, err := c.AddNode(ctx, archives, logf); err != nil {
			return errors.Join(err, singlenode.Down(cfg))
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return errors.Join(err, singlenode.Down(cfg))
	}
	if err := install.Platform(ctx, c, filepath.Join(root, "charts", "kfn"), logf); err != nil {
		return errors.Join(err, singlenode.Down(cfg))
	}
	fmt.Printf(`
The cluster runs, with KEDA and kfn installed. Use it with:

  export KUBECONFIG=%s
  kubectl get pods -A

A first Function (the namespace enforces the restricted Pod Security Standard):

  kubectl create namespace demo
  kubectl label namespace demo pod-security.kubernetes.io/enforce=restricted
  kubectl apply -n demo -f examples/cluster/hello.yaml
  kubectl get functions -n demo -w

Stop it and remove every trace with: make cluster-down
`, cfg.KubeconfigPath())
	return nil
}

// moduleRoot is the checkout's root: the working directory of go run from
// the Makefile, or above it.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "charts", "kfn", "Chart.yaml")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no charts/kfn above %s: run from the checkout", dir)
		}
	}
}
