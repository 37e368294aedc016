package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Streams are where commands read and write.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// DefaultAddr is where `kfn dev` serves the publisher, the gateway and its
// admin API, and where the other commands look for it.
const DefaultAddr = "http://127.0.0.1:8080"

// addrEnv overrides DefaultAddr for every command.
const addrEnv = "KFN_ADDR"

// usageError marks an error caused by how kfn was called; Main exits 2.
type usageError struct{ error }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// newRootCommand returns the kfn command with every subcommand.
func newRootCommand(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "kfn",
		Short: "kfn runs Kyma-compatible functions and events, on Kubernetes or on your machine",
		Long: `kfn runs Kyma Function and Subscription resources: functions in Node.js and
Python, events through NATS JetStream delivered at least once, scaling on queue
depth from zero. 'kfn dev' runs all of it on this machine without a cluster.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
		// A word that is no command is a wrong call (exit 2), not a failure.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q: 'kfn --help' lists them", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetVersionTemplate("kfn {{.Version}}\n")
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newInitCommand(),
		newDevCommand(),
		newGetCommand(),
		newLogsCommand(),
		newDLQCommand(),
		newTraceCommand(),
		newViewCommand(),
		newApplyCommand(),
		newFunctionCommand(),
		newPublishCommand(),
		newInvokeCommand(),
		newVersionCommand(),
	)
	return root
}

// Main runs kfn with args and returns the process exit code: 0 on success,
// 1 when the command failed, 2 when it was called wrongly.
func Main(ctx context.Context, args []string, s Streams) int {
	root := newRootCommand(s)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(s.Err, "kfn:", err)
	var u usageError
	if errors.As(err, &u) {
		fmt.Fprintln(s.Err, "Run 'kfn --help' for usage.")
		return 2
	}
	return 1
}

// exactArgs is cobra.ExactArgs with a message that names what is missing.
// atMostOneArg accepts no argument or one, what it names.
func atMostOneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usagef("%s takes at most one %s (got %d arguments)", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s needs %s (got %d arguments)", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}
