package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/local/supervisor"
)

// Ports of the event bridge's container (the chart's).
const (
	bridgePublisherPort = 8080
	bridgeAdminPort     = 8081
	bridgeGatewayPort   = 8082
	bridgeMetricsPort   = 9090
)

// fieldManager owns what kfn apply writes.
const fieldManager = "kfn-cli"

// cluster is a connection to a cluster with kfn installed.
type cluster struct {
	rest   *rest.Config
	cs     kubernetes.Interface
	client client.Client
	// kfnNamespace is where kfn's pods run.
	kfnNamespace string
	// where names the cluster in messages.
	where string
	// kept keeps the port-forwards to the event bridges' metrics open
	// between reads (kfn view's); nil: each read opens its own.
	kept *keptForwards
}

// connectCluster reads the kubeconfig (path, or KUBECONFIG, or
// ~/.kube/config) and its context (or the current one).
func connectCluster(kubeconfig, context, kfnNamespace string) (*cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, usagef("kubeconfig: %v", err)
	}
	raw, _ := cc.RawConfig()
	name := context
	if name == "" {
		name = raw.CurrentContext
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, serverlessv1alpha2.AddToScheme, eventingv1alpha2.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	return &cluster{rest: cfg, cs: cs, client: cl, kfnNamespace: kfnNamespace,
		where: fmt.Sprintf("the cluster of context %q (%s)", name, cfg.Host)}, nil
}

// readyPods lists kfn's ready pods of a component ("eventbridge",
// "scaler"), sorted by name.
func (c *cluster) readyPods(ctx context.Context, component string) ([]corev1.Pod, error) {
	list, err := c.cs.CoreV1().Pods(c.kfnNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + component})
	if err != nil {
		return nil, fmt.Errorf("list kfn's %s pods in %s: %w", component, c.where, err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no ready %s pod of kfn in namespace %s of %s (is kfn installed there? --kfn-namespace names another)", component, c.kfnNamespace, c.where)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// forward opens port-forwards from 127.0.0.1 to ports of pod, as kubectl
// port-forward does (WebSocket, falling back to SPDY), and returns the
// local port of each, in order, and a func that closes them.
func (c *cluster) forward(ctx context.Context, pod string, ports ...int) ([]int, func(), error) {
	req := c.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(c.kfnNamespace).Name(pod).SubResource("portforward")
	transport, upgrader, err := spdy.RoundTripperFor(c.rest)
	if err != nil {
		return nil, nil, fmt.Errorf("port-forward to %s: %w", pod, err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, req.URL())
	if ws, err := portforward.NewSPDYOverWebsocketDialer(req.URL(), c.rest); err == nil {
		dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}
	specs := make([]string, len(ports))
	for i, p := range ports {
		specs[i] = fmt.Sprintf("0:%d", p)
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	var errOut strings.Builder
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, specs, stop, ready, io.Discard, supervisor.NewSyncWriter(&errOut))
	if err != nil {
		return nil, nil, fmt.Errorf("port-forward to %s: %w", pod, err)
	}
	failed := make(chan error, 1)
	go func() { failed <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-failed:
		return nil, nil, fmt.Errorf("port-forward to %s/%s: %v %s", c.kfnNamespace, pod, err, strings.TrimSpace(errOut.String()))
	case <-ctx.Done():
		close(stop)
		return nil, nil, ctx.Err()
	}
	fwd, err := fw.GetPorts()
	if err != nil {
		close(stop)
		return nil, nil, fmt.Errorf("port-forward to %s: %w", pod, err)
	}
	local := make([]int, len(fwd))
	for i, p := range fwd {
		local[i] = int(p.Local)
	}
	var once sync.Once
	return local, func() { once.Do(func() { close(stop) }) }, nil
}

// bridgeEndpoints forwards local ports to an event bridge pod's publisher,
// gateway and admin API.
func (c *cluster) bridgeEndpoints(ctx context.Context, token string) (*endpoints, error) {
	pods, err := c.readyPods(ctx, "eventbridge")
	if err != nil {
		return nil, err
	}
	local, stop, err := c.forward(ctx, pods[0].Name, bridgePublisherPort, bridgeGatewayPort, bridgeAdminPort)
	if err != nil {
		return nil, err
	}
	base := func(p int) string { return fmt.Sprintf("http://127.0.0.1:%d", p) }
	// The admin API, and the gateway when it asks, ask the cluster who the
	// user is: they get the kubeconfig's own credentials, over TLS through
	// the port-forward.
	rt, err := auth.ClientTransport(c.rest)
	if err != nil {
		stop()
		return nil, err
	}
	kube := &http.Client{Transport: rt}
	return &endpoints{publisher: base(local[0]), gateway: base(local[1]), token: token,
		gatewaySecure: fmt.Sprintf("https://127.0.0.1:%d", local[1]), gatewayClient: kube,
		admin: fmt.Sprintf("https://127.0.0.1:%d", local[2]), adminPlain: base(local[2]), adminClient: kube,
		where: fmt.Sprintf("kfn's event bridge %s/%s in %s", c.kfnNamespace, pods[0].Name, c.where), close: stop}, nil
}

// errNoFunction is returned for a Function that does not exist.
var errNoFunction = errors.New("no such function")
