package cli

import (
	"fmt"
	"io"
	"net/url"

	"github.com/spf13/cobra"
)

func newLogsCommand() *cobra.Command {
	var (
		addr, namespace string
		follow          bool
	)
	cmd := &cobra.Command{
		Use:   "logs NAME [-f]",
		Short: "Print a function's output from a running kfn dev",
		Long: `logs prints the last lines a function's processes wrote (up to 1,000), each
prefixed with the process, and with -f keeps printing new ones until Ctrl-C.`,
		Example: `  kfn logs fulfil -f`,
		Args:    exactArgs(1, "the function's NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/logs/" + url.PathEscape(namespace) + "/" + url.PathEscape(args[0])
			if follow {
				path += "?follow=1"
			}
			resp, err := adminDo(cmd, "GET", addr, path)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if _, err := io.Copy(cmd.OutOrStdout(), resp.Body); err != nil && cmd.Context().Err() == nil {
				return fmt.Errorf("read the logs: %w", err)
			}
			return nil
		},
	}
	addrFlag(cmd, &addr)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the function")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	return cmd
}
