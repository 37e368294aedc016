package cli

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// ColdStartHeader is set by the gateway on a response that waited for the
// function to start.
const ColdStartHeader = "X-Kfn-Cold-Start"

func newInvokeCommand() *cobra.Command {
	var (
		target                                     targetFlags
		namespace, data, method, path, contentType string
		headers                                    []string
		verbose                                    bool
	)
	cmd := &cobra.Command{
		Use:   "invoke NAME [--data BODY]",
		Short: "Call a function over HTTP through the gateway",
		Long: `invoke sends one HTTP request to a function through the gateway (kfn dev
serves it on --addr at /NAMESPACE/NAME/PATH; in a cluster it is reached
through a port-forward to kfn's event bridge) and prints the response body.
A function scaled to zero is started first; the request waits for it.`,
		Example: `  kfn invoke orders --data '{"item": "book"}'
  kfn invoke orders -X GET --path /status -v`,
		Args: exactArgs(1, "the function's NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if method == "" {
				method = http.MethodGet
				if data != "" {
					method = http.MethodPost
				}
			}
			if !strings.HasPrefix(path, "/") {
				path = "/" + path
			}
			ep, err := target.endpoints(cmd)
			if err != nil {
				return err
			}
			defer ep.close()
			namespace = target.namespace(cmd, namespace)
			url := ep.gateway + "/" + namespace + "/" + args[0] + path
			req, err := http.NewRequestWithContext(cmd.Context(), strings.ToUpper(method), url, bodyReader(data))
			if err != nil {
				return usagef("request: %v", err)
			}
			if data != "" {
				req.Header.Set("Content-Type", contentType)
			}
			for _, h := range headers {
				k, v, ok := strings.Cut(h, ":")
				if !ok {
					return usagef("--header %q: want 'Name: value'", h)
				}
				req.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
			ep.authorize(req)
			// A function at zero makes the gateway hold the request while it
			// starts: say so when the answer takes more than a second.
			slow := time.AfterFunc(time.Second, func() {
				fmt.Fprintf(cmd.ErrOrStderr(), "kfn: waiting for %s/%s (a function at zero is being started)...\n", namespace, args[0])
			})
			resp, err := http.DefaultClient.Do(req)
			slow.Stop()
			if err != nil {
				return ep.unreachable("invoke "+args[0]+" through", err)
			}
			defer resp.Body.Close()
			if verbose {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s %s\n", resp.Proto, resp.Status)
				for k, vs := range resp.Header {
					for _, v := range vs {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", k, v)
					}
				}
			}
			if _, err := io.Copy(cmd.OutOrStdout(), resp.Body); err != nil {
				return fmt.Errorf("read the response: %w", err)
			}
			if resp.StatusCode/100 != 2 {
				return fmt.Errorf("%s answered %s", args[0], resp.Status)
			}
			return nil
		},
	}
	target.add(cmd)
	cmd.ValidArgsFunction = target.completeFunctions
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the function (in a cluster: the context's by default)")
	cmd.Flags().StringVarP(&data, "data", "d", "", "request body (makes the default method POST)")
	cmd.Flags().StringVarP(&method, "request", "X", "", "HTTP method (default GET, or POST with --data)")
	cmd.Flags().StringVar(&path, "path", "/", "path within the function")
	cmd.Flags().StringVar(&contentType, "content-type", "application/json", "content type of --data")
	cmd.Flags().StringArrayVarP(&headers, "header", "H", nil, "extra request header 'Name: value' (repeatable)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print the response status and headers to stderr")
	return cmd
}
