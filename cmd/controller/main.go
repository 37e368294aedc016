// Command controller runs kfn's Function controller: it reconciles
// serverless.kyma-project.io/v1alpha2 Functions into ConfigMaps,
// Deployments, Services and autoscalers (see controller/README.md).
//
// "controller fetch-source ..." is the init container command that fetches
// a Git Function's source into its pod.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/internal/logging"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := dispatch(ctx, os.Args[1:])
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
}

func dispatch(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "fetch-source" {
		return fetchSource(ctx, args[1:])
	}
	o, err := parseOptions(args)
	if err != nil {
		return err
	}
	return run(ctx, o, os.Stderr)
}

// run starts the manager, logging to stderr, and returns when ctx ends or
// the manager fails.
func run(ctx context.Context, o options, stderr io.Writer) error {
	slogger, err := o.newLogger(stderr)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logging.Logr(slogger))
	log := ctrl.Log.WithName("setup")
	cfg := o.functionConfig()
	if err := cfg.Validate(); err != nil {
		return err
	}
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubernetes config: %w", err)
	}
	restCfg.QPS, restCfg.Burst = float32(o.KubeAPIQPS), o.KubeAPIBurst
	scheme := runtime.NewScheme()
	if err := function.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         function.CacheOptions(),
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddress},
		HealthProbeBindAddress:        o.HealthAddress,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              "kfn-function-controller",
		LeaderElectionNamespace:       o.LeaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	r, err := function.NewReconciler(mgr, cfg)
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("cache", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("cache not synced")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}
	log.Info("starting", "workers", cfg.Workers, "leaderElection", o.LeaderElect)
	return mgr.Start(ctx)
}
