package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/api/trigger"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/local/dev"
	"github.com/kfn-dev/kfn/scaler/server"
)

// status reads what `kfn get` shows of a cluster: Functions (replicas
// from their Deployments, problems from their conditions, the backlog from
// kfn's scaler) and Subscriptions (delivery counts from the event bridges'
// metrics), in namespace ns or, when ns is empty, in all namespaces. What
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
	backlog, err := c.backlogs(ctx, fns.Items)
	if err != nil {
		st.Errors = append(st.Errors, "backlog unknown: "+err.Error())
	}
	for i := range fns.Items {
		f := &fns.Items[i]
		fs := dev.FunctionStatus{Namespace: f.Namespace, Name: f.Name, Runtime: string(f.Spec.Runtime),
			Autoscaled: f.Autoscaled(), Min: int(f.MinReplicas()), Max: int(f.MaxReplicas()),
			Backlog: backlog[types.NamespacedName{Namespace: f.Namespace, Name: f.Name}]}
		var d appsv1.Deployment
		switch err := c.client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Name}, &d); {
		case err == nil:
			if d.Spec.Replicas != nil {
				fs.Replicas = int(*d.Spec.Replicas)
			}
			fs.Ready = int(d.Status.ReadyReplicas)
		case !apierrors.IsNotFound(err):
			return st, fmt.Errorf("read the Deployment of %s/%s: %w", f.Namespace, f.Name, err)
		}
		for _, cond := range f.Status.Conditions {
			if cond.Status == metav1.ConditionFalse {
				fs.Error = fmt.Sprintf("%s: %s: %s", cond.Type, cond.Reason, cond.Message)
			}
		}
		st.Functions = append(st.Functions, fs)
	}
	counts, err := c.deliveryCounts(ctx)
	if err != nil {
		st.Errors = append(st.Errors, "delivery counts unknown: "+err.Error())
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

// backlogs asks kfn's scaler, as KEDA does, how many events wait for each
// autoscaled Function.
func (c *cluster) backlogs(ctx context.Context, fns []serverlessv1alpha2.Function) (map[types.NamespacedName]uint64, error) {
	out := map[types.NamespacedName]uint64{}
	var scaled []*serverlessv1alpha2.Function
	for i := range fns {
		if fns[i].Autoscaled() {
			scaled = append(scaled, &fns[i])
		}
	}
	if len(scaled) == 0 {
		return out, nil
	}
	pods, err := c.readyPods(ctx, "scaler")
	if err != nil {
		return out, err
	}
	local, stop, err := c.forward(ctx, pods[0].Name, scalerGRPCPort)
	if err != nil {
		return out, err
	}
	defer stop()
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", local[0]), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return out, fmt.Errorf("connect to the scaler: %w", err)
	}
	defer conn.Close()
	sc := pb.NewExternalScalerClient(conn)
	for _, f := range scaled {
		md := trigger.Metadata{Function: types.NamespacedName{Namespace: f.Namespace, Name: f.Name},
			TargetBacklog: f.TargetBacklog(), TargetConcurrency: f.TargetConcurrency()}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := sc.GetMetrics(rctx, &pb.GetMetricsRequest{
			ScaledObjectRef: &pb.ScaledObjectRef{Namespace: f.Namespace, Name: f.Name, ScalerMetadata: md.Render()},
			MetricName:      server.MetricBacklog,
		})
		cancel()
		if err != nil {
			// A Function whose ScaledObject KEDA has not asked about yet.
			continue
		}
		for _, v := range resp.GetMetricValues() {
			out[md.Function] = uint64(max(v.GetMetricValue(), 0))
		}
	}
	return out, nil
}

// deliveries are one Subscription's delivery counts.
type deliveries struct{ delivered, failed, deadLettered uint64 }

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
	for _, p := range pods {
		local, stop, err := c.forward(ctx, p.Name, bridgeMetricsPort)
		if err != nil {
			return out, err
		}
		err = addDeliveries(ctx, kube, fmt.Sprintf("https://127.0.0.1:%d/metrics", local[0]), out)
		if err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
			err = addDeliveries(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/metrics", local[0]), out)
		}
		stop()
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
	sort.Slice(st.Functions, func(i, j int) bool {
		a, b := st.Functions[i], st.Functions[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	sort.Slice(st.Subscriptions, func(i, j int) bool {
		a, b := st.Subscriptions[i], st.Subscriptions[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
}
