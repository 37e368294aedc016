package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kfn-dev/kfn/local/dev"
)

func newGetCommand() *cobra.Command {
	var (
		addr   string
		output string
	)
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Show the functions and subscriptions of a running kfn dev",
		Long: `get shows every function (replicas wanted and ready, scaling range, events
waiting, requests in flight) and every subscription (ready, events delivered,
failed attempts, dead-lettered) of the kfn dev serving on --addr.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usagef("--output %q: want table or json", output)
			}
			var st dev.Status
			if err := adminGet(cmd, addr, "/status", &st); err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			writeStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	addrFlag(cmd, &addr)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// writeStatus prints functions and subscriptions as two tables.
func writeStatus(out io.Writer, st dev.Status) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FUNCTION\tRUNTIME\tREADY\tSCALING\tBACKLOG\tIN FLIGHT\tSTATUS")
	for _, f := range st.Functions {
		scaling := "fixed"
		if f.Autoscaled {
			scaling = fmt.Sprintf("%d..%d", f.Min, f.Max)
		}
		state := "ok"
		switch {
		case f.Error != "":
			state = "error: " + firstLine(f.Error)
		case f.Replicas == 0:
			state = "scaled to zero"
		case f.Ready < f.Replicas:
			state = "starting"
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%d/%d\t%s\t%d\t%d\t%s\n", f.Namespace, f.Name, f.Runtime, f.Ready, f.Replicas, scaling, f.Backlog, f.InFlight, state)
	}
	_ = tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBSCRIPTION\tREADY\tTYPES\tSINK\tDELIVERED\tFAILED\tDEAD-LETTERED")
	for _, s := range st.Subscriptions {
		fmt.Fprintf(tw, "%s/%s\t%t\t%s\t%s\t%d\t%d\t%d\n", s.Namespace, s.Name, s.Ready, strings.Join(s.Types, ","), s.Sink, s.Delivered, s.Failed, s.DeadLettered)
	}
	_ = tw.Flush()
	for _, e := range st.Errors {
		fmt.Fprintf(out, "\nProblem: %s\n", e)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// adminGet GETs path of kfn dev's admin API and decodes the JSON answer.
func adminGet(cmd *cobra.Command, addr, path string, into any) error {
	resp, err := adminDo(cmd, http.MethodGet, addr, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		return fmt.Errorf("read the answer of %s: %w", addr, err)
	}
	return nil
}

// adminDo sends a request to kfn dev's admin API and returns a 2xx answer;
// other answers become errors with the server's message.
func adminDo(cmd *cobra.Command, method, addr, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(cmd.Context(), method, strings.TrimSuffix(addr, "/")+dev.AdminPrefix+path, nil)
	if err != nil {
		return nil, usagef("--addr %q: %v", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach kfn dev at %s: %w (is it running? start it with 'make dev' or 'kfn dev DIR')", addr, err)
	}
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	return resp, nil
}
