package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/cli"
	"github.com/kfn-dev/kfn/local/webview"
	"github.com/kfn-dev/kfn/test/logtest"
)

var viewURL = regexp.MustCompile(`: (http://127\.0\.0\.1:\d+/([^/]+)/ui/) `)

// TestViewServesOneNamespaceOfACluster: kfn view serves the web view of a
// namespace of a cluster (a real API server; no kubelet, so no event
// bridge: what it cannot read is among the page's problems) on a loopback
// address under a secret of its own, and refuses what is not its page:
// another path, another host name (DNS rebinding), another site's replay;
// a replay it cannot pass on is answered with why. It does not listen
// beyond this machine.
func TestViewServesOneNamespaceOfACluster(t *testing.T) {
	kc, c := kubeconfig(t)
	ns := namespaceFor(t, c, "view")
	dir := filepath.Join(t.TempDir(), "notify")
	code, _, errOut := run(t, "init", "--runtime", "nodejs22", dir)
	require.Equal(t, 0, code, errOut)
	code, _, errOut = run(t, "apply", "--kubeconfig", kc, "-n", ns, dir)
	require.Equal(t, 0, code, errOut)

	ctx, cancel := context.WithCancel(context.Background())
	var out, errs logtest.Buffer // safe to read while kfn view writes
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"view", "--kubeconfig", kc, "-n", ns}, cli.Streams{In: bytes.NewReader(nil), Out: &out, Err: &errs})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, 0, code, errs.String())
		case <-time.After(10 * time.Second):
			t.Error("kfn view did not stop within 10s")
		}
	})
	var m []string
	require.Eventually(t, func() bool { m = viewURL.FindStringSubmatch(out.String()); return m != nil },
		20*time.Second, 10*time.Millisecond, "kfn view prints its page's address: %s %s", out.String(), errs.String())
	page, secret := m[1], m[2]
	assert.Contains(t, out.String(), "Web view of namespace "+ns+" of the cluster of context")

	do := func(method, url string, header map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, nil)
		require.NoError(t, err)
		for k, v := range header {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}

	code, body := do(http.MethodGet, page+"state", nil)
	require.Equal(t, http.StatusOK, code, body)
	var st webview.State
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.Equal(t, "view", st.Title)
	require.Len(t, st.Functions, 1)
	assert.Equal(t, "notify", st.Functions[0].Name)
	assert.Equal(t, ns, st.Functions[0].Namespace)
	require.Len(t, st.Subscriptions, 1, "the namespace's Subscription")
	assert.Contains(t, strings.Join(st.Problems, "\n"), "no ready eventbridge pod of kfn", "what it cannot read is said")
	code, body = do(http.MethodGet, page, nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `src="app.js"`, "the page")

	root := strings.TrimSuffix(page, secret+"/ui/")
	replay := strings.TrimSuffix(page, "ui/") + "deadletters/"
	for name, tc := range map[string]struct {
		method, url string
		header      map[string]string
		want        int
		says        string
	}{
		"no secret":                     {http.MethodGet, root + "ui/state", nil, http.StatusNotFound, ""},
		"a wrong secret":                {http.MethodGet, root + "x" + secret + "/ui/state", nil, http.StatusNotFound, ""},
		"another host name":             {http.MethodGet, page + "state", map[string]string{"Host": "evil.example"}, http.StatusForbidden, "kfn view answers requests to localhost"},
		"another site's replay":         {http.MethodPost, replay + "1/replay", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "cross-origin request refused"},
		"a replay of no dead letter":    {http.MethodPost, replay + "x/replay", nil, http.StatusBadRequest, "not a sequence number"},
		"a replay with no event bridge": {http.MethodPost, replay + "1/replay", map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusBadGateway, "no ready eventbridge pod"},
		"a replay read":                 {http.MethodGet, replay + "1/replay", nil, http.StatusMethodNotAllowed, ""},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := do(tc.method, tc.url, tc.header)
			assert.Equal(t, tc.want, code, body)
			assert.Contains(t, body, tc.says)
		})
	}
}

// TestViewListensOnThisMachineOnly: an address beyond loopback is a wrong
// call, refused before anything is read.
func TestViewListensOnThisMachineOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:80", "example.com:80", "nonsense"} {
		code, _, errOut := run(t, "view", "--kubeconfig", "/nonexistent", "--listen", addr)
		assert.Equal(t, 2, code, addr)
		assert.Contains(t, errOut, "--listen", addr)
	}
	code, out, errOut := run(t, "view", "--addr", "127.0.0.1:8080")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "kfn dev's web view: http://127.0.0.1:8080/_kfn/ui/\n", out)
}
