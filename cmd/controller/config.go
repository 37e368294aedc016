package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/internal/logging"
)

// options is the controller's whole configuration: the config file, then
// the flags given on the command line over it.
type options struct {
	MetricsAddress       string            `json:"metricsAddress"`
	HealthAddress        string            `json:"healthAddress"`
	LeaderElect          bool              `json:"leaderElect"`
	LeaderElectionNS     string            `json:"leaderElectionNamespace"`
	KubeAPIQPS           float64           `json:"kubeAPIQPS"`
	KubeAPIBurst         int               `json:"kubeAPIBurst"`
	Workers              int               `json:"workers"`
	RuntimeImages        map[string]string `json:"runtimeImages"`
	DefaultProfile       string            `json:"defaultProfile"`
	PublisherAddress     string            `json:"publisherAddress"`
	TraceCollector       string            `json:"traceCollectorEndpoint"`
	ScalerAddress        string            `json:"scalerAddress"`
	ScalerAuthentication string            `json:"scalerAuthentication"`
	RegistrySecretName   string            `json:"registrySecretName"`
	GitFetchImage        string            `json:"gitFetchImage"`
	GitFetchCommand      []string          `json:"gitFetchCommand"`
	GitPollInterval      duration          `json:"gitPollInterval"`
	HPACPUUtilization    int32             `json:"hpaCPUUtilization"`
	Resync               duration          `json:"resync"`
	KEDACheckInterval    duration          `json:"kedaCheckInterval"`
	LogLevel             string            `json:"logLevel"`
	LogDevelopment       bool              `json:"logDevelopment"`
	configFile           string
	runtimeImageOverride imageFlag
}

// duration is a time.Duration written as "5m" in the config file.
type duration struct{ time.Duration }

func (d *duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	d.Duration = v
	return nil
}

// imageFlag collects --runtime-image runtime=image flags.
type imageFlag map[string]string

func (f imageFlag) String() string { return fmt.Sprint(map[string]string(f)) }

func (f imageFlag) Set(v string) error {
	rt, img, ok := strings.Cut(v, "=")
	if !ok || rt == "" || img == "" {
		return errors.New("want runtime=image, for example nodejs22=registry/kfn/runtime-nodejs22:1.0")
	}
	f[rt] = img
	return nil
}

func defaultOptions() options {
	d := function.DefaultConfig()
	return options{
		MetricsAddress:     ":8080",
		HealthAddress:      ":8081",
		LeaderElect:        true,
		KubeAPIQPS:         200,
		KubeAPIBurst:       400,
		Workers:            d.Workers,
		RuntimeImages:      d.Plan.Images,
		PublisherAddress:   d.Plan.PublisherAddress,
		ScalerAddress:      d.Resources.ScalerAddress,
		RegistrySecretName: d.Resources.RegistrySecretName,
		GitFetchImage:      d.Resources.GitFetchImage,
		GitFetchCommand:    d.Resources.GitFetchCommand,
		GitPollInterval:    duration{d.GitPollInterval},
		HPACPUUtilization:  d.Resources.HPACPUUtilization,
		Resync:             duration{d.Resync},
		KEDACheckInterval:  duration{d.KEDACheckInterval},
	}
}

// parseOptions reads the config file named by --config (if any) over the
// defaults, then applies the flags that were set on the command line.
func parseOptions(args []string) (options, error) {
	o := defaultOptions()
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	var flagged options
	flagged.runtimeImageOverride = imageFlag{}
	fs.StringVar(&o.configFile, "config", "", "YAML config file (see controller/README.md); flags override it")
	fs.StringVar(&flagged.MetricsAddress, "metrics-bind-address", o.MetricsAddress, "address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&flagged.HealthAddress, "health-probe-bind-address", o.HealthAddress, "address of /healthz and /readyz; 0 disables them")
	fs.BoolVar(&flagged.LeaderElect, "leader-elect", o.LeaderElect, "elect a leader so only one replica reconciles")
	fs.StringVar(&flagged.LeaderElectionNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	fs.Float64Var(&flagged.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "requests per second to the API server")
	fs.IntVar(&flagged.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "burst of requests to the API server")
	fs.IntVar(&flagged.Workers, "workers", o.Workers, "Functions reconciled concurrently")
	fs.Var(flagged.runtimeImageOverride, "runtime-image", "runtime=image; repeat for each runtime to change")
	fs.StringVar(&flagged.DefaultProfile, "default-profile", "", "resource preset of Functions that name none (XS, S, M, L, XL; default L)")
	fs.StringVar(&flagged.PublisherAddress, "publisher-address", o.PublisherAddress, "PUBLISHER_PROXY_ADDRESS given to functions")
	fs.StringVar(&flagged.TraceCollector, "trace-collector-endpoint", "", "TRACE_COLLECTOR_ENDPOINT given to functions; empty: no tracing")
	fs.StringVar(&flagged.ScalerAddress, "scaler-address", o.ScalerAddress, "host:port of kfn's KEDA external scaler, written into ScaledObjects")
	fs.StringVar(&flagged.ScalerAuthentication, "scaler-authentication", "", "KEDA (Cluster)TriggerAuthentication with the scaler's TLS settings, as Kind/name (ClusterTriggerAuthentication/kfn-scaler); empty: plain gRPC")
	fs.StringVar(&flagged.RegistrySecretName, "registry-secret-name", o.RegistrySecretName, "Secret with .npmrc / pip.conf used by dependency installs, when present in the Function's namespace")
	fs.StringVar(&flagged.GitFetchImage, "git-fetch-image", o.GitFetchImage, "image of the init container that fetches Git sources (kfn's server image)")
	var fetchCmd string
	fs.StringVar(&fetchCmd, "git-fetch-command", strings.Join(o.GitFetchCommand, " "), "command in the git fetch image that runs this binary's fetch-source")
	fs.DurationVar(&flagged.GitPollInterval.Duration, "git-poll-interval", o.GitPollInterval.Duration, "how often Git references are re-resolved")
	var hpa int
	fs.IntVar(&hpa, "hpa-cpu-utilization", int(o.HPACPUUtilization), "CPU target of HorizontalPodAutoscalers, percent of requests")
	fs.DurationVar(&flagged.Resync.Duration, "resync", o.Resync.Duration, "how often every Function is reconciled and re-applied without a change")
	fs.DurationVar(&flagged.KEDACheckInterval.Duration, "keda-check-interval", o.KEDACheckInterval.Duration, "how often to check whether KEDA's CRDs are installed")
	fs.StringVar(&flagged.LogLevel, "log-level", "info", "log level: "+logging.Levels+" (with --log-development: debug)")
	fs.BoolVar(&flagged.LogDevelopment, "log-development", false, "text logs (the same keys as key=value) instead of JSON, at level debug unless a log level is set; kept for the zap flag it replaces")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if o.configFile != "" {
		b, err := os.ReadFile(o.configFile)
		if err != nil {
			return options{}, fmt.Errorf("read config: %w", err)
		}
		if err := yaml.UnmarshalStrict(b, &o); err != nil {
			return options{}, fmt.Errorf("config %s: %w", o.configFile, err)
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "metrics-bind-address":
			o.MetricsAddress = flagged.MetricsAddress
		case "health-probe-bind-address":
			o.HealthAddress = flagged.HealthAddress
		case "leader-elect":
			o.LeaderElect = flagged.LeaderElect
		case "leader-election-namespace":
			o.LeaderElectionNS = flagged.LeaderElectionNS
		case "kube-api-qps":
			o.KubeAPIQPS = flagged.KubeAPIQPS
		case "kube-api-burst":
			o.KubeAPIBurst = flagged.KubeAPIBurst
		case "workers":
			o.Workers = flagged.Workers
		case "runtime-image":
			for rt, img := range flagged.runtimeImageOverride {
				o.RuntimeImages[rt] = img
			}
		case "default-profile":
			o.DefaultProfile = flagged.DefaultProfile
		case "publisher-address":
			o.PublisherAddress = flagged.PublisherAddress
		case "trace-collector-endpoint":
			o.TraceCollector = flagged.TraceCollector
		case "scaler-address":
			o.ScalerAddress = flagged.ScalerAddress
		case "scaler-authentication":
			o.ScalerAuthentication = flagged.ScalerAuthentication
		case "registry-secret-name":
			o.RegistrySecretName = flagged.RegistrySecretName
		case "git-fetch-image":
			o.GitFetchImage = flagged.GitFetchImage
		case "git-fetch-command":
			o.GitFetchCommand = strings.Fields(fetchCmd)
		case "git-poll-interval":
			o.GitPollInterval = flagged.GitPollInterval
		case "hpa-cpu-utilization":
			o.HPACPUUtilization = int32(hpa)
		case "resync":
			o.Resync = flagged.Resync
		case "keda-check-interval":
			o.KEDACheckInterval = flagged.KEDACheckInterval
		case "log-level":
			o.LogLevel = flagged.LogLevel
		case "log-development":
			o.LogDevelopment = flagged.LogDevelopment
		}
	})
	if o.LogLevel == "" { // neither the file nor a flag chose one
		o.LogLevel = "info"
		if o.LogDevelopment {
			o.LogLevel = "debug" // what zap's development mode logged
		}
	}
	if _, err := logging.ParseLevel(o.LogLevel); err != nil {
		return options{}, fmt.Errorf("log level: %w", err)
	}
	return o, nil
}

// newLogger returns the controller's logger in kfn's layout (package
// logging), writing to w; controller-runtime's own logs go through it too
// (see run).
func (o options) newLogger(w io.Writer) (*slog.Logger, error) {
	format := logging.JSON
	if o.LogDevelopment {
		format = logging.Text
	}
	log, err := logging.New(w, o.LogLevel, format)
	if err != nil {
		return nil, err
	}
	return logging.Component(log, "controller"), nil
}

// functionConfig is the reconciler's part of the options.
func (o options) functionConfig() function.Config {
	c := function.DefaultConfig()
	c.Plan.Images = o.RuntimeImages
	c.Plan.DefaultProfile = o.DefaultProfile
	c.Plan.PublisherAddress = o.PublisherAddress
	c.Plan.TraceCollectorEndpoint = o.TraceCollector
	c.Resources.ScalerAddress = o.ScalerAddress
	if o.ScalerAuthentication != "" {
		// "Kind/name"; a value without a kind fails Config.Validate.
		kind, name, ok := strings.Cut(o.ScalerAuthentication, "/")
		if !ok {
			kind, name = "", o.ScalerAuthentication
		}
		c.Resources.ScalerAuthentication = &kedav1alpha1.AuthenticationRef{Kind: kind, Name: name}
	}
	c.Resources.RegistrySecretName = o.RegistrySecretName
	c.Resources.GitFetchImage = o.GitFetchImage
	c.Resources.GitFetchCommand = o.GitFetchCommand
	c.GitPollInterval = o.GitPollInterval.Duration
	c.Resources.HPACPUUtilization = o.HPACPUUtilization
	c.Resync = o.Resync.Duration
	c.KEDACheckInterval = o.KEDACheckInterval.Duration
	c.Workers = o.Workers
	return c
}
