package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/kfn-dev/kfn/internal/logging"
)

// Component is how a binary's component is configured and run.
type Component struct {
	// Name is the binary's name, in the usage text and in front of a
	// failure.
	Name string
	// RegisterFlags adds the component's flags to fs, writing into its
	// configuration; a flag -log-level sets the logger's level (default
	// info).
	RegisterFlags func(fs *flag.FlagSet)
	// Run runs the component until ctx ends; log is kfn's JSON logger.
	Run func(ctx context.Context, log *slog.Logger) error
}

// Of is the Component of a configuration cfg whose pointer registers its
// flags, run with run: what a cmd/* main is made of.
func Of[C any, P interface {
	*C
	RegisterFlags(fs *flag.FlagSet)
}](name string, cfg C, run func(context.Context, C, *slog.Logger) error) Component {
	return Component{
		Name:          name,
		RegisterFlags: P(&cfg).RegisterFlags,
		Run:           func(ctx context.Context, log *slog.Logger) error { return run(ctx, cfg, log) },
	}
}

// Main runs c with the process's arguments and exits: status 0 after a
// clean stop or -h, 1 with "NAME: error" on stderr after a failure.
func Main(c Component) {
	if err := c.Execute(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", c.Name, err)
		os.Exit(1)
	}
}

// Execute parses args (a bad flag is an error before anything starts),
// makes the logger on stderr and runs the component until ctx ends or
// SIGINT or SIGTERM comes. It returns nil after a clean stop and for -h,
// whose usage goes to stderr.
func (c Component) Execute(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil // the usage was printed; asking for it is no failure
	} else if err != nil {
		return err
	}
	level := "info"
	if f := fs.Lookup("log-level"); f != nil {
		level = f.Value.String()
	}
	log, err := logging.New(stderr, level, logging.JSON)
	if err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.Run(ctx, log)
}
