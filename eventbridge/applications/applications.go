package applications

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// GroupVersionKind is Kyma's Application kind.
var GroupVersionKind = schema.GroupVersionKind{Group: "applicationconnector.kyma-project.io", Version: "v1alpha1", Kind: "Application"}

// Resource is the plural name of Applications.
const Resource = "applications"

// TypeLabel is the label of an Application that names its type; Kyma reads
// its key without regard to case.
const TypeLabel = "application-type"

// DefaultCheckInterval is how often Run looks for the Application CRD
// until it is served.
const DefaultCheckInterval = time.Minute

// TypeOrName returns what Kyma's publisher routes an Application's events
// by: the value of its application-type label (the first key that equals
// TypeLabel ignoring case, in sorted key order, so that the answer does not
// depend on map order) or else its name.
func TypeOrName(name string, labels map[string]string) string {
	best := ""
	for k := range labels {
		if strings.EqualFold(k, TypeLabel) && (best == "" || k < best) {
			best = k
		}
	}
	if best != "" {
		return labels[best]
	}
	return name
}

// Lookup is what the publisher needs of Applications.
type Lookup interface {
	// TypeOrName returns the TypeOrName of the Application called name,
	// and false when there is no such Application.
	TypeOrName(name string) (string, bool)
}

// Watcher is a Lookup fed by the Applications of a cluster. It is safe
// for concurrent use; until it is fed it knows no Application.
type Watcher struct {
	mu   sync.RWMutex
	apps map[string]string // name -> TypeOrName

	disc     discovery.ServerResourcesInterface
	cache    cache.Cache
	interval time.Duration
	log      *slog.Logger
}

// ErrInvalidOption is wrapped by New's errors.
var ErrInvalidOption = errors.New("invalid applications option")

// Option configures New; it returns an error wrapping ErrInvalidOption
// for a value it cannot use.
type Option func(*Watcher) error

// WithCheckInterval sets how often Run looks for the Application CRD until
// it is served; DefaultCheckInterval without it.
func WithCheckInterval(d time.Duration) Option {
	return func(w *Watcher) error {
		if d <= 0 {
			return fmt.Errorf("%w: check interval must be positive, not %s", ErrInvalidOption, d)
		}
		w.interval = d
		return nil
	}
}

// WithLogger logs to l; without it the Watcher logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(w *Watcher) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		w.log = l
		return nil
	}
}

var _ Lookup = (*Watcher)(nil)

// New returns a Watcher that, once Run runs, looks for the Application CRD
// through disc until it is served and then follows the Applications in c
// (a controller-runtime cache). Both are required (ErrInvalidOption).
func New(disc discovery.ServerResourcesInterface, c cache.Cache, opts ...Option) (*Watcher, error) {
	if disc == nil || c == nil {
		return nil, fmt.Errorf("%w: a discovery client and a cache are required", ErrInvalidOption)
	}
	w := &Watcher{apps: map[string]string{}, disc: disc, cache: c, interval: DefaultCheckInterval, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := opt(w); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// TypeOrName implements Lookup.
func (w *Watcher) TypeOrName(name string) (string, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	t, ok := w.apps[name]
	return t, ok
}

// Set records an Application (for tests and for the informer).
func (w *Watcher) Set(name string, labels map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.apps[name] = TypeOrName(name, labels)
}

// Delete forgets an Application.
func (w *Watcher) Delete(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.apps, name)
}

// Served reports whether the API server serves Kyma's Applications.
func (w *Watcher) Served() (bool, error) {
	list, err := w.disc.ServerResourcesForGroupVersion(GroupVersionKind.GroupVersion().String())
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("discover %s: %w", GroupVersionKind.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == Resource {
			return true, nil
		}
	}
	return false, nil
}

// Run waits until Applications are served (checking every interval),
// then feeds the Watcher from a metadata-only informer of its cache (which
// must be started) until ctx is done. A cluster without Kyma's
// Application CRD costs one discovery call per interval. It drains by
// removing its event handler from the informer: once it returned, the
// Watcher keeps what it knew and changes no more. It returns nil when ctx
// ends, and an error when the informer cannot be had.
func (w *Watcher) Run(ctx context.Context) error {
	for {
		served, err := w.Served()
		if err != nil {
			w.log.Warn("looking for Kyma's Application CRD failed; retrying", "error", err, "retryIn", w.interval)
		}
		if served {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.interval):
		}
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(GroupVersionKind)
	inf, err := w.cache.GetInformer(ctx, obj)
	if err != nil {
		return fmt.Errorf("application informer: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.onSet(o) },
		UpdateFunc: func(_, o any) { w.onSet(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if m, ok := o.(metav1.Object); ok {
				w.Delete(m.GetName())
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch applications: %w", err)
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	w.log.Info("routing the events of Kyma Applications by their application-type label")
	<-ctx.Done()
	return nil
}

func (w *Watcher) onSet(o any) {
	if m, ok := o.(metav1.Object); ok {
		w.Set(m.GetName(), m.GetLabels())
	}
}
