package cli

import (
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
)

func newLogsCommand() *cobra.Command {
	var (
		target    targetFlags
		namespace string
		follow    bool
	)
	cmd := &cobra.Command{
		Use:   "logs NAME [-f]",
		Short: "Print a function's output",
		Long: `logs prints the last lines a function's processes (kfn dev) or pods (a
cluster) wrote, up to 1,000 each, prefixed with the process or pod, and with
-f keeps printing new ones, of pods that start later too, until Ctrl-C.`,
		Example: `  kfn logs fulfil -f`,
		Args:    exactArgs(1, "the function's NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			namespace = target.namespace(cmd, namespace)
			if target.inCluster(cmd) {
				c, err := target.cluster()
				if err != nil {
					return err
				}
				return c.logs(cmd.Context(), cmd.OutOrStdout(), namespace, args[0], follow)
			}
			ep, err := target.endpoints(cmd)
			if err != nil {
				return err
			}
			defer ep.close()
			path := "/logs/" + url.PathEscape(namespace) + "/" + url.PathEscape(args[0])
			if follow {
				path += "?follow=1"
			}
			resp, err := adminDo(cmd, ep, http.MethodGet, path)
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
	target.add(cmd)
	cmd.ValidArgsFunction = target.completeFunctions
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the function (in a cluster: the context's by default)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	return cmd
}
