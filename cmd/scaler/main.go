// Command scaler runs kfn's KEDA external scaler: it reads the backlog of
// every Subscription's JetStream consumer, learns which Function each one
// feeds from the Subscriptions in the cluster, receives the gateway's
// in-flight counts over NATS, and answers KEDA over gRPC (externalscaler
// protocol, trigger types external and external-push), with the gRPC health
// service and Prometheus metrics. See scaler/README.md for the flags.
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

	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/scaler/kube"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scaler:", err)
		os.Exit(1)
	}
}

// run parses args and runs the scaler, logging to stderr, until ctx ends
// or a signal comes; nil after a clean stop and for -h.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	cfg := kube.DefaultConfig()
	fs := flag.NewFlagSet("scaler", flag.ContinueOnError)
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
	return kube.Run(ctx, cfg, log)
}
