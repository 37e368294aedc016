package chart_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/scaler/activity"
	scalerserver "github.com/kfn-dev/kfn/scaler/server"
	"github.com/kfn-dev/kfn/test/logtest"
	"github.com/kfn-dev/kfn/test/testenv"
	"github.com/kfn-dev/kfn/test/testport"
)

// monitoring turns on every monitoring object of the chart.
var monitoring = map[string]any{
	"serviceMonitor":   map[string]any{"enabled": true},
	"podMonitor":       map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
	"prometheusRule":   map[string]any{"enabled": true, "alertLabels": map[string]any{"team": "platform"}, "backlogBudgetRatio": 0.9},
	"grafanaDashboard": map[string]any{"enabled": true, "annotations": map[string]any{"grafana_folder": "kfn"}},
	"nats":             map[string]any{"exporter": map[string]any{"enabled": true}},
	"networkPolicy":    map[string]any{"enabled": true},
}

func TestMonitoringIsOffByDefault(t *testing.T) {
	r := typed(t, render(t, nil))
	for _, kind := range []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"} {
		assert.Zero(t, kinds(r.objs)[kind], kind)
	}
	assert.NotContains(t, r.configMaps, "kfn-dashboard")
	assert.Len(t, r.statefulSets["kfn-nats"].Spec.Template.Spec.Containers, 1, "no NATS exporter")
	for _, a := range container(t, r.deployments["kfn-eventbridge"]).Args {
		assert.NotContains(t, a, "-trace-endpoint", "no tracing without an endpoint")
	}
}

// strictly decodes a rendered object into a typed one, refusing fields the
// type does not have: the Prometheus Operator's CRDs are not in any Go
// module here, its Go types (the CRDs are generated from them) are.
func strictly(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	b, err := json.Marshal(o.Object)
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(b, into), "%s %s", o.GetKind(), o.GetName())
}

func TestMonitoringObjects(t *testing.T) {
	r := typed(t, render(t, monitoring))
	assert.Equal(t, 4, kinds(r.objs)["ServiceMonitor"], "controller, event bridge, scaler, NATS")

	pm := &monitoringv1.PodMonitor{}
	strictly(t, find(r.objs, "PodMonitor", "kfn-functions"), pm)
	assert.Equal(t, "prom", pm.Labels["release"])
	assert.True(t, pm.Spec.NamespaceSelector.Any, "Functions live in every namespace")
	assert.Equal(t, map[string]string{v1alpha2.LabelManagedBy: v1alpha2.LabelManagedByValue, v1alpha2.LabelResource: v1alpha2.LabelResourceDeployment}, pm.Spec.Selector.MatchLabels)
	require.Len(t, pm.Spec.PodMetricsEndpoints, 1)
	ep := pm.Spec.PodMetricsEndpoints[0]
	assert.Equal(t, "http", *ep.Port, "the runtime container's port name (controller/resources/deployment.go)")
	assert.Equal(t, "/metrics", ep.Path)
	require.Len(t, ep.RelabelConfigs, 1)
	assert.Equal(t, "function", ep.RelabelConfigs[0].TargetLabel)
	assert.Equal(t, monitoringv1.LabelName("__meta_kubernetes_pod_label_"+strings.NewReplacer(".", "_", "/", "_", "-", "_").Replace(v1alpha2.LabelFunctionName)), ep.RelabelConfigs[0].SourceLabels[0])

	for _, o := range r.objs {
		if o.GetKind() == "ServiceMonitor" {
			strictly(t, o, &monitoringv1.ServiceMonitor{})
		}
	}
	rule := &monitoringv1.PrometheusRule{}
	strictly(t, find(r.objs, "PrometheusRule", "kfn"), rule)

	// The NATS exporter: a sidecar reading the monitoring port, its port
	// on the headless Service, open to scrapers.
	nats := r.statefulSets["kfn-nats"].Spec.Template.Spec
	require.Len(t, nats.Containers, 2)
	exp := nats.Containers[1]
	assert.Equal(t, "natsio/prometheus-nats-exporter:0.20.2", exp.Image)
	assert.Contains(t, exp.Args, "http://127.0.0.1:8222")
	assert.Contains(t, exp.Args, "-jsz=all")
	assert.Equal(t, int32(7777), exp.Ports[0].ContainerPort)
	assert.True(t, *exp.SecurityContext.ReadOnlyRootFilesystem)
	assert.True(t, slices.ContainsFunc(r.services["kfn-nats-headless"].Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "metrics" }))
	np := find(r.objs, "NetworkPolicy", "kfn-nats")
	require.NotNil(t, np)
	b, _ := json.Marshal(np.Object)
	assert.Contains(t, string(b), `{"port":"metrics"}`)

	cm := r.configMaps["kfn-dashboard"]
	require.NotNil(t, cm)
	assert.Equal(t, "1", cm.Labels["grafana_dashboard"])
	assert.Equal(t, "kfn", cm.Annotations["grafana_folder"])
	assert.JSONEq(t, readFile(t, "dashboards/kfn.json"), cm.Data["kfn.json"], "the dashboard file, unchanged")

	r = typed(t, render(t, map[string]any{"grafanaDashboard": map[string]any{"enabled": true, "namespace": "monitoring", "label": "dashboards", "labelValue": "kfn"}}))
	cm = r.configMaps["kfn-dashboard"]
	assert.Equal(t, "monitoring", cm.Namespace)
	assert.Equal(t, "kfn", cm.Labels["dashboards"])
}

func TestTracingValues(t *testing.T) {
	tests := map[string]struct {
		values   map[string]any
		wantArg  string
		wantEnv  map[string]string
		noTraces bool
	}{
		"functions' collector": {
			values:  map[string]any{"functions": map[string]any{"traceCollectorEndpoint": "http://otel.monitoring:4318/v1/traces"}},
			wantArg: "-trace-endpoint=http://otel.monitoring:4318/v1/traces",
		},
		"own endpoint and sampler": {
			values: map[string]any{
				"functions":   map[string]any{"traceCollectorEndpoint": "http://otel.monitoring:4318/v1/traces"},
				"eventbridge": map[string]any{"tracing": map[string]any{"endpoint": "http://jaeger:4318/v1/traces", "sampler": "parentbased_traceidratio", "samplerArg": "0.1"}},
			},
			wantArg: "-trace-endpoint=http://jaeger:4318/v1/traces",
			wantEnv: map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := container(t, typed(t, render(t, tt.values)).deployments["kfn-eventbridge"])
			assert.Contains(t, c.Args, tt.wantArg)
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			for k, v := range tt.wantEnv {
				assert.Equal(t, v, env[k], k)
			}
		})
	}
}

func TestMonitoringValuesRefused(t *testing.T) {
	tests := map[string]struct {
		values map[string]any
		want   string
	}{
		"budget ratio over 1":  {map[string]any{"prometheusRule": map[string]any{"backlogBudgetRatio": 2}}, "/prometheusRule/backlogBudgetRatio"},
		"error ratio zero":     {map[string]any{"prometheusRule": map[string]any{"publishErrorRatio": 0}}, "/prometheusRule/publishErrorRatio"},
		"unknown sampler":      {map[string]any{"eventbridge": map[string]any{"tracing": map[string]any{"sampler": "sometimes"}}}, "/eventbridge/tracing/sampler"},
		"endpoint not a URL":   {map[string]any{"eventbridge": map[string]any{"tracing": map[string]any{"endpoint": "collector:4318"}}}, "/eventbridge/tracing/endpoint"},
		"exporter pull policy": {map[string]any{"nats": map[string]any{"exporter": map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}}}, "/nats/exporter/image/pullPolicy"},
		"pod monitor typo":     {map[string]any{"podMonitor": map[string]any{"enable": true}}, "enable"},
		"controller log level": {map[string]any{"controller": map[string]any{"logLevel": "trace"}}, "/controller/logLevel"},
		"dashboard namespace":  {map[string]any{"grafanaDashboard": map[string]any{"namespace": "Monitoring"}}, "/grafanaDashboard/namespace"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := renderManifest(t, tt.values)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(b)
}

// promql parses PromQL as Prometheus does.
var promql = parser.NewParser(parser.Options{})

// rules returns the rendered PrometheusRule's groups, parsed and validated
// by Prometheus's own rule file parser (expressions and templates
// included); a problem fails t.
func rules(t *testing.T, values map[string]any) *rulefmt.RuleGroups {
	t.Helper()
	o := find(render(t, values), "PrometheusRule", "kfn")
	require.NotNil(t, o)
	spec, _, _ := unstructured.NestedMap(o.Object, "spec")
	data, err := yaml.Marshal(spec)
	require.NoError(t, err)
	groups, errs := rulefmt.Parse(data, false, model.LegacyValidation, promql, slog.New(slog.DiscardHandler))
	require.Empty(t, errs, "rulefmt:\n%s", data)
	return groups
}

func TestPrometheusRules(t *testing.T) {
	groups := rules(t, monitoring)
	alerts := map[string]rulefmt.Rule{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = r
		}
	}
	var names []string
	for n := range alerts {
		names = append(names, n)
	}
	sort.Strings(names)
	assert.Equal(t, []string{"KfnBacklogNearBudget", "KfnBacklogOverBudget", "KfnDeadLetterStreamFull", "KfnDeadLettersRising", "KfnDeliveriesFailing", "KfnEventStorageFull",
		"KfnEventStreamClosed", "KfnEventStreamOpenedAnyway", "KfnEventsLost", "KfnFunctionReconcileErrors", "KfnNoReadyDispatcher", "KfnPublishFailing", "KfnScalerErrors", "KfnStreamLost"}, names)
	for name, r := range alerts {
		assert.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], name)
		assert.Equal(t, "platform", r.Labels["team"], "alertLabels on %s", name)
		assert.NotEmpty(t, r.Annotations["summary"], name)
		assert.NotEmpty(t, r.Annotations["description"], name)
	}
	assert.Contains(t, alerts["KfnBacklogNearBudget"].Expr, "> 0.9 * max by", "the ratio from the values")
	assert.Contains(t, alerts["KfnPublishFailing"].Expr, "> 0.01 * sum", "the default error ratio")
	assert.Contains(t, alerts["KfnPublishFailing"].Annotations["description"], "More than 1% of publish requests")
	assert.Contains(t, alerts["KfnDeadLettersRising"].Annotations["summary"], "{{ $labels.namespace }}/{{ $labels.subscription }}", "Prometheus's templates survive Helm's")
}

// dashboardExprs returns every PromQL expression of the dashboard: the
// panels' targets and the variables' label_values selectors, with Grafana's
// variables replaced by values PromQL parses.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	var d struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Title      string `json:"title"`
			Type       string `json:"type"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal([]byte(readFile(t, "dashboards/kfn.json")), &d))
	require.NotEmpty(t, d.UID)
	vars := strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*", "$subscription", ".*", "$function", ".*")
	out := map[string]string{}
	ids := map[int]bool{}
	titles := map[string]bool{}
	for _, p := range d.Panels {
		assert.False(t, ids[p.ID], "panel id %d is unique", p.ID)
		ids[p.ID] = true
		assert.False(t, titles[p.Title], "panel title %q is unique", p.Title)
		titles[p.Title] = true
		if p.Type == "row" {
			continue
		}
		assert.Equal(t, "${datasource}", p.Datasource.UID, "panel %q uses the datasource variable", p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			out[p.Title+"/"+tg.RefID] = vars.Replace(tg.Expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+), *\w+\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		m := labelValues.FindStringSubmatch(fmt.Sprint(q["query"]))
		require.NotNil(t, m, "variable %s is a label_values query", v.Name)
		out["variable "+v.Name] = vars.Replace(m[1])
	}
	return out
}

func TestDashboardQueriesParse(t *testing.T) {
	exprs := dashboardExprs(t)
	assert.Greater(t, len(exprs), 25)
	for where, e := range exprs {
		_, err := promql.ParseExpr(e)
		assert.NoError(t, err, "%s: %s", where, e)
	}
}

// metricNames returns the metric names an expression selects.
func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	e, err := promql.ParseExpr(expr)
	require.NoError(t, err, expr)
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					name = m.Value
				}
			}
			out = append(out, name)
		}
		return nil
	})
	return out
}

// TestQueriedMetricsAreRegistered: every metric the alert rules and the
// dashboard query is one that kfn's components register. The names come
// from the components themselves: the event bridge's and the scaler's
// registries as their constructors fill them (every collector described,
// so a metric counts before it has a series), the Function controller's
// controller-runtime registry while it reconciles a Function on the API
// server, and the /metrics pages of the real Node.js and Python hosts
// after a call.
func TestQueriedMetricsAreRegistered(t *testing.T) {
	registered := map[string]string{} // name -> component
	add := func(component string, names []string) {
		for _, n := range names {
			registered[n] = component
		}
	}
	add("event bridge", eventBridgeMetrics(t))
	add("scaler", scalerMetrics(t))
	add("controller", controllerMetrics(t))
	add("functions", functionMetrics(t))

	queried := map[string][]string{} // name -> where
	for _, g := range rules(t, monitoring).Groups {
		for _, r := range g.Rules {
			for _, n := range metricNames(t, r.Expr) {
				queried[n] = append(queried[n], "alert "+r.Alert)
			}
		}
	}
	for where, e := range dashboardExprs(t) {
		for _, n := range metricNames(t, e) {
			queried[n] = append(queried[n], "dashboard "+where)
		}
	}
	require.NotEmpty(t, queried)
	for name, where := range queried {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if _, ok := registered[name]; !ok && strings.HasSuffix(name, suffix) {
				base = strings.TrimSuffix(name, suffix) // a histogram's series
			}
		}
		_, ok := registered[base]
		assert.True(t, ok, "%s (queried by %s) is registered by no component", name, strings.Join(where, ", "))
	}
}

// nameRecorder is a Registerer that notes the name of every metric each
// collector registered through it describes.
type nameRecorder struct {
	prometheus.Registerer
	names []string
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *nameRecorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		// Desc has no accessor for its name; its String is stable.
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names = append(r.names, m[1])
		}
	}
	return r.Registerer.Register(c)
}

func (r *nameRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// embeddedNATS starts a NATS server with JetStream for the test.
func embeddedNATS(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	ns.Start()
	t.Cleanup(ns.Shutdown)
	require.True(t, ns.ReadyForConnections(10*time.Second))
	nc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// eventBridgeMetrics registers the event bridge's metrics as
// eventbridge.Run does (every part through eventbridge.New on a Kubernetes
// manager of the test API server, which is not started; Go and process)
// and returns their names.
func eventBridgeMetrics(t *testing.T) []string {
	t.Helper()
	nc, _ := embeddedNATS(t)
	reg := &nameRecorder{Registerer: prometheus.NewRegistry()}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, eventingv1alpha2.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(sharedCluster(t).Config, ctrl.Options{Scheme: scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}})
	require.NoError(t, err)
	cfg := eventbridge.DefaultConfig()
	cfg.Components = append(cfg.Components, eventbridge.ComponentGateway)
	_, err = eventbridge.New(cfg, nc, eventbridge.NewCluster(mgr), eventbridge.WithMetrics(reg))
	require.NoError(t, err)
	return reg.names
}

// scalerMetrics registers the scaler's metrics as cmd/scaler does.
func scalerMetrics(t *testing.T) []string {
	t.Helper()
	nc, js := embeddedNATS(t)
	reg := &nameRecorder{Registerer: prometheus.NewRegistry()}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	core, err := activity.New(activity.NewJetStreamReader(js, stream.DefaultConfig()), activity.NewNATSListener(nc), activity.WithMetrics(reg))
	require.NoError(t, err)
	_, err = scalerserver.New(core, scalerserver.WithMetrics(reg))
	require.NoError(t, err)
	return reg.names
}

// controllerMetrics runs the Function controller in this process against
// the test API server until it has reconciled a Function, and returns the
// names in controller-runtime's registry (which cmd/controller serves):
// its metrics get their series once a controller runs.
func controllerMetrics(t *testing.T) []string {
	t.Helper()
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	installCRDs(t, ctx, c, render(t, nil))
	ctrl.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	require.NoError(t, function.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{Scheme: scheme, Cache: function.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	r, err := function.NewReconciler(mgr, function.DefaultConfig())
	require.NoError(t, err)
	require.NoError(t, r.SetupWithManager(ctx, mgr))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	a, err := client.New(c.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "metrics-"}}
	require.NoError(t, a.Create(ctx, ns))
	fn := &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns.Name},
		Spec: v1alpha2.FunctionSpec{Runtime: "nodejs22", Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: "module.exports = { main: () => 'ok' }"}}}}
	require.NoError(t, a.Create(ctx, fn))
	var names []string
	require.Eventually(t, func() bool {
		mfs, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			return false
		}
		names = names[:0]
		for _, mf := range mfs {
			names = append(names, mf.GetName())
		}
		return slices.Contains(names, "controller_runtime_reconcile_time_seconds")
	}, 30*time.Second, 50*time.Millisecond, "the controller reconciled the Function")
	return names
}

// functionMetrics runs the real host of each language with a handler,
// calls it once, and returns the names on its /metrics page.
func functionMetrics(t *testing.T) []string {
	t.Helper()
	hostDir, err := runtimes.WriteHost(t.TempDir())
	require.NoError(t, err)
	seen := map[runtimes.Language]bool{}
	var names []string
	for _, rt := range runtimes.All() {
		if rt.Deprecated || rt.API != runtimes.EventAPI || seen[rt.Language] {
			continue
		}
		seen[rt.Language] = true
		t.Run("host "+rt.Name, func(t *testing.T) {
			names = append(names, hostMetrics(t, rt, hostDir)...)
		})
	}
	return names
}

var handlers = map[runtimes.Language]string{
	runtimes.NodeJS: "module.exports = { main: () => 'ok' };\n",
	runtimes.Python: "def main(event, context):\n    return 'ok'\n",
}

func hostMetrics(t *testing.T, rt runtimes.Runtime, hostDir string) []string {
	interp := testenv.LookPath(t, rt.Interpreter)
	fnDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(fnDir, rt.SourceFile()), []byte(handlers[rt.Language]), 0o644))
	port := testport.Port(t)
	env, err := rt.Env(runtimes.Config{FunctionName: "hello", Namespace: "default", FunctionDir: fnDir, Port: port})
	require.NoError(t, err)
	cmd := exec.Command(interp, rt.Command(hostDir)[1:]...)
	cmd.Env = os.Environ()
	for _, e := range env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	var out logtest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + runtimes.ReadyPath)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 10*time.Millisecond, "host ready:\n%s", &out)
	resp, err := http.Get(base + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	var names []string
	for name := range mfs {
		names = append(names, name)
	}
	require.Contains(t, names, "function_calls_total")
	return names
}
