package runtimes_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
)

func envMap(vars []runtimes.EnvVar) map[string]string {
	m := map[string]string{}
	for _, v := range vars {
		m[v.Name] = v.Value
	}
	return m
}

func TestEnv(t *testing.T) {
	tests := map[string]struct {
		runtime string
		cfg     runtimes.Config
		want    map[string]string
	}{
		"defaults are written out": {
			runtime: "nodejs22",
			cfg:     runtimes.Config{FunctionName: "orders", Namespace: "shop", FunctionDir: runtimes.PodFunctionDir},
			want: map[string]string{
				"FUNC_NAME": "orders", "SERVICE_NAMESPACE": "shop", "FUNC_RUNTIME": "nodejs22", "KFN_HANDLER_API": "event",
				"FUNC_TIMEOUT": "180", "REQ_MB_LIMIT": "1", "FUNC_PORT": "8080",
				"FUNC_HANDLER": "main", "MOD_NAME": "handler", "KFN_FUNCTION_DIR": "/usr/src/app/function",
			},
		},
		"node dependencies": {
			runtime: "nodejs24",
			cfg: runtimes.Config{
				FunctionDir: "/f", DepsDir: runtimes.PodDepsDir, Timeout: 1500 * time.Millisecond, BodyLimit: 4 << 20, Port: 9000,
				PublisherAddress: "http://pub/publish", TraceCollectorEndpoint: "http://otel:4318/v1/traces",
			},
			want: map[string]string{
				"FUNC_NAME": "", "SERVICE_NAMESPACE": "", "FUNC_RUNTIME": "nodejs24", "KFN_HANDLER_API": "event",
				"FUNC_TIMEOUT": "1.5", "REQ_MB_LIMIT": "4", "FUNC_PORT": "9000",
				"FUNC_HANDLER": "main", "MOD_NAME": "handler", "KFN_FUNCTION_DIR": "/f",
				"KFN_DEPS_DIR": "/usr/src/app/deps", "NODE_PATH": "/usr/src/app/deps/node_modules",
				"PUBLISHER_PROXY_ADDRESS": "http://pub/publish", "TRACE_COLLECTOR_ENDPOINT": "http://otel:4318/v1/traces",
			},
		},
		"body limits in Kyma's units": {
			runtime: "nodejs22",
			cfg:     runtimes.Config{FunctionDir: "/f", BodyLimit: 512 << 10},
			want: map[string]string{
				"FUNC_NAME": "", "SERVICE_NAMESPACE": "", "FUNC_RUNTIME": "nodejs22", "KFN_HANDLER_API": "event",
				"FUNC_TIMEOUT": "180", "REQ_MB_LIMIT": "0.5", "FUNC_PORT": "8080",
				"FUNC_HANDLER": "main", "MOD_NAME": "handler", "KFN_FUNCTION_DIR": "/f",
			},
		},
		"python body limit in bytes": {
			runtime: "python312",
			cfg:     runtimes.Config{FunctionDir: "/f", BodyLimit: 5 << 20},
			want: map[string]string{
				"FUNC_NAME": "", "SERVICE_NAMESPACE": "", "FUNC_RUNTIME": "python312", "KFN_HANDLER_API": "event",
				"FUNC_TIMEOUT": "180", "FUNC_MEMFILE_MAX": "5242880", "FUNC_PORT": "8080",
				"FUNC_HANDLER": "main", "MOD_NAME": "handler", "KFN_FUNCTION_DIR": "/f",
			},
		},
		"python dependencies, listen fd, names": {
			runtime: "python312",
			cfg: runtimes.Config{
				FunctionDir: "/f", SourceDir: "/s", DepsDir: "/d", ListenFD: 3, Handler: "run", Module: "app", MemoryLimit: "512Mi",
			},
			want: map[string]string{
				"FUNC_NAME": "", "SERVICE_NAMESPACE": "", "FUNC_RUNTIME": "python312", "KFN_HANDLER_API": "event",
				"FUNC_TIMEOUT": "180", "FUNC_MEMFILE_MAX": "104857600", "FUNC_PORT": "8080",
				"FUNC_HANDLER": "run", "MOD_NAME": "app", "KFN_FUNCTION_DIR": "/f",
				"KFN_DEPS_DIR": "/d", "PYTHONPATH": "/d/site-packages", "KFN_LISTEN_FD": "3", "KFN_SOURCE_DIR": "/s",
				"FUNC_MEMORY_LIMIT": "512Mi",
			},
		},
		"nodejs26: Kyma's body limit variable, the sdk module after the libraries": {
			runtime: "nodejs26",
			cfg:     runtimes.Config{FunctionDir: "/f", DepsDir: "/d", LibsDir: "/l", BodyLimit: 3 << 20},
			want: map[string]string{
				"FUNC_NAME": "", "SERVICE_NAMESPACE": "", "FUNC_RUNTIME": "nodejs26", "KFN_HANDLER_API": "request",
				"FUNC_TIMEOUT": "180", "FUNC_BODY_MB_LIMIT": "3", "FUNC_PORT": "8080",
				"HANDLER_FUNC_NAME": "main", "HANDLER_MOD_NAME": "handler", "HANDLER_PATH": "/f", "KFN_FUNCTION_DIR": "/f",
				"KFN_DEPS_DIR": "/d", "KFN_LIBS_DIR": "/l",
				"NODE_PATH": "/d/node_modules:/l/node_modules:/opt/kfn/nodejs/modules",
			},
		},
		"nodejs26 in kfn dev: the sdk module from the host directory": {
			runtime: "nodejs26",
			cfg:     runtimes.Config{FunctionDir: "/f", HostDir: "/cache/host/1234"},
			want: map[string]string{
				"FUNC_NAME": "", "SERVICE_NAMESPACE": "", "FUNC_RUNTIME": "nodejs26", "KFN_HANDLER_API": "request",
				"FUNC_TIMEOUT": "180", "FUNC_BODY_MB_LIMIT": "1", "FUNC_PORT": "8080",
				"HANDLER_FUNC_NAME": "main", "HANDLER_MOD_NAME": "handler", "HANDLER_PATH": "/f", "KFN_FUNCTION_DIR": "/f",
				"NODE_PATH": "/cache/host/1234/nodejs/modules",
			},
		},
		"python314: Kyma's newer names of module and function": {
			runtime: "python314",
			cfg:     runtimes.Config{FunctionDir: "/usr/src/app/function", Handler: "handle", Module: "app"},
			want: map[string]string{
				"FUNC_NAME": "", "SERVICE_NAMESPACE": "", "FUNC_RUNTIME": "python314", "KFN_HANDLER_API": "request",
				"FUNC_TIMEOUT": "180", "FUNC_BODY_MB_LIMIT": "100", "FUNC_PORT": "8080",
				"HANDLER_FUNC_NAME": "handle", "HANDLER_MOD_NAME": "app", "HANDLER_PATH": "/usr/src/app/function",
				"KFN_FUNCTION_DIR": "/usr/src/app/function",
			},
		},
		"python314: body limit in MB, default 100": {
			runtime: "python314",
			cfg:     runtimes.Config{FunctionDir: "/f", DepsDir: "/d"},
			want: map[string]string{
				"FUNC_NAME": "", "SERVICE_NAMESPACE": "", "FUNC_RUNTIME": "python314", "KFN_HANDLER_API": "request",
				"FUNC_TIMEOUT": "180", "FUNC_BODY_MB_LIMIT": "100", "FUNC_PORT": "8080",
				"HANDLER_FUNC_NAME": "main", "HANDLER_MOD_NAME": "handler", "HANDLER_PATH": "/f", "KFN_FUNCTION_DIR": "/f",
				"KFN_DEPS_DIR": "/d", "PYTHONPATH": "/d/site-packages",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vars, err := lookup(t, tc.runtime).Env(tc.cfg)
			require.NoError(t, err)
			assert.Equal(t, tc.want, envMap(vars))
			for i := 1; i < len(vars); i++ {
				assert.Less(t, vars[i-1].Name, vars[i].Name, "sorted by name")
			}
			for _, v := range vars {
				assert.Contains(t, runtimes.PlatformEnvNames(), v.Name)
			}
		})
	}
}

func TestEnvRejectsBadConfig(t *testing.T) {
	tests := map[string]runtimes.Config{
		"no function dir":  {},
		"port too large":   {FunctionDir: "/f", Port: 70000},
		"stdio listen fd":  {FunctionDir: "/f", ListenFD: 1},
		"negative timeout": {FunctionDir: "/f", Timeout: -time.Second},
		"negative limit":   {FunctionDir: "/f", BodyLimit: -1},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := lookup(t, "nodejs22").Env(cfg)
			require.Error(t, err)
			assert.True(t, errors.Is(err, runtimes.ErrInvalidConfig), err)
		})
	}
}
