package chart_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestValuesRefused gives the chart wrong values and expects helm to refuse
// them before rendering anything, with a message that names the value and
// says what is wrong (values.schema.json for single values, the chart's
// own checks for values that depend on each other).
func TestValuesRefused(t *testing.T) {
	tests := map[string]struct {
		values map[string]any
		want   []string
	}{
		"unknown top-level key (a typo)": {
			values: map[string]any{"controler": map[string]any{"replicas": 2}},
			want:   []string{"controler", "additional properties"},
		},
		"unknown nested key": {
			values: map[string]any{"eventbridge": map[string]any{"streams": map[string]any{"maxbytes": 10}}},
			want:   []string{"maxbytes", "additional properties"},
		},
		"replicas not a number": {
			values: map[string]any{"controller": map[string]any{"replicas": "two"}},
			want:   []string{"/controller/replicas", "integer"},
		},
		"zero replicas": {
			values: map[string]any{"eventbridge": map[string]any{"replicas": 0}},
			want:   []string{"/eventbridge/replicas", "minimum"},
		},
		"two NATS servers": {
			values: map[string]any{"nats": map[string]any{"replicas": 2}},
			want:   []string{"/nats/replicas", "1", "3"},
		},
		"volume limit under 1Mi": {
			values: map[string]any{"functions": map[string]any{"volumeLimits": map[string]any{"tmp": "512Ki"}}},
			want:   []string{"/functions/volumeLimits/tmp", "^[1-9][0-9]*(Mi|Gi|Ti)$"},
		},
		"allowed image registry as a URL": {
			values: map[string]any{"functions": map[string]any{"allowedImageRegistries": []any{"https://ghcr.io/kfn-dev"}}},
			want:   []string{"/functions/allowedImageRegistries/0"},
		},
		"known hosts not a string": {
			values: map[string]any{"git": map[string]any{"knownHosts": []any{"github.com ssh-ed25519 AAAA"}}},
			want:   []string{"/git/knownHosts", "string"},
		},
		"unknown profile": {
			values: map[string]any{"functions": map[string]any{"defaultProfile": "XXL"}},
			want:   []string{"/functions/defaultProfile", "must be one of 'XS', 'S', 'M', 'L', 'XL'"},
		},
		"unknown runtime": {
			values: map[string]any{"runtimes": map[string]any{"images": map[string]any{"java17": "x/y:1"}}},
			want:   []string{"java17", "additional properties"},
		},
		"bad duration": {
			values: map[string]any{"eventbridge": map[string]any{"dispatcher": map[string]any{"requestTimeout": "60"}}},
			want:   []string{"/eventbridge/dispatcher/requestTimeout", "60"},
		},
		"stream storage": {
			values: map[string]any{"eventbridge": map[string]any{"streams": map[string]any{"storage": "disk"}}},
			want:   []string{"/eventbridge/streams/storage", "file", "memory"},
		},
		"admin auth": {
			values: map[string]any{"eventbridge": map[string]any{"admin": map[string]any{"auth": "token"}}},
			want:   []string{"/eventbridge/admin/auth", "kubernetes", "none"},
		},
		"reserved source without namespaces": {
			values: map[string]any{"eventbridge": map[string]any{"publisher": map[string]any{"reservedSources": []any{map[string]any{"source": "bank", "namespaces": []any{}}}}}},
			want:   []string{"/eventbridge/publisher/reservedSources/0/namespaces", "minItems"},
		},
		"reserved source for a namespace that cannot be": {
			values: map[string]any{"eventbridge": map[string]any{"publisher": map[string]any{"reservedSources": []any{map[string]any{"source": "bank", "namespaces": []any{"Team_A"}}}}}},
			want:   []string{"/eventbridge/publisher/reservedSources/0/namespaces/0"},
		},
		"gateway auth": {
			values: map[string]any{"eventbridge": map[string]any{"gateway": map[string]any{"auth": "token"}}},
			want:   []string{"/eventbridge/gateway/auth", "kubernetes", "none"},
		},
		"stream replicas over 5": {
			values: map[string]any{"eventbridge": map[string]any{"streams": map[string]any{"replicas": 7}}},
			want:   []string{"/eventbridge/streams/replicas", "maximum"},
		},
		"a claim hold of an hour": {
			values: map[string]any{"scaler": map[string]any{"claimHold": "1h"}},
			want:   []string{"/scaler/claimHold"},
		},
		"log level": {
			values: map[string]any{"eventbridge": map[string]any{"logLevel": "verbose"}},
			want:   []string{"/eventbridge/logLevel", "must be one of 'debug', 'info', 'warn', 'error'"},
		},
		"bad image digest": {
			values: map[string]any{"image": map[string]any{"digest": "latest"}},
			want:   []string{"/image/digest"},
		},
		"bad resource quantity": {
			values: map[string]any{"controller": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "lots"}}}},
			want:   []string{"/controller/resources/limits/memory"},
		},
		"NATS URL without scheme": {
			values: map[string]any{"nats": map[string]any{"enabled": false}, "externalNATS": map[string]any{"url": "nats.example:4222"}},
			want:   []string{"/externalNATS/url"},
		},
		"privileged container": {
			values: map[string]any{"containerSecurityContext": map[string]any{"privileged": true}},
			want:   []string{"/containerSecurityContext/privileged"},
		},
		"root user": {
			values: map[string]any{"podSecurityContext": map[string]any{"runAsUser": 0}},
			want:   []string{"/podSecurityContext/runAsUser", "minimum"},
		},
		"no NATS at all": {
			values: map[string]any{"nats": map[string]any{"enabled": false}},
			want:   []string{"externalNATS.url or externalNATS.existingSecret"},
		},
		"more stream replicas than NATS servers": {
			values: map[string]any{"profile": "small", "eventbridge": map[string]any{"streams": map[string]any{"replicas": 3}}},
			want:   []string{"eventbridge.streams.replicas (3) cannot exceed nats.replicas (1)"},
		},
		"no consumer limit on the event stream": {
			values: map[string]any{"eventbridge": map[string]any{"streams": map[string]any{"maxConsumers": -1}}},
			want:   []string{"/eventbridge/streams/maxConsumers", "minimum"},
		},
		"NATS max_payload below the largest event": {
			values: map[string]any{"nats": map[string]any{"maxPayload": 1048576}},
			want:   []string{"nats.maxPayload (1048576) must be at least eventbridge.streams.maxMsgSize (2097152)"},
		},
		"a NATS volume smaller than the streams and the dependency cache reserve": {
			values: map[string]any{"nats": map[string]any{"jetstream": map[string]any{"fileStorage": map[string]any{"size": "4Gi"}}}},
			want:   []string{"80% of nats.jetstream.fileStorage.size (3435973836 bytes), is less than what NATS reserves on each server", "(3489660928 bytes)"},
		},
		"a NATS volume smaller than what 3 partitions, the dead letters and the dependency cache reserve": {
			values: map[string]any{"nats": map[string]any{"jetstream": map[string]any{"fileStorage": map[string]any{"size": "6Gi"}}},
				"eventbridge": map[string]any{"streams": map[string]any{"partitions": 3}}},
			want: []string{"maxBytes (once per partition)", "(5637144576 bytes)"},
		},
		"partitions above 16": {
			values: map[string]any{"eventbridge": map[string]any{"streams": map[string]any{"partitions": 17}}},
			want:   []string{"partitions"},
		},
		"a scaler certificate without TLS": {
			values: map[string]any{"scaler": map[string]any{"tls": map[string]any{"enabled": false, "requireClientCert": false, "existingSecret": "mine"}}},
			want:   []string{"scaler.tls.existingSecret is set but scaler.tls.enabled is false"},
		},
		"a CLI subject of no kind RBAC knows": {
			values: map[string]any{"cli": map[string]any{"subjects": []any{map[string]any{"kind": "Robot", "name": "r2"}}}},
			want:   []string{"/cli/subjects/0/kind"},
		},
		"KEDA authentication made sometimes": {
			values: map[string]any{"scaler": map[string]any{"tls": map[string]any{"kedaAuthentication": map[string]any{"create": "sometimes"}}}},
			want:   []string{"/scaler/tls/kedaAuthentication/create"},
		},
		"KEDA's namespace not a name": {
			values: map[string]any{"scaler": map[string]any{"tls": map[string]any{"kedaAuthentication": map[string]any{"kedaNamespace": "../keda"}}}},
			want:   []string{"/scaler/tls/kedaAuthentication/kedaNamespace"},
		},
		"KEDA authentication of an unknown kind": {
			values: map[string]any{"scaler": map[string]any{"tls": map[string]any{"kedaAuthentication": map[string]any{"kind": "Secret"}}}},
			want:   []string{"/scaler/tls/kedaAuthentication/kind", "must be one of"},
		},
		"KEDA authentication without a name": {
			values: map[string]any{"scaler": map[string]any{"tls": map[string]any{"kedaAuthentication": map[string]any{"name": ""}}}},
			want:   []string{"/scaler/tls/kedaAuthentication/name"},
		},
		"client certificates without TLS": {
			values: map[string]any{"scaler": map[string]any{"tls": map[string]any{"enabled": false}}},
			want:   []string{"scaler.tls.requireClientCert needs scaler.tls.enabled"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := renderManifest(t, tc.values)
			require.Error(t, err, "the chart must refuse these values")
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			t.Log(err)
		})
	}
}
