package cli

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/internal/httpserve"
	"github.com/kfn-dev/kfn/local/dev"
	"github.com/kfn-dev/kfn/local/devstatus"
	"github.com/kfn-dev/kfn/local/webview"
)

// Bounds of what kfn view reads from a cluster.
const (
	// viewInterval is how often the view reads the cluster again while a
	// page is open (the Functions, their Deployments, the event bridges'
	// metrics, the dead letters and the recent events).
	viewInterval = 2 * time.Second
	// viewReadTimeout bounds one read of the cluster's state.
	viewReadTimeout = 10 * time.Second
	// maxViewAnswer bounds an answer of the event bridge's admin API the
	// view reads: 100 chains, or 101 dead letters' previews.
	maxViewAnswer = 32 << 20
	// maxReplayAnswer bounds the answer of a replay the view passes on.
	maxReplayAnswer = 64 << 10
)

func newViewCommand() *cobra.Command {
	var (
		target            targetFlags
		namespace, listen string
	)
	cmd := &cobra.Command{
		Use:   "view",
		Short: "Serve the live web view of a cluster's namespace (or say where kfn dev's is)",
		Long: `view serves, on this machine only, the web view kfn dev serves of itself, of
one namespace of a cluster: its Functions (replicas and why one is not
ready), its Subscriptions (delivered, failed and dead-lettered counts, and
backlog), its dead letters, each with Replay, and its recent events with
their path through the chain, kept current while the page is open.

It reads the cluster with your kubeconfig's credentials, and kfn's event
bridge through a port-forward as you: what RBAC lets you read of the
namespace is what the page shows (Functions, Subscriptions and Deployments
get and list; subscriptions/deadletters and subscriptions/events, in the
view role; Replay needs subscriptions/deadletters update, in edit), and
what it does not is named among the page's problems. The counts come from
the event bridges' metrics, which name every tenant: they need get on the
/metrics non-resource URL.

The page's address holds a secret made for this run: other users of this
machine cannot use your credentials through it, nor can other web pages
(cross-origin requests and other host names are refused). Ctrl-C stops it.

Without a cluster (no --kubeconfig, --context or KUBECONFIG), view prints
the address of a running kfn dev's own web view.`,
		Example: `  kfn view -n shop --kubeconfig ~/.kube/config
  kfn view                                   # kfn dev's`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !target.inCluster(cmd) {
				addr, err := target.devAddr()
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "kfn dev's web view: %s%s\n", addr, dev.ViewPath)
				return nil
			}
			ln, err := listenLoopback(listen)
			if err != nil {
				return err
			}
			defer ln.Close()
			c, err := target.cluster()
			if err != nil {
				return err
			}
			ns := target.namespace(cmd, namespace)
			v := newClusterView(c, ns, target.token)
			defer v.close()
			return v.serve(cmd.Context(), ln, cmd.OutOrStdout())
		},
	}
	target.add(cmd)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "the namespace to show (the context's by default)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "where to serve the page: a loopback address and port (0: any free one)")
	return cmd
}

// listenLoopback listens on addr, which must be a loopback address: the
// view acts with the user's credentials, and is for this machine only.
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usagef("--listen %q: want a loopback address and port, such as 127.0.0.1:8090", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, usagef("--listen %q: the view acts with your kubeconfig's credentials and serves this machine only: give a loopback address (127.0.0.1, ::1 or localhost)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve the view: %w", err)
	}
	return ln, nil
}

// clusterView is what the web view reads of one namespace of a cluster:
// its Source (Functions and Subscriptions), DeadLetters and Events, these
// two through the event bridge's admin API, reached through a
// port-forward opened when first needed and again after it failed.
type clusterView struct {
	c         *cluster
	namespace string
	token     string

	mu      sync.Mutex
	ep      *endpoints    // nil until opened, and after it failed
	opening chan struct{} // closed when the port-forward being opened is (or failed); nil when none is
	// openWait bounds an opening of the port-forward: viewReadTimeout.
	openWait time.Duration
	closed   bool // close was called: a port-forward opened since is closed at once
}

// errViewClosed: the view was closed while a port-forward opened.
var errViewClosed = errors.New("kfn view is closing")

func newClusterView(c *cluster, namespace, token string) *clusterView {
	c.kept = &keptForwards{open: map[string]keptForward{}}
	return &clusterView{c: c, namespace: namespace, token: token, openWait: viewReadTimeout}
}

var (
	_ webview.Source      = (*clusterView)(nil)
	_ webview.DeadLetters = (*clusterView)(nil)
	_ webview.Events      = (*clusterView)(nil)
)

// Status reads the namespace's Functions and Subscriptions; what cannot be
// read is among its Errors.
func (v *clusterView) Status() devstatus.Status {
	ctx, cancel := context.WithTimeout(context.Background(), viewReadTimeout)
	defer cancel()
	st, err := v.c.status(ctx, v.namespace)
	if err != nil {
		st.Errors = append(st.Errors, err.Error())
	}
	st.Addr = fmt.Sprintf("namespace %s of %s", v.namespace, v.c.where)
	sortStatus(&st)
	return st
}

// List reads the namespace's dead letters (their previews).
func (v *clusterView) List(ctx context.Context, f deadletter.Filter) ([]deadletter.Letter, error) {
	q := url.Values{"namespace": {v.namespace}, "preview": {strconv.FormatBool(f.Preview)}}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var letters []deadletter.Letter
	return letters, v.get(ctx, "/deadletters?"+q.Encode(), &letters)
}

// Recent reads the namespace's most recently active event chains.
func (v *clusterView) Recent(ctx context.Context, limit int) ([]eventpath.Chain, error) {
	q := url.Values{"namespace": {v.namespace}, "limit": {strconv.Itoa(min(max(limit, 1), eventpath.MaxRecent))}}
	var found eventpath.Found
	return found.Chains, v.get(ctx, "/events?"+q.Encode(), &found)
}

// Changes is nil: nothing tells the view of a cluster's new events; it
// reads them every viewInterval.
func (v *clusterView) Changes() <-chan struct{} { return nil }

// get reads a JSON answer of the admin API into into.
func (v *clusterView) get(ctx context.Context, path string, into any) error {
	resp, err := v.send(ctx, http.MethodGet, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, answerError(resp.Body))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxViewAnswer)).Decode(into); err != nil {
		return fmt.Errorf("read the event bridge's answer: %w", err)
	}
	return nil
}

// send sends a request to the event bridge's admin API, opening the
// port-forward first when there is none; one that fails is closed, and
// the next request opens another (the pod may have gone).
func (v *clusterView) send(ctx context.Context, method, path string) (*http.Response, error) {
	ep, err := v.endpoints(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := ep.send(ctx, method, path)
	if err != nil {
		v.mu.Lock()
		if v.ep == ep {
			v.ep = nil
			ep.close()
		}
		v.mu.Unlock()
	}
	return resp, err
}

// endpoints returns the open port-forward, or opens one: one request
// opens it, within its own context and at most openWait, and the
// others wait for it as long as their contexts let them. (The lock is
// not held while it opens: a replay whose page never gives up, through
// an API server that does not answer, held it, and every read of the
// page's state with it.)
func (v *clusterView) endpoints(ctx context.Context) (*endpoints, error) {
	for {
		v.mu.Lock()
		if v.ep != nil {
			ep := v.ep
			v.mu.Unlock()
			return ep, nil
		}
		if opening := v.opening; opening != nil {
			v.mu.Unlock()
			select {
			case <-opening:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("open a port-forward to kfn's event bridge: %w", ctx.Err())
			}
		}
		opened := make(chan struct{})
		v.opening = opened
		v.mu.Unlock()
		octx, cancel := context.WithTimeout(ctx, v.openWait)
		ep, err := v.c.bridgeEndpoints(octx, v.token)
		cancel()
		v.mu.Lock()
		v.opening = nil
		switch {
		case err == nil && v.closed: // closed while it opened: nobody will close it after this
			ep.close()
			ep, err = nil, errViewClosed
		case err == nil:
			v.ep = ep
		}
		v.mu.Unlock()
		close(opened)
		return ep, err
	}
}

// close closes the port-forwards.
func (v *clusterView) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.closed = true
	if v.ep != nil {
		v.ep.close()
		v.ep = nil
	}
	v.c.kept.closeAll()
}

// answerError is the message of an admin API's error answer ({"error":
// "..."}, or text), bounded.
func answerError(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, maxReplayAnswer))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return e.Error
	}
	return strings.TrimSpace(string(b))
}

// replay passes the page's Replay of a dead letter on to the event
// bridge, as the user: its answer (the letter, or why not) goes back to
// the page as it came.
func (v *clusterView) replay(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		replayError(w, http.StatusBadRequest, fmt.Sprintf("dead letter %.20q: not a sequence number", r.PathValue("seq")))
		return
	}
	resp, err := v.send(r.Context(), http.MethodPost, fmt.Sprintf("/deadletters/%d/replay", seq))
	if err != nil {
		replayError(w, http.StatusBadGateway, err.Error())
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, maxReplayAnswer))
}

// replayError answers a replay the view could not pass on, as the admin
// API answers its errors (the page shows the message).
func replayError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// serve serves the view on ln until ctx ends, under a path made of a
// secret of this run, and prints the page's address to out.
func (v *clusterView) serve(ctx context.Context, ln net.Listener, out io.Writer) error {
	view, err := webview.New(v, v, v, webview.Config{Interval: viewInterval, ReadTimeout: viewReadTimeout, Title: "view"})
	if err != nil {
		return err
	}
	handler, base := viewHandler(view, v.replay)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	page := "http://" + ln.Addr().String() + base + "ui/"
	fmt.Fprintf(out, "Web view of namespace %s of %s: %s (Ctrl-C stops it)\n", v.namespace, v.c.where, page)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return view.Run(ctx) })
	g.Go(func() error { return httpserve.Until(ctx, srv, ln, "serve the view", 0) })
	return g.Wait()
}

// viewHandler serves the view under /SECRET/ui/ and the page's replays
// under /SECRET/deadletters/{seq}/replay (the page's links are relative),
// and nothing else; other web pages are refused (webview.Guard). It
// returns the handler and /SECRET/. The secret, made for each run, keeps
// the other users of this machine, who can reach its loopback address,
// from using the user's credentials through it.
func viewHandler(view *webview.View, replay http.HandlerFunc) (http.Handler, string) {
	base := "/" + rand.Text() + "/"
	mux := http.NewServeMux()
	mux.Handle(base+"ui/", http.StripPrefix(strings.TrimSuffix(base+"ui/", "/"), view.Handler()))
	mux.HandleFunc("POST "+base+"deadletters/{seq}/replay", replay)
	return webview.Guard(mux, "kfn view"), base
}
