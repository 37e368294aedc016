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

	"k8s.io/klog/v2"

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
	// Load, when set, completes the configuration once the flags are
	// parsed (a config file read under the flags given, a setting that
	// depends on others); its error stops the binary before anything runs.
	Load func(fs *flag.FlagSet) error
	// LogFormat, when set, is the format of the logs once the
	// configuration is loaded; nil means JSON.
	LogFormat func() logging.Format
	// Subcommands are commands run instead of the component when the first
	// argument names one ("controller fetch-source ..."), with the
	// arguments after the name, until ctx ends or a signal comes.
	// flag.ErrHelp from one is no failure.
	Subcommands map[string]func(ctx context.Context, args []string) error
	// Run runs the component until ctx ends; log is kfn's logger.
	Run func(ctx context.Context, log *slog.Logger) error
}

// Of is the Component of a configuration cfg whose pointer registers its
// flags, run with run: what a cmd/* main is made of. When the pointer also
// has a method Load(*flag.FlagSet) error or LogFormat() logging.Format,
// they are the Component's Load and LogFormat.
func Of[C any, P interface {
	*C
	RegisterFlags(fs *flag.FlagSet)
}](name string, cfg C, run func(context.Context, C, *slog.Logger) error) Component {
	c := Component{
		Name:          name,
		RegisterFlags: P(&cfg).RegisterFlags,
		Run:           func(ctx context.Context, log *slog.Logger) error { return run(ctx, cfg, log) },
	}
	if l, ok := any(P(&cfg)).(interface{ Load(*flag.FlagSet) error }); ok {
		c.Load = l.Load
	}
	if f, ok := any(P(&cfg)).(interface{ LogFormat() logging.Format }); ok {
		c.LogFormat = f.LogFormat
	}
	return c
}

// Main runs c with the process's arguments and exits: status 0 after a
// clean stop or -h, 1 with "NAME: error" on stderr after a failure.
func Main(c Component) {
	run := c.Run
	c.Run = func(ctx context.Context, log *slog.Logger) error {
		// client-go's own lines (informers, leader election, the client
		// CA's controller) in kfn's format: set once, by the process's
		// main, before anything logs.
		klog.SetSlogLogger(log)
		return run(ctx, log)
	}
	if err := c.Execute(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", c.Name, err)
		os.Exit(1)
	}
}

// Execute runs the subcommand args[0] names, if any; otherwise it parses
// args (a bad flag is an error before anything starts), loads the
// configuration, makes the logger on stderr and runs the component, until
// ctx ends or SIGINT or SIGTERM comes. It returns nil after a clean stop
// and for -h, whose usage goes to stderr.
func (c Component) Execute(ctx context.Context, args []string, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 {
		if sub, ok := c.Subcommands[args[0]]; ok {
			if err := sub(ctx, args[1:]); !errors.Is(err, flag.ErrHelp) {
				return err
			}
			return nil // the usage was printed; asking for it is no failure
		}
	}
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if c.Load != nil {
		if err := c.Load(fs); err != nil {
			return err
		}
	}
	level, format := "info", logging.JSON
	if f := fs.Lookup("log-level"); f != nil {
		level = f.Value.String() // after Load: the level it chose
	}
	if c.LogFormat != nil {
		format = c.LogFormat()
	}
	log, err := logging.New(stderr, level, format)
	if err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	return c.Run(ctx, log)
}
