package chart_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	v1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/extauth"
	"github.com/kfn-dev/kfn/eventbridge/httproute"
)

// rendered is one value set's objects, typed where the tests look inside.
type rendered struct {
	objs         []*unstructured.Unstructured
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	pdbs         map[string]*policyv1.PodDisruptionBudget
	clusterRoles map[string]*rbacv1.ClusterRole
	roles        map[string]*rbacv1.Role
}

func typed(t testing.TB, objs []*unstructured.Unstructured) rendered {
	t.Helper()
	r := rendered{objs: objs, deployments: map[string]*appsv1.Deployment{}, statefulSets: map[string]*appsv1.StatefulSet{},
		services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		clusterRoles: map[string]*rbacv1.ClusterRole{}, roles: map[string]*rbacv1.Role{}}
	for _, o := range objs {
		var into any
		switch o.GetKind() {
		case "Deployment":
			d := &appsv1.Deployment{}
			r.deployments[o.GetName()], into = d, d
		case "StatefulSet":
			s := &appsv1.StatefulSet{}
			r.statefulSets[o.GetName()], into = s, s
		case "Service":
			s := &corev1.Service{}
			r.services[o.GetName()], into = s, s
		case "ConfigMap":
			c := &corev1.ConfigMap{}
			r.configMaps[o.GetName()], into = c, c
		case "PodDisruptionBudget":
			p := &policyv1.PodDisruptionBudget{}
			r.pdbs[o.GetName()], into = p, p
		case "ClusterRole":
			c := &rbacv1.ClusterRole{}
			r.clusterRoles[o.GetName()], into = c, c
		case "Role":
			c := &rbacv1.Role{}
			r.roles[o.GetName()], into = c, c
		default:
			continue
		}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true),
			"%s %s has fields its type does not know", o.GetKind(), o.GetName())
	}
	return r
}

// podTemplates returns every pod template of the rendered workloads, by workload name.
func (r rendered) podTemplates() map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	for n, d := range r.deployments {
		out[n] = &d.Spec.Template
	}
	for n, s := range r.statefulSets {
		out[n] = &s.Spec.Template
	}
	return out
}

func container(t testing.TB, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	require.NotNil(t, d)
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	return d.Spec.Template.Spec.Containers[0]
}

func clusterScoped(kind string) bool {
	return slices.Contains([]string{"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}, kind)
}

// TestRender renders every value set and checks what must hold in all of
// them: namespaces, labels, names, resources and probes of every container,
// selectors that select, Services that reach a port, PDBs exactly where a
// component has more than one replica, no wildcard in any RBAC rule.
func TestRender(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := typed(t, render(t, vs.values))
			require.NotEmpty(t, r.objs)
			seen := map[string]bool{}
			for _, o := range r.objs {
				key := o.GetKind() + "/" + o.GetName()
				assert.False(t, seen[key], "%s rendered twice", key)
				seen[key] = true
				assert.Empty(t, validation.IsDNS1123Subdomain(o.GetName()), key)
				switch {
				case clusterScoped(o.GetKind()):
					assert.Empty(t, o.GetNamespace(), key)
				case key == "Role/kfn-eventbridge-client-ca" || key == "RoleBinding/kfn-eventbridge-client-ca",
					key == "Role/kfn-controller-client-ca" || key == "RoleBinding/kfn-controller-client-ca":
					// Reading the cluster's client CA, where the API server keeps it.
					assert.Equal(t, "kube-system", o.GetNamespace(), key)
				default:
					assert.Equal(t, releaseNamespace, o.GetNamespace(), "%s must be in the release's namespace", key)
				}
				if o.GetKind() != "CustomResourceDefinition" {
					assert.Equal(t, "kfn", o.GetLabels()["app.kubernetes.io/part-of"], key)
					assert.Equal(t, releaseName, o.GetLabels()["app.kubernetes.io/instance"], key)
				}
			}
			for name, pt := range r.podTemplates() {
				for _, c := range append(slices.Clone(pt.Spec.InitContainers), pt.Spec.Containers...) {
					for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
						assert.Contains(t, c.Resources.Requests, res, "%s/%s requests", name, c.Name)
						assert.Contains(t, c.Resources.Limits, res, "%s/%s limits", name, c.Name)
					}
					assert.NotNil(t, c.LivenessProbe, "%s/%s liveness probe", name, c.Name)
					assert.NotNil(t, c.ReadinessProbe, "%s/%s readiness probe", name, c.Name)
				}
			}
			for name, d := range r.deployments {
				sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
				require.NoError(t, err)
				assert.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "%s selects its own pods", name)
				assert.NotEmpty(t, d.Spec.Template.Spec.ServiceAccountName, "%s runs under its own ServiceAccount", name)
				assert.NotNil(t, find(r.objs, "ServiceAccount", d.Spec.Template.Spec.ServiceAccountName), "%s's ServiceAccount is rendered", name)
			}
			for name, svc := range r.services {
				pods := selected(r, svc.Spec.Selector)
				require.Len(t, pods, 1, "Service %s selects the pods of exactly one workload", name)
				for _, p := range svc.Spec.Ports {
					assert.True(t, servesPort(pods[0], p.TargetPort.String()), "Service %s port %s: the pods have no port %s", name, p.Name, p.TargetPort.String())
				}
			}
			replicas := map[string]int32{}
			for name, d := range r.deployments {
				replicas[name] = *d.Spec.Replicas
			}
			for name, s := range r.statefulSets {
				replicas[name] = *s.Spec.Replicas
			}
			for name, n := range replicas {
				_, ok := r.pdbs[name]
				assert.Equal(t, n > 1, ok, "%s has %d replicas: a PodDisruptionBudget exactly when more than one", name, n)
			}
			for _, o := range r.objs {
				if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
					continue
				}
				rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
				for _, rule := range rules {
					for _, field := range []string{"apiGroups", "resources", "verbs", "resourceNames"} {
						vals, _, _ := unstructured.NestedStringSlice(rule.(map[string]any), field)
						assert.NotContains(t, vals, "*", "%s %s: no wildcards", o.GetKind(), o.GetName())
					}
				}
			}
		})
	}
}

// selected returns the pod templates whose labels the selector matches.
func selected(r rendered, sel map[string]string) []*corev1.PodTemplateSpec {
	var out []*corev1.PodTemplateSpec
	for _, pt := range r.podTemplates() {
		if len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(pt.Labels)) {
			out = append(out, pt)
		}
	}
	return out
}

func servesPort(pt *corev1.PodTemplateSpec, port string) bool {
	for _, c := range pt.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
				return true
			}
		}
	}
	return false
}

// TestRenderValueSets checks what each value set is for.
func TestRenderValueSets(t *testing.T) {
	get := func(t *testing.T, name string) rendered {
		for _, vs := range valueSets {
			if vs.name == name {
				return typed(t, render(t, vs.values))
			}
		}
		t.Fatalf("no value set %q", name)
		return rendered{}
	}
	t.Run("default", func(t *testing.T) {
		r := get(t, "default")
		assert.Equal(t, map[string]int{
			"CustomResourceDefinition": 3, "ServiceAccount": 3, "ClusterRole": 9, "ClusterRoleBinding": 3, "Role": 5, "RoleBinding": 4, // the users' view and edit roles (aggregateToDefaultRoles), the admin API's two aggregated roles, the gateway's one and the metrics reader, the event bridge's and the controller's client CA Roles and bindings, the CLI's Role (bound with cli.subjects)
			"ConfigMap": 2, "Deployment": 3, "StatefulSet": 1, "Service": 8, "PodDisruptionBudget": 4, // profile ha; the controller's claims Service, the gateway's external one
			"Secret":        2, // the scaler's certificates (KEDA's half only where KEDA's API is), NATS's passwords
			"NetworkPolicy": 4, // on by default
		}, kinds(r.objs))
		assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-nats-url=nats://kfn-nats.kfn-system.svc.cluster.local:4222")
		assert.Equal(t, corev1.ClusterIPNone, r.services["kfn-scaler"].Spec.ClusterIP, "KEDA balances over the scaler's pods")
		assert.Equal(t, corev1.ClusterIPNone, r.services["kfn-controller-claims"].Spec.ClusterIP, "the event bridge tries each controller pod: only the leader listens")
		assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-claim-controller=kfn-controller-claims.kfn-system.svc.cluster.local.")
		assert.Contains(t, container(t, r.deployments["kfn-scaler"]).Args, "-claim-hold=250ms", "KEDA is told once the bridges' claim ended")
		cfg := r.configMaps["kfn-controller"].Data["controller.yaml"]
		for _, want := range []string{
			`publisherAddress: "http://kfn-publisher.kfn-system.svc.cluster.local/publish"`,
			`dependencyCacheAddress: "http://kfn-publisher.kfn-system.svc.cluster.local/_kfn/dependencies"`,
			`scalerAddress: "kfn-scaler.kfn-system.svc.cluster.local:9090"`,
			`nodejs20: "ghcr.io/kfn-dev/runtime-nodejs22:0.2.0"`,
			`python312: "ghcr.io/kfn-dev/runtime-python312:0.2.0"`,
			`gitFetchImage: "ghcr.io/kfn-dev/kfn:0.2.0"`,
			"leaderElectionNamespace: kfn-system",
			`claimAddress: ":8083"`,
		} {
			assert.Contains(t, cfg, want)
		}
	})
	t.Run("external NATS", func(t *testing.T) {
		r := get(t, "external NATS")
		assert.Empty(t, r.statefulSets, "no NATS of the chart's own")
		for _, name := range []string{"kfn-eventbridge", "kfn-scaler"} {
			c := container(t, r.deployments[name])
			assert.Contains(t, c.Args, "-nats-url=$(NATS_URL)", name)
			require.NotEmpty(t, c.Env, name)
			env := c.Env[len(c.Env)-1]
			assert.Equal(t, "NATS_URL", env.Name, "%s: the variable is defined after nothing that uses it", name)
			require.NotNil(t, env.ValueFrom)
			assert.Equal(t, natsSecret, env.ValueFrom.SecretKeyRef.Name)
			assert.Equal(t, "url", env.ValueFrom.SecretKeyRef.Key)
		}
	})
	t.Run("external NATS by URL", func(t *testing.T) {
		r := get(t, "external NATS by URL")
		assert.Empty(t, r.statefulSets)
		assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-nats-url=nats://nats-0.example:4222,nats://nats-1.example:4222")
	})
	t.Run("no KEDA", func(t *testing.T) {
		r := get(t, "no KEDA")
		assert.NotContains(t, r.deployments, "kfn-scaler")
		assert.NotContains(t, r.clusterRoles, "kfn-scaler")
		assert.Nil(t, find(r.objs, "ServiceAccount", "kfn-scaler"))
		for _, rule := range r.clusterRoles["kfn-controller"].Rules {
			assert.NotContains(t, rule.APIGroups, "keda.sh", "no ScaledObject permissions without KEDA")
		}
	})
	t.Run("HA", func(t *testing.T) {
		r := get(t, "HA")
		assert.Len(t, r.pdbs, 4)
		assert.Equal(t, int32(3), *r.statefulSets["kfn-nats"].Spec.Replicas)
		assert.Contains(t, container(t, r.deployments["kfn-eventbridge"]).Args, "-stream-replicas=3")
		for name, d := range r.deployments {
			aff := d.Spec.Template.Spec.Affinity
			require.NotNil(t, aff, "%s spreads its replicas", name)
			assert.NotEmpty(t, aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, name)
		}
		assert.Contains(t, natsOf(t, r).env["KFN_NATS_ROUTE_2"], "@kfn-nats-2.kfn-nats-headless.kfn-system.svc.cluster.local:6222")
	})
	t.Run("hardened", func(t *testing.T) {
		r := get(t, "hardened")
		assert.Equal(t, 4, kinds(r.objs)["NetworkPolicy"])
		assert.Equal(t, 3, kinds(r.objs)["ServiceMonitor"])
		digest := "ghcr.io/kfn-dev/kfn@sha256:" + repeat("ab", 32)
		for name, d := range r.deployments {
			assert.Equal(t, digest, container(t, d).Image, name)
		}
		scaler := container(t, r.deployments["kfn-scaler"])
		for _, want := range []string{"-tls-cert-file=/etc/kfn/tls/tls.crt", "-tls-key-file=/etc/kfn/tls/tls.key", "-tls-client-ca-file=/etc/kfn/tls/ca.crt"} {
			assert.Contains(t, scaler.Args, want)
		}
		assert.NotNil(t, scaler.ReadinessProbe.TCPSocket, "the kubelet's gRPC probe cannot speak TLS")
		eb := container(t, r.deployments["kfn-eventbridge"])
		assert.Contains(t, eb.Args, "-admin-listen=")
		assert.Contains(t, eb.Args, "-sink-networks=10.244.0.0/16,10.96.0.0/12")
		assert.NotContains(t, strings.Join(container(t, get(t, "default").deployments["kfn-eventbridge"]).Args, " "), "-sink-networks")
		checkEventBridgeEgress(t, r)
		assert.Contains(t, eb.Args, "-token-file=/etc/kfn/token/token", "the publisher and gateway require the token")
		assert.NotContains(t, container(t, get(t, "default").deployments["kfn-eventbridge"]).Args, "-token-file=/etc/kfn/token/token")
		for _, p := range eb.Ports {
			assert.NotEqual(t, "admin", p.Name)
		}
		cfg := r.configMaps["kfn-controller"].Data["controller.yaml"]
		assert.Contains(t, cfg, `publisherAddress: "http://kfn-publisher.kfn-system.svc.cluster.local:8080/publish"`)
		assert.Contains(t, cfg, `dependencyCacheAddress: "http://kfn-publisher.kfn-system.svc.cluster.local:8080/_kfn/dependencies"`, "the publisher's port, as PUBLISHER_PROXY_ADDRESS has it")
		assert.Contains(t, cfg, `python312: "registry.example/python:3.12-kfn"`)
		assert.Contains(t, cfg, `gitFetchImage: "`+digest+`"`)
		assert.Contains(t, cfg, `scalerAuthentication: "ClusterTriggerAuthentication/kfn-scaler"`, "KEDA gets the scaler's CA from the authentication the controller names")
		assert.Contains(t, get(t, "default").configMaps["kfn-controller"].Data["controller.yaml"], "scalerAuthentication", "mutual TLS by default (TestScalerMutualTLSByDefault)")
	})
}

// TestEventBridgeArgs parses the event bridge's rendered arguments with the
// event bridge's own flags and validation, in every value set: a flag the
// binary does not know, or a value it refuses, fails here.
func TestEventBridgeArgs(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := typed(t, render(t, vs.values))
			c := container(t, r.deployments["kfn-eventbridge"])
			assert.Equal(t, []string{"/usr/local/bin/eventbridge"}, c.Command)
			cfg := eventbridge.DefaultProcess()
			fs := flag.NewFlagSet("eventbridge", flag.ContinueOnError)
			cfg.RegisterFlags(fs)
			require.NoError(t, fs.Parse(c.Args))
			require.Empty(t, fs.Args())
			require.NoError(t, cfg.Validate())
			assert.True(t, cfg.LeaderElection)
			assert.Equal(t, releaseNamespace, cfg.LeaderElectionNamespace)
			want := []string{eventbridge.ComponentPublisher, eventbridge.ComponentDispatcher, eventbridge.ComponentReconciler}
			svc, gateway := r.services["kfn-gateway"]
			if gateway {
				want = append(want, eventbridge.ComponentGateway)
				assert.Equal(t, ":8082", cfg.GatewayListen)
				assert.Equal(t, intstr.FromString("gateway"), svc.Spec.Ports[0].TargetPort)
				assert.True(t, slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "gateway" && p.ContainerPort == 8082 }))
			}
			assert.Equal(t, vs.name != "external NATS by URL", gateway, "the gateway runs unless eventbridge.gateway.enabled is false")
			assert.ElementsMatch(t, want, cfg.Components)
			assert.Equal(t, v1alpha2.DefaultDelivery(), cfg.Dispatcher.Delivery, "the chart's delivery defaults are the API's")
			if vs.name == "hardened" {
				assert.Equal(t, []admission.Reservation{
					{Source: "bank", Namespaces: []string{"team-a", "team-b"}},
					{Source: "shop", TypePrefix: "order.refund", Namespaces: []string{"team-b"}},
				}, cfg.Publisher.Reserved, "eventbridge.publisher.reservedSources")
				assert.Zero(t, cfg.WakeProbeInterval, "eventbridge.wakeProbeInterval")
				assert.Equal(t, 2048, cfg.MaxConnections, "eventbridge.maxConnections")
				assert.Equal(t, 300, cfg.MaxConnectionsPerSource, "eventbridge.maxConnectionsPerSource")
				assert.Equal(t, 50, cfg.Gateway.MaxInFlightPerNamespace, "eventbridge.gateway.maxInFlightPerNamespace")
				assert.Equal(t, []extauth.Authorizer{{
					Name: "oauth2-proxy", URL: "http://oauth2-proxy.auth.svc.cluster.local:4180/oauth2/auth", Timeout: extauth.Duration(2 * time.Second),
					IncludeRequestHeaders: []string{"authorization", "cookie"}, HeadersToUpstream: []string{"x-auth-request-user"},
				}}, cfg.Gateway.Authorizers, "eventbridge.gateway.authorizers")
				assert.Equal(t, "/etc/kfn/expose-tls/tls.crt", cfg.ExposeTLSCertFile, "eventbridge.gateway.external.tls")
				assert.Equal(t, "/etc/kfn/expose-tls/tls.key", cfg.ExposeTLSKeyFile)
				assert.True(t, slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "expose-tls" && m.MountPath == "/etc/kfn/expose-tls" }))
			} else {
				assert.Empty(t, cfg.Publisher.Reserved)
				assert.Empty(t, cfg.Gateway.Authorizers)
				assert.Empty(t, cfg.ExposeTLSCertFile, "plain HTTP by default")
				assert.Equal(t, 10*time.Millisecond, cfg.WakeProbeInterval, "eventbridge.wakeProbeInterval")
				assert.Equal(t, eventbridge.DefaultProcess().MaxConnections, cfg.MaxConnections, "eventbridge.maxConnections 0: the event bridge's default")
				assert.Zero(t, cfg.MaxConnectionsPerSource, "eventbridge.maxConnectionsPerSource 0: an eighth of the listener's")
				assert.Equal(t, 250, cfg.Gateway.MaxInFlightPerNamespace, "eventbridge.gateway.maxInFlightPerNamespace")
			}
			if vs.name == "APIRules as HTTPRoutes" {
				assert.Equal(t, &httproute.Parent{Namespace: "gateways", Name: "public", SectionName: "https"}, cfg.APIRoutes, "eventbridge.gateway.external.gatewayRef")
				assert.Empty(t, cfg.ExposeListen, "the Gateway serves them")
				assert.Empty(t, cfg.ExposeTLSCertFile)
				assert.NotContains(t, r.services, "kfn-gateway-external")
			} else {
				assert.Nil(t, cfg.APIRoutes)
			}
			routes := slices.ContainsFunc(r.clusterRoles["kfn-eventbridge"].Rules, func(p rbacv1.PolicyRule) bool { return slices.Contains(p.Resources, "httproutes") })
			assert.Equal(t, vs.name == "APIRules as HTTPRoutes", routes, "HTTPRoutes granted only to write them")
			assert.Equal(t, eventbridge.PublisherSendersKubernetes, cfg.PublisherSenders)
			assert.Equal(t, 100.0, cfg.NewTokensPerSecond, "eventbridge.newTokensPerSecond")
			assert.Equal(t, 250, cfg.EventPaths, "eventbridge.admin.eventPaths.perNamespace")
			assert.Equal(t, 128, cfg.EventPathsNamespaces, "eventbridge.admin.eventPaths.namespaces")
		})
	}
}

// TestNATSConfig loads the rendered nats.conf with the NATS server's own
// parser (the version of the chart's image), in every value set that runs
// NATS: JetStream on, max_payload at least the stream's largest event,
// routes to every server of a cluster.
func TestNATSConfig(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := typed(t, render(t, vs.values))
			cm, ok := r.configMaps["kfn-nats"]
			if !ok {
				t.Skip("no NATS in this value set")
			}
			sts := r.statefulSets["kfn-nats"]
			require.NotNil(t, sts)
			assert.True(t, strings.HasSuffix(sts.Spec.Template.Spec.Containers[0].Image, server.VERSION+"-alpine"),
				"the chart's NATS image %s is the version the tests embed (%s)", sts.Spec.Template.Spec.Containers[0].Image, server.VERSION)
			for k, v := range natsOf(t, r).env {
				t.Setenv(k, v) // the passwords and route URLs
			}
			t.Setenv("POD_NAME", "kfn-nats-0")
			file := filepath.Join(t.TempDir(), "nats.conf")
			require.NoError(t, os.WriteFile(file, []byte(cm.Data["nats.conf"]), 0o600))
			opts, err := server.ProcessConfigFile(file)
			require.NoError(t, err)
			assert.Equal(t, "kfn-nats-0", opts.ServerName)
			assert.True(t, opts.JetStream)
			assert.Equal(t, "/data", opts.StoreDir)
			cfg := eventbridge.DefaultProcess()
			fs := flag.NewFlagSet("eventbridge", flag.ContinueOnError)
			cfg.RegisterFlags(fs)
			require.NoError(t, fs.Parse(container(t, r.deployments["kfn-eventbridge"]).Args))
			assert.GreaterOrEqual(t, int64(opts.MaxPayload), int64(cfg.Streams.MaxMsgSize), "NATS must carry the largest event the stream accepts")
			if *sts.Spec.Replicas > 1 {
				assert.Len(t, opts.Routes, int(*sts.Spec.Replicas), "a route to every server")
				assert.Equal(t, "kfn-nats", opts.Cluster.Name)
			} else {
				assert.Empty(t, opts.Routes)
			}
		})
	}
}

// TestChartFiles checks that the chart as helm packages it holds the
// chart and nothing of the Go package beside it (.helmignore).
func TestChartFiles(t *testing.T) {
	ch := loadChart(t)
	var names []string
	for _, f := range ch.Raw {
		names = append(names, f.Name)
		assert.False(t, strings.HasSuffix(f.Name, ".go"), "%s is packaged", f.Name)
	}
	for _, want := range []string{"Chart.yaml", "values.yaml", "values.schema.json", "README.md", "templates/NOTES.txt"} {
		assert.Contains(t, names, want)
	}
	// The CRDs are rendered from files/crds (templates/crds.yaml), so that
	// helm upgrade changes them: none in crds/, which Helm never upgrades.
	assert.Empty(t, ch.CRDObjects())
	crds := 0
	for _, f := range ch.Files {
		if strings.HasPrefix(f.Name, "files/crds/") {
			crds++
		}
	}
	assert.Equal(t, 3, crds, "files/crds holds the three CRDs")
}

// TestLint runs helm lint on the chart with every value set; warnings fail
// too (strict).
func TestLint(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			l := action.NewLint()
			l.Strict = true
			l.Namespace = releaseNamespace
			l.KubeVersion = kubeVersion(t)
			res := l.Run([]string{"."}, copyValues(vs.values))
			for _, m := range res.Messages {
				t.Log(m.Error())
			}
			require.Empty(t, res.Errors)
			require.Equal(t, 1, res.TotalChartsLinted)
		})
	}
}

// checkEventBridgeEgress checks the event bridge's egress policy: pods of
// any namespace, DNS, NATS's pods on 4222 and the API server's ports,
// nothing else (no rule reaches any address on any port).
func checkEventBridgeEgress(t *testing.T, r rendered) {
	t.Helper()
	obj := find(r.objs, "NetworkPolicy", "kfn-eventbridge")
	require.NotNil(t, obj)
	var np networkingv1.NetworkPolicy
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &np))
	assert.Contains(t, np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
	var ports []string
	for _, rule := range np.Spec.Egress {
		if len(rule.Ports) == 0 {
			require.Len(t, rule.To, 1, "a rule for any port names its peers")
			assert.Equal(t, &metav1.LabelSelector{}, rule.To[0].NamespaceSelector, "any port only to pods (of any namespace)")
			assert.Nil(t, rule.To[0].IPBlock)
			continue
		}
		for _, p := range rule.Ports {
			ports = append(ports, p.Port.String())
		}
		if rule.Ports[0].Port.IntValue() == 4222 {
			require.Len(t, rule.To, 1)
			assert.Equal(t, "nats", rule.To[0].PodSelector.MatchLabels["app.kubernetes.io/component"], "NATS: the chart's NATS pods")
		}
	}
	assert.ElementsMatch(t, []string{"53", "53", "4222", "443", "6443"}, ports)
}

// TestWarmPoolValues: functions.warmPool reaches the controller's
// configuration, and only a pool that is on lets the controller create,
// patch and delete pods and watch namespaces (off, it may only list and
// watch pods). Fails when a value is not rendered or the verbs are granted
// without a pool.
func TestWarmPoolValues(t *testing.T) {
	verbs := func(objs []*unstructured.Unstructured, resource string) []string {
		var out []string
		for _, g := range grantsOf(t, objs, releaseNamespace, "kfn-controller") {
			if g.Group == "" && g.Resource == resource {
				out = append(out, g.Verb)
			}
		}
		slices.Sort(out)
		return out
	}
	on := render(t, nil)
	assert.Contains(t, typed(t, on).configMaps["kfn-controller"].Data["controller.yaml"],
		"warmPool: true\nwarmPoolSize: 1\nwarmPoolIdle: \"1h\"\nwarmPoolMaxStandby: 100\n", "on by default, at most one per namespace and shape, 100 in all")
	assert.Equal(t, []string{"create", "delete", "list", "patch", "watch"}, verbs(on, "pods"))
	assert.Equal(t, []string{"list", "watch"}, verbs(on, "namespaces"))
	off := render(t, map[string]any{"functions": map[string]any{"warmPool": map[string]any{"enabled": false, "size": 3}}})
	assert.Contains(t, typed(t, off).configMaps["kfn-controller"].Data["controller.yaml"], "warmPool: false\nwarmPoolSize: 3\n")
	assert.Equal(t, []string{"list", "watch"}, verbs(off, "pods"))
	assert.Empty(t, verbs(off, "namespaces"))
	for _, arg := range container(t, typed(t, off).deployments["kfn-scaler"]).Args {
		assert.NotContains(t, arg, "-claim-hold", "no bridge claims: KEDA is told at once")
	}
}

// TestDependencyCacheValues: the controller gives Function pods this
// release's publisher as their dependency cache by default, the address a
// user sets instead, and none when the cache is turned off, or when the
// event bridge serves none. Fails when the default or a switch is lost.
func TestDependencyCacheValues(t *testing.T) {
	cfg := func(values map[string]any) string {
		return typed(t, render(t, values)).configMaps["kfn-controller"].Data["controller.yaml"]
	}
	assert.Contains(t, cfg(nil), `dependencyCacheAddress: "http://kfn-publisher.kfn-system.svc.cluster.local/_kfn/dependencies"`)
	assert.Contains(t, cfg(map[string]any{"functions": map[string]any{"dependencyCache": map[string]any{"address": "http://cache.example/_kfn/dependencies"}}}),
		`dependencyCacheAddress: "http://cache.example/_kfn/dependencies"`)
	assert.Contains(t, cfg(map[string]any{"functions": map[string]any{"dependencyCache": map[string]any{"enabled": false}}}), `dependencyCacheAddress: ""`)
	// The event bridge serves no cache: pods are given none (and so the
	// warm pool does not take Functions with dependencies).
	assert.Contains(t, cfg(map[string]any{"eventbridge": map[string]any{"dependencyCache": map[string]any{"enabled": false}}}), `dependencyCacheAddress: ""`)
	assert.Contains(t, cfg(map[string]any{"eventbridge": map[string]any{"publisher": map[string]any{"senders": "none"}}}), `dependencyCacheAddress: ""`)
}
