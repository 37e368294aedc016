package function

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"github.com/kfn-dev/kfn/controller/resources"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// kedaDetector tells whether KEDA's ScaledObject CRD is served, checking
// the API server's discovery every interval. When KEDA appears it starts
// watching ScaledObjects and re-queues every Function, so that Functions
// waiting for KEDA get their ScaledObjects; when it disappears it re-queues
// them too, so that they show what they miss.
type kedaDetector struct {
	disc     discovery.DiscoveryInterface
	interval time.Duration
	log      logr.Logger

	present atomic.Bool
	watched atomic.Bool

	// watch starts the ScaledObject watch; it is called once.
	watch func() error
	// list lists every Function, to re-queue them.
	list   func(ctx context.Context) ([]client.Object, error)
	events chan event.GenericEvent
}

func (d *kedaDetector) installed() bool { return d.present.Load() }

// watching reports whether ScaledObjects are in the controller's cache.
func (d *kedaDetector) watching() bool { return d.watched.Load() }

// check asks the API server whether keda.sh/v1alpha1 serves ScaledObjects.
func (d *kedaDetector) check() (bool, error) {
	rl, err := d.disc.ServerResourcesForGroupVersion(kedav1alpha1.SchemeGroupVersion.String())
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("discover %s: %w", kedav1alpha1.SchemeGroupVersion, err)
	}
	for _, r := range rl.APIResources {
		if r.Kind == resources.ScaledObjectGVK.Kind {
			return true, nil
		}
	}
	return false, nil
}

// Start checks until ctx ends. It implements manager.Runnable.
func (d *kedaDetector) Start(ctx context.Context) error {
	t := time.NewTicker(d.interval)
	defer t.Stop()
	for {
		if err := d.poll(ctx); err != nil {
			d.log.Error(err, "check for KEDA")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection: only the leader reconciles, so only it re-queues.
func (d *kedaDetector) NeedLeaderElection() bool { return true }

func (d *kedaDetector) poll(ctx context.Context) error {
	now, err := d.check()
	if err != nil {
		return err
	}
	if now == d.present.Load() && (!now || d.watched.Load()) {
		return nil
	}
	if now && !d.watched.Load() {
		if err := d.watch(); err != nil {
			return fmt.Errorf("watch scaledobjects: %w", err)
		}
		d.watched.Store(true)
	}
	d.present.Store(now)
	d.log.Info("KEDA availability changed", "installed", now)
	fns, err := d.list(ctx)
	if err != nil {
		return err
	}
	for _, fn := range fns {
		select {
		case d.events <- event.GenericEvent{Object: fn}:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}
