// Command eventbridge runs kfn's event bridge: the CloudEvents publisher,
// the dispatcher that delivers events to Subscription sinks, the
// Subscription reconciler and the dead-letter admin API. See
// eventbridge/README.md for the flags.
package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/kfn-dev/kfn/eventbridge/bridge"
	"github.com/kfn-dev/kfn/internal/command"
)

func main() { command.Main(component()) }

// component is the event bridge with its default configuration, which its
// flags change.
func component() command.Component {
	cfg := bridge.DefaultConfig()
	return command.Component{
		Name:          "eventbridge",
		RegisterFlags: cfg.RegisterFlags,
		LogLevel:      &cfg.LogLevel,
		Run:           func(ctx context.Context, log *slog.Logger) error { return bridge.Run(ctx, cfg, log) },
	}
}

// run parses args and runs the event bridge, logging to stderr, until ctx
// ends or a signal comes; nil after a clean stop and for -h.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	return component().Execute(ctx, args, stderr)
}
