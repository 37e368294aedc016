package controller

import (
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// file is the config file's form of Process (controller/README.md,
// "Configuration").
type file struct {
	MetricsAddress          string            `json:"metricsAddress"`
	HealthAddress           string            `json:"healthAddress"`
	ClaimAddress            string            `json:"claimAddress"`
	LeaderElect             bool              `json:"leaderElect"`
	LeaderElectionNamespace string            `json:"leaderElectionNamespace"`
	KubeAPIQPS              float64           `json:"kubeAPIQPS"`
	KubeAPIBurst            int               `json:"kubeAPIBurst"`
	Workers                 int               `json:"workers"`
	WarmPool                bool              `json:"warmPool"`
	WarmPoolSize            int               `json:"warmPoolSize"`
	WarmPoolMaxStandby      int               `json:"warmPoolMaxStandby"`
	WarmPoolIdle            duration          `json:"warmPoolIdle"`
	RuntimeImages           map[string]string `json:"runtimeImages"`
	DefaultProfile          string            `json:"defaultProfile"`
	PublisherAddress        string            `json:"publisherAddress"`
	TraceCollector          string            `json:"traceCollectorEndpoint"`
	DependencyCache         string            `json:"dependencyCacheAddress"`
	ScalerAddress           string            `json:"scalerAddress"`
	ScalerAuthentication    string            `json:"scalerAuthentication"`
	RegistrySecretName      string            `json:"registrySecretName"`
	GitFetchImage           string            `json:"gitFetchImage"`
	GitFetchCommand         []string          `json:"gitFetchCommand"`
	GitPollInterval         duration          `json:"gitPollInterval"`
	HPACPUUtilization       int32             `json:"hpaCPUUtilization"`
	Resync                  duration          `json:"resync"`
	KEDACheckInterval       duration          `json:"kedaCheckInterval"`
	AllowedImageRegistries  []string          `json:"allowedImageRegistries"`
	FunctionDirSizeLimit    resource.Quantity `json:"functionDirSizeLimit"`
	DependenciesSizeLimit   resource.Quantity `json:"dependenciesSizeLimit"`
	TmpSizeLimit            resource.Quantity `json:"tmpSizeLimit"`
	GitKnownHosts           string            `json:"gitKnownHosts"`
	LogLevel                string            `json:"logLevel"`
	LogDevelopment          bool              `json:"logDevelopment"`
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

// readFile reads c.File over c: what the file sets replaces c's value, the
// runtime images it names replace those runtimes' images only.
func (c *Process) readFile() error {
	b, err := os.ReadFile(c.File)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	f := fileOf(c)
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return fmt.Errorf("config %s: %w", c.File, err)
	}
	f.into(c)
	return nil
}

// fileOf is c in the file's form.
func fileOf(c *Process) file {
	fn, r := c.Function, c.Function.Resources
	return file{
		MetricsAddress: c.MetricsAddress, HealthAddress: c.HealthAddress, ClaimAddress: c.ClaimAddress,
		LeaderElect: c.LeaderElect, LeaderElectionNamespace: c.LeaderElectionNamespace,
		KubeAPIQPS: c.KubeAPIQPS, KubeAPIBurst: c.KubeAPIBurst,
		Workers: fn.Workers, WarmPool: fn.WarmPool, WarmPoolSize: fn.WarmPoolSize,
		WarmPoolMaxStandby: fn.WarmPoolMaxStandby, WarmPoolIdle: duration{fn.WarmPoolIdle},
		RuntimeImages: fn.Plan.Images, DefaultProfile: fn.Plan.DefaultProfile,
		PublisherAddress: fn.Plan.PublisherAddress, TraceCollector: fn.Plan.TraceCollectorEndpoint,
		DependencyCache: fn.Plan.DependencyCacheAddress,
		ScalerAddress:   r.ScalerAddress, ScalerAuthentication: formatAuthentication(r.ScalerAuthentication),
		RegistrySecretName: r.RegistrySecretName,
		GitFetchImage:      r.GitFetchImage, GitFetchCommand: r.GitFetchCommand,
		GitPollInterval:   duration{fn.GitPollInterval},
		HPACPUUtilization: r.HPACPUUtilization,
		Resync:            duration{fn.Resync}, KEDACheckInterval: duration{fn.KEDACheckInterval},
		AllowedImageRegistries: fn.Plan.ImageRegistries,
		FunctionDirSizeLimit:   r.Volumes.FunctionDir, DependenciesSizeLimit: r.Volumes.Dependencies, TmpSizeLimit: r.Volumes.Tmp,
		GitKnownHosts: r.GitKnownHosts,
		LogLevel:      c.LogLevel, LogDevelopment: c.LogDevelopment,
	}
}

// into sets c from f.
func (f file) into(c *Process) {
	fn, r := &c.Function, &c.Function.Resources
	c.MetricsAddress, c.HealthAddress, c.ClaimAddress = f.MetricsAddress, f.HealthAddress, f.ClaimAddress
	c.LeaderElect, c.LeaderElectionNamespace = f.LeaderElect, f.LeaderElectionNamespace
	c.KubeAPIQPS, c.KubeAPIBurst = f.KubeAPIQPS, f.KubeAPIBurst
	fn.Workers, fn.WarmPool, fn.WarmPoolSize = f.Workers, f.WarmPool, f.WarmPoolSize
	fn.WarmPoolMaxStandby, fn.WarmPoolIdle = f.WarmPoolMaxStandby, f.WarmPoolIdle.Duration
	fn.Plan.Images, fn.Plan.DefaultProfile = f.RuntimeImages, f.DefaultProfile
	fn.Plan.PublisherAddress, fn.Plan.TraceCollectorEndpoint = f.PublisherAddress, f.TraceCollector
	fn.Plan.DependencyCacheAddress = f.DependencyCache
	r.ScalerAddress, r.ScalerAuthentication = f.ScalerAddress, parseAuthentication(f.ScalerAuthentication)
	r.RegistrySecretName = f.RegistrySecretName
	r.GitFetchImage, r.GitFetchCommand = f.GitFetchImage, f.GitFetchCommand
	fn.GitPollInterval = f.GitPollInterval.Duration
	r.HPACPUUtilization = f.HPACPUUtilization
	fn.Resync, fn.KEDACheckInterval = f.Resync.Duration, f.KEDACheckInterval.Duration
	fn.Plan.ImageRegistries = f.AllowedImageRegistries
	r.Volumes.FunctionDir, r.Volumes.Dependencies, r.Volumes.Tmp = f.FunctionDirSizeLimit, f.DependenciesSizeLimit, f.TmpSizeLimit
	r.GitKnownHosts = f.GitKnownHosts
	c.LogLevel, c.LogDevelopment = f.LogLevel, f.LogDevelopment
}
