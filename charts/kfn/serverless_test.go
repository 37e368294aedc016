package chart_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kfn-dev/kfn/controller"
	"github.com/kfn-dev/kfn/internal/logging"
)

// kymaServerlessSpec is the spec of a Kyma Serverless CR as Kyma's
// "Configuring Serverless" documentation writes its settings.
const kymaServerlessSpec = `
tracing:
  endpoint: http://jaeger-collector.observability.svc.cluster.local:4318/v1/traces
eventing:
  endpoint: http://eventing-publisher-proxy.kyma-system.svc.cluster.local/publish
functionRequeueDuration: 5m
defaultRuntimePodPreset: "M"
logLevel: "dpanic"
logFormat: "console"
`

// controllerConfig renders the chart with vals and loads the controller's
// config file from its ConfigMap as the controller does.
func controllerConfig(t *testing.T, vals map[string]any) controller.Process {
	t.Helper()
	r := typed(t, render(t, vals))
	file := filepath.Join(t.TempDir(), "controller.yaml")
	require.NoError(t, os.WriteFile(file, []byte(r.configMaps["kfn-controller"].Data["controller.yaml"]), 0o600))
	cfg := controller.DefaultProcess()
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--config=" + file}))
	require.NoError(t, cfg.Load(fs))
	require.NoError(t, cfg.Validate())
	return cfg
}

// TestKymaServerlessCRAsValues installs the chart with a Kyma Serverless
// CR's spec under serverless, as it is, and checks that the controller
// reads each setting and the event bridge traces to the same collector.
func TestKymaServerlessCRAsValues(t *testing.T) {
	var spec map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(kymaServerlessSpec), &spec))
	vals := map[string]any{
		"serverless": spec,
		// Kyma's settings win over kfn's own.
		"functions":  map[string]any{"defaultProfile": "XL", "traceCollectorEndpoint": "http://other:4318/v1/traces", "gitPollInterval": "1m"},
		"controller": map[string]any{"logLevel": "info", "logDevelopment": false},
	}
	cfg := controllerConfig(t, vals)
	p := cfg.Function.Plan
	assert.Equal(t, "http://jaeger-collector.observability.svc.cluster.local:4318/v1/traces", p.TraceCollectorEndpoint)
	assert.Equal(t, "http://eventing-publisher-proxy.kyma-system.svc.cluster.local/publish", p.PublisherAddress)
	assert.Equal(t, "M", p.DefaultProfile)
	assert.Equal(t, 5*time.Minute, cfg.Function.GitPollInterval)
	assert.Equal(t, "error", cfg.LogLevel, "zap's dpanic logs as error")
	assert.Equal(t, logging.Text, cfg.LogFormat(), "console")
	assert.Contains(t, container(t, typed(t, render(t, vals)).deployments["kfn-eventbridge"]).Args,
		"-trace-endpoint=http://jaeger-collector.observability.svc.cluster.local:4318/v1/traces")

	asJSON := controllerConfig(t, map[string]any{"serverless": map[string]any{"logFormat": "json", "logLevel": "debug"},
		"controller": map[string]any{"logDevelopment": true}})
	assert.Equal(t, logging.JSON, asJSON.LogFormat())
	assert.Equal(t, "debug", asJSON.LogLevel)

	def := controllerConfig(t, nil)
	assert.Equal(t, "L", def.Function.Plan.DefaultProfile, "without Kyma's settings, kfn's values decide")
	assert.Equal(t, "http://kfn-publisher.kfn-system.svc.cluster.local/publish", def.Function.Plan.PublisherAddress)
	assert.Empty(t, def.Function.Plan.TraceCollectorEndpoint)
	assert.Equal(t, "info", def.LogLevel)
	assert.Equal(t, logging.JSON, def.LogFormat())

	for name, bad := range map[string]map[string]any{
		"a setting kfn does not take": {"healthzLivenessTimeout": "10s"},
		"a log format Kyma has not":   {"logFormat": "text"},
		"a preset that is none":       {"defaultRuntimePodPreset": "XXL"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderManifest(t, map[string]any{"serverless": bad})
			require.Error(t, err, "the chart refuses it")
		})
	}
}
