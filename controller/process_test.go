package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/internal/logging"
)

// parse does what cmd/controller does with its arguments.
func parse(args ...string) (Process, error) {
	cfg := DefaultProcess()
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	return cfg, cfg.Load(fs)
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte(content), 0o644))
	return file
}

func TestDefaults(t *testing.T) {
	cfg, err := parse()
	require.NoError(t, err)
	want := DefaultProcess()
	want.LogLevel = "info"
	assert.Equal(t, want, cfg)
	require.NoError(t, cfg.Validate())
	assert.Equal(t, function.DefaultConfig(), cfg.Function, "the reconciler's defaults")
	_, err = parse("extra")
	require.ErrorContains(t, err, "unexpected arguments")
	_, err = parse("-h")
	require.ErrorIs(t, err, flag.ErrHelp)
}

func TestOptionsFileThenFlags(t *testing.T) {
	file := writeFile(t, "workers: 3\ngitPollInterval: 2m\nscalerAddress: file:9090\nruntimeImages:\n  nodejs22: file/node:1\n")
	cfg, err := parse("--config", file, "--scaler-address", "flag:9090", "--runtime-image", "python312=flag/py:2", "--leader-elect=false")
	require.NoError(t, err)
	assert.Equal(t, 3, cfg.Function.Workers)
	assert.Equal(t, 2*time.Minute, cfg.Function.GitPollInterval)
	assert.Equal(t, "flag:9090", cfg.Function.Resources.ScalerAddress, "flags win over the file")
	assert.Equal(t, "file/node:1", cfg.Function.Plan.Images["nodejs22"])
	assert.Equal(t, "flag/py:2", cfg.Function.Plan.Images["python312"])
	assert.Equal(t, "kfn/runtime-nodejs24:latest", cfg.Function.Plan.Images["nodejs24"], "runtimes nobody names keep the default")
	assert.False(t, cfg.LeaderElect)
	require.NoError(t, cfg.Validate())

	_, err = parse("--config", writeFile(t, "wrokers: 3\n"))
	require.Error(t, err, "unknown keys are refused")
	_, err = parse("--config", writeFile(t, "resync: soon\n"))
	require.ErrorContains(t, err, `duration "soon"`)
	_, err = parse("--config", filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorContains(t, err, "read config")
}

// TestEveryFlagWinsOverTheFile sets every key in the file and every flag on
// the command line, the flags before --config: each flag wins.
func TestEveryFlagWinsOverTheFile(t *testing.T) {
	file := writeFile(t, `metricsAddress: ":1"
healthAddress: ":2"
claimAddress: ":3"
leaderElect: true
leaderElectionNamespace: file
kubeAPIQPS: 1
kubeAPIBurst: 2
workers: 3
runtimeImages: {nodejs22: file/node}
defaultProfile: XS
publisherAddress: http://file
traceCollectorEndpoint: http://file-otel
dependencyCacheAddress: http://file-cache
scalerAddress: file:1
scalerAuthentication: TriggerAuthentication/file
registrySecretName: file
gitFetchImage: file/fetch
gitFetchCommand: [file, fetch]
gitPollInterval: 1m
hpaCPUUtilization: 10
resync: 1m
kedaCheckInterval: 1m
allowedImageRegistries: [file.example]
functionDirSizeLimit: 1Mi
dependenciesSizeLimit: 2Mi
tmpSizeLimit: 3Mi
gitKnownHosts: |
  file.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl
logLevel: error
logDevelopment: false
`)
	cfg, err := parse("--metrics-bind-address=:11", "--health-probe-bind-address=:12", "--claim-bind-address=:13", "--leader-elect=false",
		"--leader-election-namespace=flag", "--kube-api-qps=1.5", "--kube-api-burst=12", "--workers=13",
		"--runtime-image=nodejs22=flag/node", "--runtime-image=python312=flag/py", "--default-profile=S",
		"--publisher-address=http://flag", "--trace-collector-endpoint=http://flag-otel", "--scaler-address=flag:1",
		"--dependency-cache-address=http://flag-cache",
		"--scaler-authentication=ClusterTriggerAuthentication/flag", "--registry-secret-name=flag",
		"--git-fetch-image=flag/fetch", "--git-fetch-command=/bin/flag fetch", "--git-poll-interval=2m",
		"--hpa-cpu-utilization=20", "--resync=2m", "--keda-check-interval=2m", "--log-level=warn",
		"--allowed-image-registries=flag.example, ghcr.io/flag", "--function-dir-size-limit=11Mi",
		"--dependencies-size-limit=12Mi", "--tmp-size-limit=13Mi",
		"--log-development", "--config", file)
	require.NoError(t, err)
	want := DefaultProcess()
	want.File = file
	want.MetricsAddress, want.HealthAddress, want.ClaimAddress = ":11", ":12", ":13"
	want.LeaderElect, want.LeaderElectionNamespace = false, "flag"
	want.KubeAPIQPS, want.KubeAPIBurst = 1.5, 12
	fn, r := &want.Function, &want.Function.Resources
	fn.Workers = 13
	fn.Plan.Images["nodejs22"], fn.Plan.Images["python312"] = "flag/node", "flag/py"
	fn.Plan.DefaultProfile, fn.Plan.PublisherAddress, fn.Plan.TraceCollectorEndpoint = "S", "http://flag", "http://flag-otel"
	fn.Plan.DependencyCacheAddress = "http://flag-cache"
	r.ScalerAddress = "flag:1"
	r.ScalerAuthentication = &kedav1alpha1.AuthenticationRef{Kind: "ClusterTriggerAuthentication", Name: "flag"}
	r.RegistrySecretName, r.GitFetchImage, r.GitFetchCommand = "flag", "flag/fetch", []string{"/bin/flag", "fetch"}
	fn.GitPollInterval, r.HPACPUUtilization = 2*time.Minute, 20
	fn.Resync, fn.KEDACheckInterval = 2*time.Minute, 2*time.Minute
	want.LogLevel, want.LogDevelopment = "warn", true
	fn.Plan.ImageRegistries = []string{"flag.example", "ghcr.io/flag"}
	r.Volumes.FunctionDir, r.Volumes.Dependencies, r.Volumes.Tmp = quantity("11Mi"), quantity("12Mi"), quantity("13Mi")
	r.GitKnownHosts = "file.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n" // the file's: no flag
	assert.Equal(t, want, cfg)

	_, err = parse("--hpa-cpu-utilization=many")
	require.Error(t, err)
	_, err = parse("--runtime-image=nodejs22")
	require.ErrorContains(t, err, "want runtime=image")
	_, err = parse("--tmp-size-limit=lots")
	require.ErrorContains(t, err, "want a quantity")

	// What only the file sets.
	cfg, err = parse("--config", writeFile(t, "allowedImageRegistries: [file.example]\ntmpSizeLimit: 3Mi\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"file.example"}, cfg.Function.Plan.ImageRegistries)
	assert.Equal(t, "3Mi", cfg.Function.Resources.Volumes.Tmp.String())
	assert.Equal(t, "256Mi", cfg.Function.Resources.Volumes.FunctionDir.String(), "what the file leaves out keeps its default")
	require.NoError(t, cfg.Validate())
	cfg, err = parse("--config", writeFile(t, "tmpSizeLimit: 1Ki\n"))
	require.NoError(t, err)
	require.ErrorIs(t, cfg.Validate(), function.ErrInvalidConfig, "a limit under 1Mi is refused")
}

func quantity(s string) resource.Quantity {
	q := resource.MustParse(s)
	_ = q.String()
	return q
}

func TestScalerAuthentication(t *testing.T) {
	cfg, err := parse()
	require.NoError(t, err)
	assert.Nil(t, cfg.Function.Resources.ScalerAuthentication, "plain gRPC by default")

	cfg, err = parse("--config", writeFile(t, "scalerAuthentication: ClusterTriggerAuthentication/kfn-scaler\n"))
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	assert.Equal(t, "ClusterTriggerAuthentication", cfg.Function.Resources.ScalerAuthentication.Kind)
	assert.Equal(t, "kfn-scaler", cfg.Function.Resources.ScalerAuthentication.Name)

	for _, bad := range []string{"kfn-scaler", "Secret/kfn-scaler", "TriggerAuthentication/", "TriggerAuthentication/Bad_Name"} {
		cfg, err := parse("--scaler-authentication", bad)
		require.NoError(t, err)
		require.ErrorContains(t, cfg.Validate(), "scaler authentication", bad)
		require.ErrorIs(t, cfg.Validate(), function.ErrInvalidConfig, bad)
	}
}

// TestLoggerLayout checks the controller's logs as Run sets them up: kfn's
// layout (package logging) with component "controller", controller-runtime's
// logr lines bridged into it, the level from --log-level or the config
// file, and --log-development as the text form at debug.
func TestLoggerLayout(t *testing.T) {
	file := writeFile(t, "logLevel: warn\n")
	tests := map[string]struct {
		args      []string
		wantLines int // of the three lines logged: info, V(1), error
		text      bool
	}{
		"default info":       {args: nil, wantLines: 2},
		"debug":              {args: []string{"--log-level=debug"}, wantLines: 3},
		"file warn":          {args: []string{"--config", file}, wantLines: 1},
		"flag over file":     {args: []string{"--config", file, "--log-level=info"}, wantLines: 2},
		"development":        {args: []string{"--log-development"}, wantLines: 3, text: true},
		"development, error": {args: []string{"--log-development", "--log-level=error"}, wantLines: 1, text: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := parse(tt.args...)
			require.NoError(t, err)
			var buf bytes.Buffer
			root, err := logging.New(&buf, cfg.LogLevel, cfg.LogFormat())
			require.NoError(t, err)
			log := controllerLogger(root).WithName("setup")
			log.Info("starting", "workers", 8)
			log.V(1).Info("detail")
			log.Error(errors.New("no cache"), "failed")
			out := strings.Split(strings.TrimSpace(buf.String()), "\n")
			require.Len(t, out, tt.wantLines, buf.String())
			last := out[len(out)-1]
			if tt.text {
				assert.Contains(t, last, `level=ERROR msg=failed component=controller logger=setup error="no cache"`)
				return
			}
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(last), &m), last)
			for _, k := range []string{"time", "level", "msg", "component", "logger", "error"} {
				assert.Contains(t, m, k)
			}
			assert.Equal(t, "controller", m["component"])
			assert.Equal(t, "ERROR", m["level"])
			assert.Equal(t, "no cache", m["error"])
		})
	}
	cfg, err := parse("--log-level=verbose")
	require.NoError(t, err)
	require.ErrorIs(t, cfg.Validate(), logging.ErrInvalidLevel)
	cfg, err = parse("--config", writeFile(t, "logLevel: loud\n"))
	require.NoError(t, err)
	require.ErrorIs(t, cfg.Validate(), logging.ErrInvalidLevel)
}
