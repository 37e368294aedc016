package httproute

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
	"github.com/kfn-dev/kfn/eventbridge/apiroute"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
)

// FieldOwner is the field manager of the routes kfn applies.
const FieldOwner = "kfn-eventbridge"

// HashAnnotation holds the hash of the route kfn applied: a route whose
// hash is the one wanted is not applied again (every replica syncs every
// APIRule once a minute).
const HashAnnotation = "kfn.dev/route-hash"

// writeTimeout bounds one SetAPIRules' writes.
const writeTimeout = 30 * time.Second

// Config says where the routes go.
type Config struct {
	// Parent is the Gateway every route attaches to.
	Parent Parent
	// Domain is the domain of short hosts; Reserved are domains no host
	// may be in or cover (apiroute.Options).
	Domain   string
	Reserved []string
}

// Writer applies an HTTPRoute per APIRule (package apirules' Setter, in
// place of the gateway). Safe for use by one goroutine at a time.
type Writer struct {
	client client.Client
	cfg    Config
	log    *slog.Logger
}

// NewWriter returns a Writer that applies routes with cl.
func NewWriter(cl client.Client, cfg Config, log *slog.Logger) *Writer {
	return &Writer{client: cl, cfg: cfg, log: log}
}

// SetAPIRules applies the HTTPRoute of every APIRule in rules the tenancy
// rules keep (as the gateway's: a host belongs to the oldest APIRule that
// has it, reserved hosts, per-namespace bounds; apiroute), deletes the
// routes kfn wrote for the others and for APIRules gone, and returns each
// APIRule's status: Error when refused or not written, Warning with what
// its route leaves out, else Ready.
func (w *Writer) SetAPIRules(rules []*gatewayv2.APIRule) map[types.NamespacedName]gateway.APIRuleStatus {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	in := make([]apiroute.APIRule[struct{}], 0, len(rules))
	for _, r := range rules {
		a := apiroute.APIRule[struct{}]{Key: apiroute.Key{Namespace: r.Namespace, Name: r.Name}, Created: r.CreationTimestamp.Time,
			Served: r.Status.State == gatewayv2.StateReady || r.Status.State == gatewayv2.StateWarning}
		for _, h := range r.Spec.Hosts {
			if h != nil {
				a.Hosts = append(a.Hosts, string(*h))
			}
		}
		for _, rule := range r.Spec.Rules {
			methods := make([]string, len(rule.Methods))
			for i, m := range rule.Methods {
				methods[i] = string(m)
			}
			a.Rules = append(a.Rules, apiroute.Rule[struct{}]{Path: rule.Path, Methods: methods})
		}
		in = append(in, a)
	}
	_, refused := apiroute.Build(in, apiroute.Options{DefaultDomain: w.cfg.Domain, Reserved: w.cfg.Reserved})
	written, listed := w.written(ctx)
	out := make(map[types.NamespacedName]gateway.APIRuleStatus, len(rules))
	keep := map[types.NamespacedName]bool{}
	for _, r := range rules {
		key := types.NamespacedName{Namespace: r.Namespace, Name: r.Name}
		if err := refused[apiroute.Key(key)]; err != nil {
			out[key] = gateway.APIRuleStatus{State: gatewayv2.StateError, Description: err.Error()}
			continue
		}
		route, notes := Build(r, w.cfg.Parent, w.cfg.Domain)
		if len(route.Spec.Rules) == 0 {
			out[key] = gateway.APIRuleStatus{State: gatewayv2.StateError, Description: "no rule can be written as an HTTPRoute: " + strings.Join(notes, "; ")}
			continue
		}
		if err := w.apply(ctx, route, written); err != nil {
			out[key] = gateway.APIRuleStatus{State: gatewayv2.StateError, Description: err.Error()}
			continue
		}
		keep[key] = true
		if len(notes) > 0 {
			out[key] = gateway.APIRuleStatus{State: gatewayv2.StateWarning, Description: strings.Join(notes, "; ")}
		} else {
			out[key] = gateway.APIRuleStatus{State: gatewayv2.StateReady}
		}
	}
	if listed {
		w.deleteOthers(ctx, written, keep)
	}
	return out
}

// written returns the hash of each route kfn wrote, and whether they
// could be listed.
func (w *Writer) written(ctx context.Context) (map[types.NamespacedName]string, bool) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gatewayapiv1.SchemeGroupVersion.WithKind("HTTPRouteList"))
	if err := w.client.List(ctx, list, client.MatchingLabels{ManagedBy: ManagedByValue}, client.HasLabels{APIRuleLabel}); err != nil {
		w.log.Warn("listing the HTTPRoutes of APIRules failed; each is applied, and stale ones deleted at the next sync", "error", err)
		return map[types.NamespacedName]string{}, false
	}
	out := make(map[types.NamespacedName]string, len(list.Items))
	for _, u := range list.Items {
		out[types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}] = u.GetAnnotations()[HashAnnotation]
	}
	return out, true
}

// apply applies route with server-side apply, unless written says kfn
// applied it as it is.
func (w *Writer) apply(ctx context.Context, route *gatewayapiv1.HTTPRoute, written map[types.NamespacedName]string) error {
	sum, err := json.Marshal(struct {
		Meta  any
		Owner any
		Spec  any
	}{route.Labels, route.OwnerReferences, route.Spec})
	if err != nil {
		return fmt.Errorf("write HTTPRoute %s/%s: %w", route.Namespace, route.Name, err)
	}
	hash := fmt.Sprintf("%x", sha256.Sum256(sum))
	if h, ok := written[types.NamespacedName{Namespace: route.Namespace, Name: route.Name}]; ok && h == hash {
		return nil
	}
	route.Annotations = map[string]string{HashAnnotation: hash}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(route)
	if err != nil {
		return fmt.Errorf("write HTTPRoute %s/%s: %w", route.Namespace, route.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	delete(u.Object["metadata"].(map[string]any), "creationTimestamp")
	delete(u.Object, "status")
	if err := w.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("write HTTPRoute %s/%s: %w", route.Namespace, route.Name, err)
	}
	return nil
}

// deleteOthers deletes the routes kfn wrote that keep does not name. A
// failure is logged: the next sync deletes them.
func (w *Writer) deleteOthers(ctx context.Context, written map[types.NamespacedName]string, keep map[types.NamespacedName]bool) {
	for key := range written {
		if keep[key] {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gatewayapiv1.SchemeGroupVersion.WithKind("HTTPRoute"))
		u.SetNamespace(key.Namespace)
		u.SetName(key.Name)
		if err := client.IgnoreNotFound(w.client.Delete(ctx, u)); err != nil {
			w.log.Warn("deleting the HTTPRoute of an APIRule gone or refused failed", "namespace", key.Namespace, "name", key.Name, "error", err)
		}
	}
}
