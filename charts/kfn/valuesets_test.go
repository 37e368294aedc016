package chart_test

// valueSet is a set of values the chart is tested with: rendered, linted,
// dry-run applied, checked against the restricted Pod Security Standard.
type valueSet struct {
	name   string
	values map[string]any
}

// natsSecret is the Secret holding the external NATS URL in the
// "external NATS" value set.
const natsSecret = "nats-credentials"

// valueSets are the installations the chart promises to support.
var valueSets = []valueSet{
	{name: "default"},
	{name: "small", values: map[string]any{"profile": "small"}},
	{name: "external NATS", values: map[string]any{
		"nats":         map[string]any{"enabled": false},
		"externalNATS": map[string]any{"existingSecret": natsSecret},
	}},
	{name: "external NATS by URL", values: map[string]any{
		"nats":         map[string]any{"enabled": false},
		"externalNATS": map[string]any{"url": "nats://nats-0.example:4222,nats://nats-1.example:4222"},
		"eventbridge":  map[string]any{"gateway": map[string]any{"enabled": false}},
	}},
	{name: "no KEDA", values: map[string]any{
		"keda": map[string]any{"enabled": false},
	}},
	{name: "APIRules as HTTPRoutes", values: map[string]any{
		"eventbridge": map[string]any{"gateway": map[string]any{"external": map[string]any{"gatewayRef": "gateways/public/https", "tls": map[string]any{"secretName": "unused"}}}},
	}},
	{name: "HA", values: map[string]any{
		"nats":        map[string]any{"replicas": 3},
		"controller":  map[string]any{"replicas": 2},
		"eventbridge": map[string]any{"replicas": 3, "streams": map[string]any{"replicas": 3}},
		"scaler":      map[string]any{"replicas": 2},
	}},
	{name: "observability", values: map[string]any{
		"serviceMonitor":   map[string]any{"enabled": true},
		"podMonitor":       map[string]any{"enabled": true},
		"prometheusRule":   map[string]any{"enabled": true},
		"grafanaDashboard": map[string]any{"enabled": true},
		"nats":             map[string]any{"exporter": map[string]any{"enabled": true}},
		"networkPolicy":    map[string]any{"enabled": true},
		"functions":        map[string]any{"traceCollectorEndpoint": "http://otel-collector.monitoring:4318/v1/traces"},
		"eventbridge":      map[string]any{"tracing": map[string]any{"sampler": "parentbased_traceidratio", "samplerArg": "0.25"}},
		"controller":       map[string]any{"logLevel": "debug"},
	}},
	{name: "hardened", values: map[string]any{
		"image":          map[string]any{"digest": "sha256:" + repeat("ab", 32)},
		"networkPolicy":  map[string]any{"enabled": true},
		"serviceMonitor": map[string]any{"enabled": true},
		"scaler":         map[string]any{"tls": map[string]any{"enabled": true, "existingSecret": "kfn-scaler-tls", "requireClientCert": true}},
		"eventbridge": map[string]any{"admin": map[string]any{"enabled": false}, "service": map[string]any{"port": 8080}, "token": map[string]any{"existingSecret": "kfn-token"}, "wakeProbeInterval": "0s", "maxConnections": 2048, "maxConnectionsPerSource": 300,
			"gateway": map[string]any{"maxInFlightPerNamespace": 50, "external": map[string]any{"tls": map[string]any{"secretName": "apirules-tls"}}, "authorizers": []any{map[string]any{
				"name": "oauth2-proxy", "url": "http://oauth2-proxy.auth.svc.cluster.local:4180/oauth2/auth", "timeout": "2s",
				"includeRequestHeaders": []any{"authorization", "cookie"}, "headersToUpstream": []any{"x-auth-request-user"},
			}}},
			"dispatcher": map[string]any{"sinkNetworks": []any{"10.244.0.0/16", "10.96.0.0/12"}},
			"publisher": map[string]any{"reservedSources": []any{
				map[string]any{"source": "bank", "namespaces": []any{"team-a", "team-b"}},
				map[string]any{"source": "shop", "typePrefix": "order.refund", "namespaces": []any{"team-b"}},
			}}},
		"runtimes": map[string]any{"images": map[string]any{"python312": "registry.example/python:3.12-kfn"}},
	}},
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
