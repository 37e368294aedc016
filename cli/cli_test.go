package cli_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/manifest"
	"github.com/kfn-dev/kfn/cli"
	"github.com/kfn-dev/kfn/local/project"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = cli.Main(context.Background(), args, cli.Streams{In: bytes.NewReader(nil), Out: &out, Err: &errOut})
	return code, out.String(), errOut.String()
}

func TestInitWritesFoldersKfnDevLoads(t *testing.T) {
	root := t.TempDir()
	for _, rt := range []string{"nodejs22", "nodejs24", "nodejs26", "python312", "python314"} {
		code, out, errOut := run(t, "init", "--runtime", rt, "--dir", filepath.Join(root, "fn-"+rt), "fn-"+rt)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "Wrote "+rt+" function")
	}
	a, err := manifest.NewAdmitter()
	require.NoError(t, err)
	p, err := project.Load(context.Background(), root, a)
	require.NoError(t, err)
	require.Empty(t, p.Invalid)
	require.Len(t, p.Functions, 5)
	require.Len(t, p.Subscriptions, 5)
	for _, fn := range p.Functions {
		assert.True(t, fn.ScalesToZero())
		assert.NotEmpty(t, fn.Spec.Source.Inline.Source)
	}
	assert.Equal(t, []string{"fn-nodejs22.requested.v1"}, p.Subscriptions[0].Spec.Types)
}

func TestInitRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("x"), 0o644))
	tests := map[string]struct {
		args     []string
		code     int
		contains string
	}{
		"no name":         {args: []string{"init"}, code: 2, contains: "needs the function's NAME"},
		"bad name":        {args: []string{"init", "Bad_Name"}, code: 2, contains: `function name "Bad_Name"`},
		"unknown runtime": {args: []string{"init", "--runtime", "go1", "x"}, code: 2, contains: `runtime "go1": use one of`},
		"unknown flag":    {args: []string{"init", "--nope", "x"}, code: 2, contains: "unknown flag: --nope"},
		"non-empty dir":   {args: []string{"init", "--dir", dir, "x"}, code: 1, contains: "is not empty"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := run(t, tt.args...)
			assert.Equal(t, tt.code, code)
			assert.Contains(t, errOut, tt.contains)
		})
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "a refused init writes nothing")
}

func TestDevRefusesBadLogFlags(t *testing.T) {
	dir := t.TempDir()
	tests := map[string]struct {
		args     []string
		contains string
	}{
		"level":  {args: []string{"dev", "--log-level", "loud", dir}, contains: "--log-level: invalid log level"},
		"format": {args: []string{"dev", "--log-format", "yaml", dir}, contains: "--log-format: invalid log format"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := run(t, tt.args...)
			assert.Equal(t, 2, code)
			assert.Contains(t, errOut, tt.contains)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, entries, "nothing started")
		})
	}
}

func TestPublishSendsABinaryCloudEvent(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	code, out, errOut := run(t, "publish", "--addr", srv.URL, "--type", "order.created.v1", "--source", "shop", "--id", "id-1", "--data", `{"id":42}`)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "/publish", got.URL.Path)
	assert.Equal(t, "order.created.v1", got.Header.Get("Ce-Type"))
	assert.Equal(t, "shop", got.Header.Get("Ce-Source"))
	assert.Equal(t, "id-1", got.Header.Get("Ce-Id"))
	assert.Equal(t, "1.0", got.Header.Get("Ce-Specversion"))
	assert.Equal(t, "application/json", got.Header.Get("Content-Type"))
	assert.JSONEq(t, `{"id":42}`, string(body))
	assert.Contains(t, out, "published id-1")

	code, _, errOut = run(t, "publish", "--addr", srv.URL, "--type", "t.v1", "--structured", "--data", `{}`)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "application/cloudevents+json", got.Header.Get("Content-Type"))
}

func TestPublishReportsWhyItFailed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "type: must not be empty", http.StatusBadRequest)
	}))
	defer srv.Close()
	code, _, errOut := run(t, "publish", "--addr", srv.URL, "--type", "x.v1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "the publisher refused the event: 400 Bad Request: type: must not be empty")

	code, _, errOut = run(t, "publish", "--addr", srv.URL, "--type", "x.v1", "--data", "{not json")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--data is not valid JSON")

	code, _, errOut = run(t, "publish", "--addr", srv.URL)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--type is required")

	code, _, errOut = run(t, "publish", "--addr", "http://127.0.0.1:1", "--type", "x.v1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is 'kfn dev' running?")
}

func TestInvokeCallsTheGateway(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set(cli.ColdStartHeader, "true")
		if r.URL.Path == "/shop/broken/" {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()

	code, out, errOut := run(t, "invoke", "--addr", srv.URL, "-n", "shop", "orders", "--data", `{"a":1}`, "--path", "items", "-H", "X-Test: yes", "-v")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `{"ok":true}`, out)
	assert.Equal(t, http.MethodPost, got.Method)
	assert.Equal(t, "/shop/orders/items", got.URL.Path)
	assert.Equal(t, "yes", got.Header.Get("X-Test"))
	assert.Contains(t, errOut, "X-Kfn-Cold-Start: true")

	code, _, errOut = run(t, "invoke", "--addr", srv.URL, "-n", "shop", "broken")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "broken answered 500 Internal Server Error")

	code, _, errOut = run(t, "invoke", "--addr", srv.URL, "x", "-H", "no-colon")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "want 'Name: value'")
}

func TestVersionAndHelp(t *testing.T) {
	code, out, _ := run(t, "version")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "kfn ")
	code, out, _ = run(t, "--help")
	require.Equal(t, 0, code)
	for _, c := range []string{"init", "publish", "invoke", "version"} {
		assert.Contains(t, out, c)
	}
}

// TestInvokeSaysWhenItWaits: an answer that takes over a second (a cold
// start) is announced on stderr, a quick one is not.
func TestInvokeSaysWhenItWaits(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/default/slow/" {
			time.Sleep(1500 * time.Millisecond) // the gateway holding a request during a cold start
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	code, out, errOut := run(t, "invoke", "--addr", srv.URL, "slow")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "ok", out)
	assert.Contains(t, errOut, "waiting for default/slow")
	code, _, errOut = run(t, "invoke", "--addr", srv.URL, "fast")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, errOut, "waiting")
}
