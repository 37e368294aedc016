// Command controller runs kfn's Function controller: it reconciles
// serverless.kyma-project.io/v1alpha2 Functions into ConfigMaps,
// Deployments, Services and autoscalers. See controller/README.md for the
// flags and the config file.
//
// "controller fetch-source ..." is the init container command that fetches
// a Git Function's source into its pod.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kfn-dev/kfn/controller/manager"
	"github.com/kfn-dev/kfn/internal/logging"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
}

// run parses args and runs the controller (or fetch-source), logging to
// stderr, until ctx ends or a signal comes; nil after a clean stop and for
// -h.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 && args[0] == "fetch-source" {
		if err := fetchSource(ctx, args[1:]); !errors.Is(err, flag.ErrHelp) {
			return err
		}
		return nil
	}
	cfg := manager.DefaultConfig()
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil // the usage was printed; asking for it is no failure
	} else if err != nil {
		return err
	}
	if err := cfg.Load(fs); err != nil {
		return err
	}
	log, err := logging.New(stderr, cfg.LogLevel, cfg.LogFormat())
	if err != nil {
		return fmt.Errorf("log level: %w", err)
	}
	return manager.Run(ctx, cfg, log)
}
