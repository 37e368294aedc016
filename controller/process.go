package controller

import (
	"flag"
	"fmt"
	"strings"

	"github.com/kfn-dev/kfn/contract/claim"
	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/internal/logging"
)

// LeaderElectionID is the name of the controller's leader election Lease.
const LeaderElectionID = "kfn-function-controller"

// Process is every setting of the controller. DefaultProcess has working
// values for a cluster; RegisterFlags documents each one as a flag, and
// File, when set, is read under the flags by Load.
type Process struct {
	// File is a YAML config file (keys in controller/README.md,
	// "Configuration"; unknown keys are refused) read over the defaults;
	// the flags given on the command line win over it.
	File string
	// MetricsAddress serves Prometheus metrics (controller-runtime's);
	// "0" disables it.
	MetricsAddress string
	// HealthAddress serves /healthz and /readyz (cache synced); "0"
	// disables them.
	HealthAddress string
	// ClaimAddress serves the warm pool's claims (package contract/claim)
	// in the leader, to callers with create on functions/claim (the event
	// bridge); "0" disables them (Functions then wake on a standby pod
	// once KEDA scaled their Deployment).
	ClaimAddress string
	// LeaderElect makes only the replica holding the Lease
	// LeaderElectionID reconcile.
	LeaderElect bool
	// LeaderElectionNamespace is the Lease's namespace; empty: the pod's.
	LeaderElectionNamespace string
	// KubeAPIQPS and KubeAPIBurst limit the requests to the API server.
	KubeAPIQPS   float64
	KubeAPIBurst int
	// Function configures the reconciler.
	Function function.Config
	// LogLevel is debug, info, warn or error; empty (neither the file nor
	// a flag chose one) means info, or debug with LogDevelopment.
	LogLevel string
	// LogDevelopment writes text logs (the same keys as key=value) instead
	// of JSON.
	LogDevelopment bool
}

// DefaultProcess returns working defaults.
func DefaultProcess() Process {
	return Process{
		MetricsAddress: ":8080",
		HealthAddress:  ":8081",
		ClaimAddress:   fmt.Sprintf(":%d", claim.DefaultPort),
		LeaderElect:    true,
		KubeAPIQPS:     200,
		KubeAPIBurst:   400,
		Function:       function.DefaultConfig(),
	}
}

// RegisterFlags binds every setting to a flag of fs, with the current
// values as defaults.
func (c *Process) RegisterFlags(fs *flag.FlagSet) {
	f, r := &c.Function, &c.Function.Resources
	fs.StringVar(&c.File, "config", c.File, "YAML config file (see controller/README.md); flags override it")
	fs.StringVar(&c.MetricsAddress, "metrics-bind-address", c.MetricsAddress, "address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&c.HealthAddress, "health-probe-bind-address", c.HealthAddress, "address of /healthz and /readyz; 0 disables them")
	fs.StringVar(&c.ClaimAddress, "claim-bind-address", c.ClaimAddress, "address of the warm pool's claims (the leader's; the event bridge's first event or request for a Function at zero claims a standby pod there); 0 disables them")
	fs.BoolVar(&c.LeaderElect, "leader-elect", c.LeaderElect, "elect a leader so only one replica reconciles")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", c.LeaderElectionNamespace, "namespace of the leader election Lease (default: the pod's namespace)")
	fs.Float64Var(&c.KubeAPIQPS, "kube-api-qps", c.KubeAPIQPS, "requests per second to the API server")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", c.KubeAPIBurst, "burst of requests to the API server")
	fs.IntVar(&f.Workers, "workers", f.Workers, "Functions reconciled concurrently")
	fs.BoolVar(&f.WarmPool, "warm-pool", f.WarmPool, "run the warm pool: standby pods, in the namespaces of Functions that scale to zero, given to such a Function when it is woken (the controller then creates, labels and deletes pods)")
	fs.IntVar(&f.WarmPoolSize, "warm-pool-size", f.WarmPoolSize, "the most standby pods per namespace and shape of Function that scales to zero (each pool keeps as many as the most wakes it saw in one minute of the last 10, at least one), unless the namespace's annotation kfn.dev/warm-pool-size fixes it")
	fs.IntVar(&f.WarmPoolMaxStandby, "warm-pool-max-standby", f.WarmPoolMaxStandby, "the most standby pods of all namespaces together; past it every namespace gets its first pod before any gets a second (and within one, every pool of it), those that woke last first")
	fs.DurationVar(&f.WarmPoolIdle, "warm-pool-idle", f.WarmPoolIdle, "how long a namespace's pool keeps a standby pod after its Functions last woke or joined it")
	fs.Var(&imagesFlag{images: &f.Plan.Images}, "runtime-image", "`runtime=image`; repeat for each runtime to change")
	fs.StringVar(&f.Plan.DefaultProfile, "default-profile", f.Plan.DefaultProfile, "resource preset of Functions that name none (XS, S, M, L, XL; default L)")
	fs.StringVar(&f.Plan.PublisherAddress, "publisher-address", f.Plan.PublisherAddress, "PUBLISHER_PROXY_ADDRESS given to functions")
	fs.StringVar(&f.Plan.DependencyCacheAddress, "dependency-cache-address", f.Plan.DependencyCacheAddress, "KFN_DEPENDENCY_CACHE given to the pods of Functions with dependencies (http://<publisher>/_kfn/dependencies); empty: no cache, every pod installs")
	fs.StringVar(&f.Plan.TraceCollectorEndpoint, "trace-collector-endpoint", f.Plan.TraceCollectorEndpoint, "TRACE_COLLECTOR_ENDPOINT given to functions; empty: no tracing")
	fs.StringVar(&r.ScalerAddress, "scaler-address", r.ScalerAddress, "host:port of kfn's KEDA external scaler, written into ScaledObjects")
	fs.Var(authenticationFlag{&r.ScalerAuthentication}, "scaler-authentication", "KEDA (Cluster)TriggerAuthentication with the scaler's TLS settings, as `Kind/name` (ClusterTriggerAuthentication/kfn-scaler); empty: plain gRPC")
	fs.StringVar(&r.RegistrySecretName, "registry-secret-name", r.RegistrySecretName, "Secret with .npmrc / pip.conf used by dependency installs, when present in the Function's namespace")
	fs.StringVar(&r.GitFetchImage, "git-fetch-image", r.GitFetchImage, "image of the init container that fetches Git sources (kfn's server image)")
	fs.Var((*wordsFlag)(&r.GitFetchCommand), "git-fetch-command", "`command` in the git fetch image that runs this binary's fetch-source")
	fs.DurationVar(&f.GitPollInterval, "git-poll-interval", f.GitPollInterval, "how often Git references are re-resolved")
	fs.Var((*int32Flag)(&r.HPACPUUtilization), "hpa-cpu-utilization", "CPU target of HorizontalPodAutoscalers, `percent` of requests")
	fs.DurationVar(&f.Resync, "resync", f.Resync, "how often every Function is reconciled and re-applied without a change")
	fs.DurationVar(&f.KEDACheckInterval, "keda-check-interval", f.KEDACheckInterval, "how often to check whether KEDA's CRDs are installed")
	fs.Var((*listFlag)(&f.Plan.ImageRegistries), "allowed-image-registries", "comma-separated `registries` (ghcr.io/kfn-dev, registry.example.com) a runtimeImageOverride may name; * allows any")
	fs.Var((*quantityFlag)(&r.Volumes.FunctionDir), "function-dir-size-limit", "size limit of the function directory's emptyDir")
	fs.Var((*quantityFlag)(&r.Volumes.Dependencies), "dependencies-size-limit", "size limit of the installed dependencies' emptyDir")
	fs.Var((*quantityFlag)(&r.Volumes.Tmp), "tmp-size-limit", "size limit of /tmp (an emptyDir) in Function pods")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: "+logging.Levels+" (default info; debug with --log-development)")
	fs.BoolVar(&c.LogDevelopment, "log-development", c.LogDevelopment, "text logs (the same keys as key=value) instead of JSON, at level debug unless a log level is set; kept for the zap flag it replaces")
}

// Load completes the configuration once fs parsed the command line: it
// reads File, when set, over the defaults and sets the flags given again
// over it, so that the command line wins whatever the order of the
// arguments; then it chooses the log level when neither chose one.
func (c *Process) Load(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if c.File != "" {
		given := map[string]string{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = f.Value.String() })
		if err := c.readFile(); err != nil {
			return err
		}
		var err error
		fs.Visit(func(f *flag.Flag) {
			if images, ok := f.Value.(*imagesFlag); ok {
				images.reapply()
			} else if err == nil {
				err = f.Value.Set(given[f.Name])
			}
		})
		if err != nil {
			return fmt.Errorf("flags over the config file: %w", err)
		}
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
		if c.LogDevelopment {
			c.LogLevel = "debug" // what zap's development mode logged
		}
	}
	return nil
}

// Validate returns an error wrapping function.ErrInvalidConfig that says
// what to fix.
func (c *Process) Validate() error {
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		return fmt.Errorf("%w: log level: %w", function.ErrInvalidConfig, err)
	}
	return c.Function.Validate()
}

// LogFormat is the format of the logs: text with LogDevelopment, else JSON.
func (c *Process) LogFormat() logging.Format {
	if c.LogDevelopment {
		return logging.Text
	}
	return logging.JSON
}

// joinWords is the flag form of a command: its words joined by spaces.
func joinWords(words []string) string { return strings.Join(words, " ") }
