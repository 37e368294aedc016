package apirules

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
)

// Resync is how often the watcher hands its gateway the APIRules and
// writes their status without a change: a status write that failed is
// written again then.
const Resync = time.Minute

// Setter is the gateway (gateway.Gateway.SetAPIRules).
type Setter interface {
	SetAPIRules(rules []*gatewayv2.APIRule) map[types.NamespacedName]gateway.APIRuleStatus
}

// Watcher keeps a Setter serving the APIRules of a cache and writes their
// status with a client. Make one with New; Start runs it.
type Watcher struct {
	cache  cache.Cache
	client client.Client
	set    Setter
	log    *slog.Logger
	kick   chan struct{}
}

// New returns a Watcher of the APIRules in c, whose status it writes with
// cl, serving them with set.
func New(c cache.Cache, cl client.Client, set Setter, log *slog.Logger) *Watcher {
	return &Watcher{cache: c, client: cl, set: set, log: log, kick: make(chan struct{}, 1)}
}

// NeedLeaderElection is false: every replica's gateway serves the
// APIRules (their status, written by each, is the same).
func (w *Watcher) NeedLeaderElection() bool { return false }

// Start serves the APIRules until ctx ends; it fails only when it cannot
// watch them (no APIRule CRD).
func (w *Watcher) Start(ctx context.Context) error {
	inf, err := w.cache.GetInformer(ctx, &gatewayv2.APIRule{})
	if err != nil {
		return fmt.Errorf("watch APIRules: %w", err)
	}
	poke := func(any) { w.poke() }
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke,
	}); err != nil {
		return fmt.Errorf("watch APIRules: %w", err)
	}
	if !w.cache.WaitForCacheSync(ctx) {
		return nil // ctx ended
	}
	tick := time.NewTicker(Resync)
	defer tick.Stop()
	for {
		w.sync(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-w.kick:
		case <-tick.C:
		}
	}
}

func (w *Watcher) poke() {
	select {
	case w.kick <- struct{}{}:
	default: // a sync is due already
	}
}

// sync hands the gateway every APIRule and writes the status of those
// whose status changed. A list that fails changes nothing.
func (w *Watcher) sync(ctx context.Context) {
	var list gatewayv2.APIRuleList
	if err := w.cache.List(ctx, &list); err != nil {
		w.log.Warn("listing APIRules failed: the gateway serves the ones it had", "error", err)
		return
	}
	rules := make([]*gatewayv2.APIRule, len(list.Items))
	for i := range list.Items {
		rules[i] = &list.Items[i]
	}
	statuses := w.set.SetAPIRules(rules)
	for _, r := range rules {
		st, ok := statuses[types.NamespacedName{Namespace: r.Namespace, Name: r.Name}]
		if !ok || (r.Status.State == st.State && r.Status.Description == st.Description) {
			continue
		}
		if err := w.writeStatus(ctx, r, st); err != nil {
			w.log.Warn("writing an APIRule's status failed; written again at the next change or resync",
				"namespace", r.Namespace, "apirule", r.Name, "error", err)
		}
	}
}

// writeStatus writes st as r's status.
func (w *Watcher) writeStatus(ctx context.Context, r *gatewayv2.APIRule, st gateway.APIRuleStatus) error {
	patched := r.DeepCopy()
	patched.Status = gatewayv2.APIRuleStatus{State: st.State, Description: st.Description, LastProcessedTime: metav1.Now()}
	if err := w.client.Status().Patch(ctx, patched, client.MergeFrom(r)); err != nil {
		return fmt.Errorf("patch status of APIRule %s/%s: %w", r.Namespace, r.Name, err)
	}
	return nil
}
