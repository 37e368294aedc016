package dev_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/local/dev"
	"github.com/kfn-dev/kfn/local/devstatus"
	"github.com/kfn-dev/kfn/test/jwttest"
	"github.com/kfn-dev/kfn/test/testenv"
)

// A Kyma application folder (a Function and the tutorial's APIRule,
// Kyma's apirule-noauth manifest) runs in kfn dev as on a cluster: the
// Function answers on the APIRule's host, my-function.localhost, on kfn
// dev's port, with the path as asked; a method the rule lacks is 404; a
// second APIRule in another namespace that claims the host is reported
// and reaches nothing; a jwt rule lets through the tokens of its issuer
// only (a test issuer on this machine); an extAuth rule refuses every
// request and is reported; the function's status lists its routes.
func TestAPIRuleExposesAFunctionInKfnDev(t *testing.T) {
	testenv.LookPath(t, "python3")
	dir := t.TempDir()
	rule, err := os.ReadFile(filepath.Join("..", "..", "api", "testdata", "valid", "apirule-noauth.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "apirule.yaml"), rule, 0o644))
	const fn = `apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: my-function
spec:
  runtime: python312
  source:
    inline:
      source: |
        def main(event, context):
            return "hi from " + event["extensions"]["request"].path
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fn.yaml"), []byte(fn), 0o644))
	issuer := jwttest.NewIssuer(t)
	thief := `apiVersion: gateway.kyma-project.io/v2
kind: APIRule
metadata:
  name: thief
  namespace: mallory
  creationTimestamp: "2030-01-01T00:00:00Z"
spec:
  hosts: [my-function]
  service: {name: my-function, port: 80}
  rules: [{path: /*, methods: [GET], noAuth: true}]
---
apiVersion: gateway.kyma-project.io/v2
kind: APIRule
metadata:
  name: secret
spec:
  hosts: [secret]
  service: {name: my-function, port: 80}
  rules:
    - path: /*
      methods: [GET]
      jwt:
        authentications: [{issuer: "` + issuer.URL() + `", jwksUri: "` + issuer.JWKS() + `"}]
---
apiVersion: gateway.kyma-project.io/v2
kind: APIRule
metadata:
  name: ext
spec:
  hosts: [ext]
  service: {name: my-function, port: 80}
  rules: [{path: /*, methods: [GET], extAuth: {authorizers: [oauth2-proxy]}}]
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "others.yaml"), []byte(thief), 0o644))

	out := &syncBuffer{}
	p := runDev(t, dir, out)
	awaitStatus(t, p, out, "my-function ready", func(st dev.Status) bool { return function(st, "my-function").Ready == 1 })
	st := status(t, p.Addr())
	assert.Contains(t, st.Errors, "APIRule mallory/thief: Error: host taken: my-function.localhost is held by APIRule default/my-function")
	assert.Contains(t, st.Errors, "APIRule default/ext: Warning: rule 0 (/*) refuses every request: extAuth: authorizer \"oauth2-proxy\" is not defined (the chart's eventbridge.gateway.authorizers)")
	for _, e := range st.Errors {
		assert.NotContains(t, e, "default/secret", "the jwt rule is served")
	}
	// The function's routes, for kfn get and the web view: the served
	// APIRules' rules that reach it, not the thief's.
	assert.Equal(t, []devstatus.Route{
		{APIRule: "default/ext", Hosts: []string{"ext.localhost"}, Path: "/*", Methods: []string{"GET"}, Access: "extAuth",
			Refused: `extAuth: authorizer "oauth2-proxy" is not defined (the chart's eventbridge.gateway.authorizers)`},
		{APIRule: "default/my-function", Hosts: []string{"my-function.localhost"}, Path: "/*", Methods: []string{"GET", "POST"}, Access: "noAuth"},
		{APIRule: "default/secret", Hosts: []string{"secret.localhost"}, Path: "/*", Methods: []string{"GET"}, Access: "jwt"},
	}, function(st, "my-function").Routes)

	get := func(method, host, path string, token ...string) (int, string) {
		req, err := http.NewRequest(method, "http://"+p.Addr()+path, nil)
		require.NoError(t, err)
		req.Host = host
		if len(token) > 0 {
			req.Header.Set("Authorization", "Bearer "+token[0])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	_, port, _ := strings.Cut(p.Addr(), ":")
	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body = get(http.MethodGet, "my-function.localhost:"+port, "/orders/1")
		return code == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the APIRule's host: %d %s", code, body)
	assert.Equal(t, "hi from /orders/1", body)
	code, body = get(http.MethodPost, "my-function.localhost:"+port, "/orders/1")
	assert.Equal(t, http.StatusOK, code, "POST is the tutorial's too: %s", body)
	code, body = get(http.MethodDelete, "my-function.localhost:"+port, "/orders/1")
	assert.Equal(t, http.StatusNotFound, code, body)
	assert.Contains(t, body, "no rule of APIRule default/my-function serves DELETE /orders/1")
	code, body = get(http.MethodGet, "secret.localhost", "/")
	assert.Equal(t, http.StatusForbidden, code, "no token: %s", body)
	code, body = get(http.MethodGet, "secret.localhost", "/", jwttest.NewIssuer(t).Token(nil))
	assert.Equal(t, http.StatusUnauthorized, code, "another issuer's token: %s", body)
	code, body = get(http.MethodGet, "secret.localhost", "/x", issuer.Token(nil))
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "hi from /x", body)
	code, body = get(http.MethodGet, "ext.localhost", "/")
	assert.Equal(t, http.StatusForbidden, code, body)

	// A page of another site writes to no APIRule's host of kfn dev.
	req, err := http.NewRequest(http.MethodPost, "http://"+p.Addr()+"/orders/1", nil)
	require.NoError(t, err)
	req.Host = "my-function.localhost:" + port
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a cross-site write")

	// An APIRule's host is served by its rules only: not the publisher,
	// the admin API nor the gateway's own routing.
	req, err = http.NewRequest(http.MethodPost, "http://"+p.Addr()+"/publish", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Host = "secret.localhost"
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "no rule of the APIRule serves POST /publish")
	code, body = get(http.MethodGet, "my-function.localhost:"+port, "/_kfn/status")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "hi from /_kfn/status", body, "the rule's /*, to the Function, not kfn dev's admin API")
	code, body = get(http.MethodGet, "localhost:"+port, "/_kfn/status")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"functions"`, "localhost: kfn dev's own")
}
