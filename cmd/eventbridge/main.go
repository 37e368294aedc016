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
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/kfn-dev/kfn/eventbridge/bridge"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "eventbridge:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	cfg := bridge.DefaultConfig()
	fs := flag.NewFlagSet("eventbridge", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil // the usage was printed; asking for it is no failure
	} else if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bridge.Run(ctx, cfg, log)
}
