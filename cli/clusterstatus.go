package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/local/dev"
)

// status reads what `kfn get` shows of a cluster: Functions (replicas
// from their Deployments, problems from their conditions, the backlog of
// their Subscriptions) and Subscriptions (delivery counts and backlog from
// the event bridges' metrics), in namespace ns or, when ns is empty, in all namespaces. What
// cannot be read from kfn's pods is said in the status's Errors.
func (c *cluster) status(ctx context.Context, ns string) (dev.Status, error) {
	st := dev.Status{Ready: true, Addr: c.where}
	var fns serverlessv1alpha2.FunctionList
	if err := c.client.List(ctx, &fns, client.InNamespace(ns)); err != nil {
		return st, fmt.Errorf("list Functions in %s: %w", c.where, err)
	}
	var subs eventingv1alpha2.SubscriptionList
	if err := c.client.List(ctx, &subs, client.InNamespace(ns)); err != nil {
		return st, fmt.Errorf("list Subscriptions in %s: %w", c.where, err)
	}
	counts, err := c.deliveryCounts(ctx)
	if err != nil {
		st.Errors = append(st.Errors, "delivery counts and backlog unknown: "+err.Error())
	}
	// One list of the Deployments kfn made, not a read per Function: kfn
	// view reads this every few seconds.
	var deps appsv1.DeploymentList
	if err := c.client.List(ctx, &deps, client.InNamespace(ns), client.MatchingLabels{serverlessv1alpha2.LabelManagedBy: serverlessv1alpha2.LabelManagedByValue}); err != nil {
		return st, fmt.Errorf("list the Functions' Deployments in %s: %w", c.where, err)
	}
	deployments := make(map[types.NamespacedName]*appsv1.Deployment, len(deps.Items))
	for i := range deps.Items {
		d := &deps.Items[i]
		deployments[types.NamespacedName{Namespace: d.Namespace, Name: d.Name}] = d
	}
	backlog := functionBacklogs(subs.Items, counts)
	for i := range fns.Items {
		f := &fns.Items[i]
		key := types.NamespacedName{Namespace: f.Namespace, Name: f.Name}
		fs := dev.FunctionStatus{Namespace: f.Namespace, Name: f.Name, Runtime: string(f.Spec.Runtime),
			Autoscaled: f.Autoscaled(), Min: int(f.MinReplicas()), Max: int(f.MaxReplicas()),
			Backlog: backlog[key]}
		if d, ok := deployments[key]; ok {
			if d.Spec.Replicas != nil {
				fs.Replicas = int(*d.Spec.Replicas)
			}
			fs.Ready = int(d.Status.ReadyReplicas)
		}
		for _, cond := range f.Status.Conditions {
			if cond.Status == metav1.ConditionFalse {
				fs.Error = fmt.Sprintf("%s: %s: %s", cond.Type, cond.Reason, cond.Message)
			}
		}
		st.Functions = append(st.Functions, fs)
	}
	for _, s := range subs.Items {
		k := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
		n := counts[k]
		st.Subscriptions = append(st.Subscriptions, dev.SubscriptionStatus{
			Namespace: s.Namespace, Name: s.Name, Sink: s.Spec.Sink, Source: s.Spec.Source, Types: s.Spec.Types, CleanTypes: s.Status.Types,
			Ready: s.Status.Ready, Delivered: n.delivered, Failed: n.failed, DeadLettered: n.deadLettered,
		})
	}
	return st, nil
}

// functionBacklogs adds up, for each Function, the events waiting for the
// Subscriptions whose sink is its Service (what kfn's scaler counts for
// KEDA; the scaler itself answers KEDA's certificate only).
func functionBacklogs(subs []eventingv1alpha2.Subscription, counts map[types.NamespacedName]deliveries) map[types.NamespacedName]uint64 {
	out := map[types.NamespacedName]uint64{}
	for i := range subs {
		sink, err := subs[i].ValidateSink()
		if err != nil {
			continue
		}
		fn := types.NamespacedName{Namespace: sink.Namespace, Name: sink.Service}
		out[fn] += counts[types.NamespacedName{Namespace: subs[i].Namespace, Name: subs[i].Name}].backlog
	}
	return out
}

// deliveries are one Subscription's delivery counts, and the events
// waiting for it.
type deliveries struct{ delivered, failed, deadLettered, backlog uint64 }

// deliveryCounts adds up the dispatcher counters of every event bridge pod.
func (c *cluster) deliveryCounts(ctx context.Context) (map[types.NamespacedName]deliveries, error) {
	out := map[types.NamespacedName]deliveries{}
	pods, err := c.readyPods(ctx, "eventbridge")
	if err != nil {
		return out, err
	}
	// The metrics name every tenant: the event bridge serves them over TLS
	// to whom RBAC lets get /metrics (eventbridge.metrics.auth), so they
	// get the kubeconfig's credentials; plain HTTP where the chart turned
	// that off.
	rt, err := auth.ClientTransport(c.rest)
	if err != nil {
		return out, err
	}
	kube := &http.Client{Transport: rt}
	c.kept.prune(pods)
	for _, p := range pods {
		local, stop, err := c.kept.forward(ctx, c, p.Name, bridgeMetricsPort)
		if err != nil {
			return out, err
		}
		err = addDeliveries(ctx, kube, fmt.Sprintf("https://127.0.0.1:%d/metrics", local), out)
		if err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
			err = addDeliveries(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/metrics", local), out)
		}
		stop(err != nil)
		if err != nil {
			return out, fmt.Errorf("metrics of %s: %w", p.Name, err)
		}
	}
	return out, nil
}

// Metric names of the dispatcher (eventbridge/dispatcher), per
// Subscription (labels namespace, subscription).
const (
	metricDelivered    = "kfn_eventbridge_delivered_total"
	metricFailed       = "kfn_eventbridge_delivery_failures_total"
	metricDeadLettered = "kfn_eventbridge_dead_lettered_total"
	// metricBacklog is a gauge of the Subscription's consumer, the same on
	// every event bridge pod: the largest is taken, not the sum.
	metricBacklog = "kfn_eventbridge_backlog"
)

// addDeliveries reads a Prometheus text page with hc and adds its
// dispatcher counters to out.
func addDeliveries(ctx context.Context, hc *http.Client, url string, out map[types.NamespacedName]deliveries) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET /metrics: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return fmt.Errorf("parse metrics: %w", err)
	}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			var k types.NamespacedName
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "namespace":
					k.Namespace = l.GetValue()
				case "subscription":
					k.Name = l.GetValue()
				}
			}
			if k.Name == "" {
				continue
			}
			d := out[k]
			v := uint64(m.GetCounter().GetValue())
			switch name {
			case metricDelivered:
				d.delivered += v
			case metricFailed:
				d.failed += v
			case metricDeadLettered:
				d.deadLettered += v
			case metricBacklog:
				d.backlog = max(d.backlog, uint64(max(m.GetGauge().GetValue(), 0)))
			default:
				continue
			}
			out[k] = d
		}
	}
	return nil
}

// sortStatus orders functions and subscriptions by namespace and name, as
// kfn dev does.
func sortStatus(st *dev.Status) {
	sortByName(st.Functions, func(f dev.FunctionStatus) (string, string) { return f.Namespace, f.Name })
	sortByName(st.Subscriptions, func(s dev.SubscriptionStatus) (string, string) { return s.Namespace, s.Name })
}

// sortByName orders s by namespace/name.
func sortByName[T any](s []T, name func(T) (namespace, name string)) {
	key := func(v T) string {
		ns, n := name(v)
		return ns + "/" + n
	}
	sort.Slice(s, func(i, j int) bool { return key(s[i]) < key(s[j]) })
}
