package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/local/dev"
)

// tokenEnv holds the bearer token of kfn's publisher and gateway when the
// chart sets eventbridge.token (see SECURITY.md).
const tokenEnv = "KFN_TOKEN"

// targetFlags are the flags that say where a command's requests go: a
// running kfn dev (--addr), or kfn in a cluster (--kubeconfig, --context,
// or the KUBECONFIG variable), reached through port-forwards to its pods.
type targetFlags struct {
	addr, kubeconfig, context, kfnNamespace, token string
}

// add registers the flags on cmd.
func (f *targetFlags) add(cmd *cobra.Command) {
	def := DefaultAddr
	if v := os.Getenv(addrEnv); v != "" {
		def = v
	}
	cmd.Flags().StringVar(&f.addr, "addr", def, "address of a running kfn dev, host:port or http://host:port; env "+addrEnv)
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "talk to kfn in the cluster of this kubeconfig (also: the KUBECONFIG variable)")
	cmd.Flags().StringVar(&f.context, "context", "", "the kubeconfig context to use (implies the cluster)")
	cmd.Flags().StringVar(&f.kfnNamespace, "kfn-namespace", "kfn-system", "namespace kfn is installed in, in the cluster")
	cmd.Flags().StringVar(&f.token, "token", os.Getenv(tokenEnv), "bearer token of kfn's publisher and gateway, if they require one; env "+tokenEnv)
}

// inCluster reports whether the command talks to a cluster: --kubeconfig
// or --context given, or KUBECONFIG set, and no --addr given (an explicit
// --addr or KFN_ADDR means kfn dev).
func (f *targetFlags) inCluster(cmd *cobra.Command) bool {
	if cmd.Flags().Changed("addr") || os.Getenv(addrEnv) != "" {
		return false
	}
	return f.kubeconfig != "" || f.context != "" || os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != ""
}

// devAddr returns --addr as a base URL: host:port and http(s)://host:port
// are both accepted.
func (f *targetFlags) devAddr() (string, error) {
	return baseURL(f.addr)
}

// baseURL normalizes an address given as host:port or as a URL into
// scheme://host:port without a trailing slash.
func baseURL(addr string) (string, error) {
	a := strings.TrimSpace(addr)
	if a == "" {
		return "", usagef("--addr is empty: want host:port or http://host:port")
	}
	if !strings.Contains(a, "://") {
		a = "http://" + a
	}
	u, err := url.Parse(a)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
		return "", usagef("--addr %q: want host:port or http://host:port", addr)
	}
	return u.Scheme + "://" + u.Host, nil
}

// endpoints are the base URLs of kfn's HTTP APIs for one command: the
// publisher (POST /publish), the gateway (/NAMESPACE/NAME/...) and the
// admin API (/_kfn/...), with the token to send to the first two.
type endpoints struct {
	publisher, gateway, admin string
	token                     string
	// adminClient reaches the admin API: an event bridge's over TLS with
	// the kubeconfig's credentials (auth.ClientTransport); nil:
	// http.DefaultClient (kfn dev's). adminPlain is the admin API's
	// address over plain HTTP, for an event bridge installed with
	// eventbridge.admin.auth=none.
	adminClient *http.Client
	adminPlain  string
	// gatewaySecure is the gateway's address over TLS, where it takes the
	// kubeconfig's credentials through gatewayClient (auth.ClientTransport)
	// when it asks for them (401); empty: none (kfn dev's).
	gatewaySecure string
	gatewayClient *http.Client
	// where names the target in error messages; hint follows an error
	// reaching it.
	where, hint string
	// close releases port-forwards.
	close func()
}

// endpoints opens what the command needs: kfn dev's one address, or
// port-forwards to an event bridge pod of the cluster.
func (f *targetFlags) endpoints(cmd *cobra.Command) (*endpoints, error) {
	if !f.inCluster(cmd) {
		addr, err := f.devAddr()
		if err != nil {
			return nil, err
		}
		return &endpoints{publisher: addr, gateway: addr, admin: addr, token: f.token, where: "kfn dev at " + addr,
			hint: " (is 'kfn dev' running? start it with 'make dev' or 'kfn dev DIR')", close: func() {}}, nil
	}
	c, err := f.cluster()
	if err != nil {
		return nil, err
	}
	return c.bridgeEndpoints(cmd.Context(), f.token)
}

// cluster connects to the cluster the flags name.
func (f *targetFlags) cluster() (*cluster, error) {
	return connectCluster(f.kubeconfig, f.context, f.kfnNamespace)
}

// namespace is -n when given, else the kubeconfig context's namespace in
// the cluster, else "default".
func (f *targetFlags) namespace(cmd *cobra.Command, flag string) string {
	if cmd.Flags().Changed("namespace") || !f.inCluster(cmd) {
		return flag
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cfg := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context})
	if ns, _, err := cfg.Namespace(); err == nil && ns != "" {
		return ns
	}
	return flag
}

// unreachable says that doing what at the target failed with err.
func (e *endpoints) unreachable(what string, err error) error {
	return fmt.Errorf("%s %s: %w%s", what, e.where, err, e.hint)
}

// authorize sets the bearer token on a request to the publisher or the
// gateway, when there is one.
func (e *endpoints) authorize(req *http.Request) {
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
}

// completeFunctions completes a function NAME argument from kfn dev's
// status or the cluster's Functions (in -n's namespace).
func (f *targetFlags) completeFunctions(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ns, _ := cmd.Flags().GetString("namespace")
	ns = f.namespace(cmd, ns)
	var names []string
	if f.inCluster(cmd) {
		c, err := f.cluster()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var list serverlessv1alpha2.FunctionList
		if err := c.client.List(cmd.Context(), &list, client.InNamespace(ns)); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		for _, fn := range list.Items {
			names = append(names, fn.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
	ep, err := f.endpoints(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var st dev.Status
	if err := adminGet(cmd, ep, "/status", &st); err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	for _, fn := range st.Functions {
		if fn.Namespace == ns {
			names = append(names, fn.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
