package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/internal/logging"
)

// Run runs the controller until ctx ends, then stops it; an error means it
// could not start or failed. root is the logger without a component
// (package logging): the controller logs as "controller", and
// controller-runtime's own logs go through it too.
func Run(ctx context.Context, cfg Process, root *slog.Logger) error {
	ctrl.SetLogger(controllerLogger(root))
	if err := cfg.Validate(); err != nil {
		return err
	}
	mgr, err := newManager(cfg)
	if err != nil {
		return err
	}
	r, err := function.NewReconciler(mgr, cfg.Function)
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	if p := r.Pool(); p != nil && cfg.ClaimAddress != "0" && cfg.ClaimAddress != "" {
		if err := addClaims(mgr, p, cfg.ClaimAddress, logging.Component(root, "controller")); err != nil {
			return err
		}
	}
	if err := addChecks(mgr); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting", "workers", cfg.Function.Workers, "leaderElection", cfg.LeaderElect)
	return mgr.Start(ctx)
}

// controllerLogger is the logr.Logger of the controller and of
// controller-runtime: root with component "controller".
func controllerLogger(root *slog.Logger) logr.Logger {
	return logging.Logr(logging.Component(root, "controller"))
}

// newManager makes the controller-runtime manager: the API client with
// cfg's rate limit, the cache of what the controller reads, leader
// election, metrics and health servers.
func newManager(cfg Process) (manager.Manager, error) {
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	restCfg.QPS, restCfg.Burst = float32(cfg.KubeAPIQPS), cfg.KubeAPIBurst
	scheme := runtime.NewScheme()
	if err := function.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         function.CacheOptions(),
		Metrics:                       metricsserver.Options{BindAddress: cfg.MetricsAddress},
		HealthProbeBindAddress:        cfg.HealthAddress,
		LeaderElection:                cfg.LeaderElect,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       cfg.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	return mgr, nil
}

// addChecks serves /healthz (the process answers) and /readyz (the cache
// is synced).
func addChecks(mgr manager.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	err := mgr.AddReadyzCheck("cache", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("cache not synced")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}
	return nil
}
