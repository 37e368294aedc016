package cli_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/local/dev"
	"github.com/kfn-dev/kfn/runtimes"
)

// completions runs cobra's hidden __complete command (what the scripts of
// kfn completion call) and returns the candidates and the directive line.
func completions(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	code, out, errOut := run(t, append([]string{"__complete"}, args...)...)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.NotEmpty(t, lines)
	var names []string
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t")
		names = append(names, name)
	}
	return names, lines[len(lines)-1]
}

// fakeDev answers the admin API of kfn dev that completion and dlq read.
func fakeDev(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/_kfn/status":
			_ = json.NewEncoder(w).Encode(dev.Status{Ready: true, Functions: []dev.FunctionStatus{
				{Namespace: "default", Name: "orders"}, {Namespace: "default", Name: "notify"}, {Namespace: "other", Name: "hidden"},
			}})
		case "/_kfn/deadletters":
			_ = json.NewEncoder(w).Encode([]deadletter.Letter{{Sequence: 7, Subscription: "orders", Namespace: "default", Status: 500, Error: "sink answered 500", Attempts: 3}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestCompletion(t *testing.T) {
	addr := fakeDev(t)
	tests := map[string]struct {
		args []string
		want []string
	}{
		"runtimes of init": {args: []string{"init", "--runtime", ""}, want: func() []string {
			var names []string
			for _, rt := range runtimes.All() {
				names = append(names, rt.Name)
			}
			return names
		}()},
		"output forms":               {args: []string{"get", "-o", ""}, want: []string{"table", "json", "yaml"}},
		"function names of invoke":   {args: []string{"invoke", "--addr", addr, ""}, want: []string{"orders", "notify"}},
		"function names of logs, -n": {args: []string{"logs", "--addr", addr, "-n", "other", ""}, want: []string{"hidden"}},
		"one name only":              {args: []string{"invoke", "--addr", addr, "orders", ""}, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, directive := completions(t, tc.args...)
			assert.ElementsMatch(t, tc.want, got)
			assert.Equal(t, ":4", directive, "no file completion")
		})
	}
}

func TestDLQListPrintsEveryForm(t *testing.T) {
	addr := fakeDev(t)
	code, out, errOut := run(t, "dlq", "list", "--addr", addr)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "SEQ")
	assert.Contains(t, out, "orders")
	for _, form := range []string{"json", "yaml"} {
		code, out, errOut = run(t, "dlq", "list", "--addr", addr, "-o", form)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "orders", form)
	}
	var letters []deadletter.Letter
	code, out, _ = run(t, "dlq", "list", "--addr", addr, "-o", "json")
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(out), &letters))
	require.Len(t, letters, 1)
	assert.Equal(t, uint64(7), letters[0].Sequence)
}
