package cli

import (
	"context"
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
		target        targetFlags
		namespace     string
		allNamespaces bool
		output        string
	)
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Show functions and subscriptions, of kfn dev or of a cluster",
		Long: `get shows every function (replicas wanted and ready, scaling range, events
waiting, problems) and every subscription (ready, events delivered, failed
attempts, dead-lettered): of the kfn dev serving on --addr, or, with a
kubeconfig, of the cluster's namespace -n (the context's by default; -A for
all), with the backlog asked of kfn's scaler and the delivery counts read
from kfn's event bridges through port-forwards.`,
		Example: `  kfn get
  kfn get --kubeconfig ~/.kube/config -n shop -o yaml`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			var st dev.Status
			if target.inCluster(cmd) {
				c, err := target.cluster()
				if err != nil {
					return err
				}
				ns := target.namespace(cmd, namespace)
				if allNamespaces {
					ns = ""
				}
				if st, err = c.status(cmd.Context(), ns); err != nil {
					return err
				}
			} else {
				ep, err := target.endpoints(cmd)
				if err != nil {
					return err
				}
				defer ep.close()
				if err := adminGet(cmd, ep, "/status", &st); err != nil {
					return err
				}
			}
			sortStatus(&st)
			if output != outputTable {
				return printObject(cmd.OutOrStdout(), output, st)
			}
			writeStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	target.add(cmd)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace to show, in a cluster (the context's by default)")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "every namespace, in a cluster")
	outputFlag(cmd, &output)
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

// adminGet GETs path of kfn's admin API and decodes the JSON answer.
func adminGet(cmd *cobra.Command, ep *endpoints, path string, into any) error {
	resp, err := adminDo(cmd, ep, http.MethodGet, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		return fmt.Errorf("read the answer of %s: %w", ep.where, err)
	}
	return nil
}

// adminDo sends a request to kfn's admin API (kfn dev's, or an event
// bridge's; both answer under dev.AdminPrefix) and returns a 2xx answer;
// other answers become errors with the server's message.
func adminDo(cmd *cobra.Command, ep *endpoints, method, path string) (*http.Response, error) {
	resp, err := ep.send(cmd.Context(), method, path)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	return resp, nil
}

// send sends a request to kfn's admin API and returns its answer,
// whatever its status; an error is the failure to reach it.
func (e *endpoints) send(ctx context.Context, method, path string) (*http.Response, error) {
	send := func(base string, c *http.Client) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, base+dev.AdminPrefix+path, nil)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		return c.Do(req)
	}
	c := e.adminClient
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := send(e.admin, c)
	if err != nil && e.adminPlain != "" && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		// An event bridge whose admin API asks no one (eventbridge.admin.auth=none).
		resp, err = send(e.adminPlain, http.DefaultClient)
	}
	if err != nil {
		return nil, e.unreachable("reach", err)
	}
	return resp, nil
}
