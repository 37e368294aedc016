// Command scaler runs kfn's KEDA external scaler: it reads the backlog of
// every Subscription's JetStream consumer, learns which Function each one
// feeds from the Subscriptions in the cluster, receives the gateway's
// in-flight counts over NATS, and answers KEDA over gRPC (externalscaler
// protocol, trigger types external and external-push), with the gRPC health
// service and Prometheus metrics. See scaler/README.md for the flags.
package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/kfn-dev/kfn/internal/command"
	"github.com/kfn-dev/kfn/scaler/kube"
)

func main() { command.Main(component()) }

// component is the scaler with its default configuration, which its
// flags change.
func component() command.Component {
	cfg := kube.DefaultConfig()
	return command.Component{
		Name:          "scaler",
		RegisterFlags: cfg.RegisterFlags,
		LogLevel:      &cfg.LogLevel,
		Run:           func(ctx context.Context, log *slog.Logger) error { return kube.Run(ctx, cfg, log) },
	}
}

// run parses args and runs the scaler, logging to stderr, until ctx
// ends or a signal comes; nil after a clean stop and for -h.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	return component().Execute(ctx, args, stderr)
}
