// Command eventbridge runs kfn's event bridge: the CloudEvents publisher,
// the dispatcher that delivers events to Subscription sinks, the
// Subscription reconciler and the dead-letter admin API. See
// eventbridge/README.md for the flags.
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

	"github.com/kfn-dev/kfn/eventbridge/bridge"
	"github.com/kfn-dev/kfn/internal/logging"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "eventbridge:", err)
		os.Exit(1)
	}
}

// run parses args and runs the event bridge, logging to stderr, until ctx
// ends or a signal comes; nil after a clean stop and for -h.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	cfg := bridge.DefaultConfig()
	fs := flag.NewFlagSet("eventbridge", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil // the usage was printed; asking for it is no failure
	} else if err != nil {
		return err
	}
	log, err := logging.New(stderr, cfg.LogLevel, logging.JSON)
	if err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bridge.Run(ctx, cfg, log)
}
