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

// invokeOptions are the flags of 'kfn invoke'.
type invokeOptions struct {
	target                                     targetFlags
	namespace, data, method, path, contentType string
	headers                                    []string
	verbose                                    bool
}

func newInvokeCommand() *cobra.Command {
	var o invokeOptions
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
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	o.target.add(cmd)
	cmd.ValidArgsFunction = o.target.completeFunctions
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "default", "namespace of the function (in a cluster: the context's by default)")
	cmd.Flags().StringVarP(&o.data, "data", "d", "", "request body (makes the default method POST)")
	cmd.Flags().StringVarP(&o.method, "request", "X", "", "HTTP method (default GET, or POST with --data)")
	cmd.Flags().StringVar(&o.path, "path", "/", "path within the function")
	cmd.Flags().StringVar(&o.contentType, "content-type", "application/json", "content type of --data")
	cmd.Flags().StringArrayVarP(&o.headers, "header", "H", nil, "extra request header 'Name: value' (repeatable)")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "print the response status and headers to stderr")
	return cmd
}

// run calls the function name and copies its answer to the command's
// output; an answer other than 2xx is an error after the body is printed.
func (o *invokeOptions) run(cmd *cobra.Command, name string) error {
	header, err := o.header()
	if err != nil {
		return err
	}
	ep, err := o.target.endpoints(cmd)
	if err != nil {
		return err
	}
	defer ep.close()
	namespace := o.target.namespace(cmd, o.namespace)
	req, err := o.request(cmd, ep.gateway+"/"+namespace+"/"+name, header.Clone())
	if err != nil {
		return err
	}
	ep.authorize(req)
	// A function at zero makes the gateway hold the request while it
	// starts: say so when the answer takes more than a second.
	said := make(chan struct{})
	slow := time.AfterFunc(time.Second, func() {
		defer close(said)
		fmt.Fprintf(cmd.ErrOrStderr(), "kfn: waiting for %s/%s (a function at zero is being started)...\n", namespace, name)
	})
	// stopSlow stops the notice, or waits until it is written, so that
	// nothing writes to stderr after the command returns.
	stopSlow := func() {
		if !slow.Stop() {
			<-said
		}
	}
	resp, err := http.DefaultClient.Do(req)
	// A gateway that asks who calls (-gateway-auth=kubernetes) gets the
	// kubeconfig's credentials, over TLS; one that does not never sees
	// them, so they cannot reach a Function's code.
	if err == nil && resp.StatusCode == http.StatusUnauthorized && ep.gatewaySecure != "" && req.Header.Get("Authorization") == "" {
		resp.Body.Close()
		if req, err = o.request(cmd, ep.gatewaySecure+"/"+namespace+"/"+name, header.Clone()); err != nil {
			stopSlow()
			return err
		}
		resp, err = ep.gatewayClient.Do(req)
	}
	stopSlow()
	if err != nil {
		return ep.unreachable("invoke "+name+" through", err)
	}
	defer resp.Body.Close()
	if o.verbose {
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
		return fmt.Errorf("%s answered %s", name, resp.Status)
	}
	return nil
}

// header is the request's header from --header; a malformed one is a
// usage error.
func (o *invokeOptions) header() (http.Header, error) {
	h := http.Header{}
	for _, line := range o.headers {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, usagef("--header %q: want 'Name: value'", line)
		}
		h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return h, nil
}

// request builds the request to the function at base (its gateway
// address) from the flags, with header; a malformed method is a usage
// error.
func (o *invokeOptions) request(cmd *cobra.Command, base string, header http.Header) (*http.Request, error) {
	method := o.method
	if method == "" {
		method = http.MethodGet
		if o.data != "" {
			method = http.MethodPost
		}
	}
	path := o.path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	req, err := http.NewRequestWithContext(cmd.Context(), strings.ToUpper(method), base+path, bodyReader(o.data))
	if err != nil {
		return nil, usagef("request: %v", err)
	}
	req.Header = header
	if o.data != "" && header.Get("Content-Type") == "" { // a --header of it wins
		req.Header.Set("Content-Type", o.contentType)
	}
	return req, nil
}
