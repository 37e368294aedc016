package faults_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"

	"github.com/kfn-dev/kfn/eventbridge/bridge"
	"github.com/kfn-dev/kfn/local/broker"
)

// The test binary doubles as the suite's child processes: with roleEnv set
// it runs that role instead of the tests, so the suite can kill -9 a NATS
// server or an event bridge without building other binaries.
const (
	roleEnv     = "KFN_FAULTS_ROLE"
	roleNATS    = "nats"
	roleBridge  = "eventbridge"
	natsPortEnv = "KFN_FAULTS_NATS_PORT"
	natsDirEnv  = "KFN_FAULTS_NATS_DIR"
)

func TestMain(m *testing.M) {
	switch role := os.Getenv(roleEnv); role {
	case "":
		os.Exit(m.Run())
	case roleNATS:
		os.Exit(runNATS())
	case roleBridge:
		os.Exit(runEventBridge(os.Args[1:]))
	default:
		fmt.Fprintf(os.Stderr, "unknown %s %q\n", roleEnv, role)
		os.Exit(2)
	}
}

// runNATS is the NATS child: kfn dev's embedded JetStream server with file
// storage, on a given port and store directory, until SIGTERM.
func runNATS() int {
	port, err := strconv.Atoi(os.Getenv(natsPortEnv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", natsPortEnv, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	b, err := broker.Start(broker.Config{StoreDir: os.Getenv(natsDirEnv), Port: port})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("nats ready on", b.URL())
	<-ctx.Done()
	b.Stop()
	return 0
}

// runEventBridge is cmd/eventbridge: the same flags, the same bridge.Run.
func runEventBridge(args []string) int {
	cfg := bridge.DefaultConfig()
	fs := flag.NewFlagSet("eventbridge", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := bridge.Run(ctx, cfg, log); err != nil {
		fmt.Fprintln(os.Stderr, "eventbridge:", err)
		return 1
	}
	return 0
}
