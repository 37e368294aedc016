package chart_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"

	"github.com/kfn-dev/kfn/test/testcluster"
)

// apiCall is one request a component made to the API server, as the API
// server's authorizer sees it.
type apiCall struct {
	Verb        string
	Group       string
	Resource    string // with "/subresource" when there is one
	Namespace   string // "" for cluster-wide requests
	Name        string
	Code        int // the API server's answer
	NonResource bool
	Path        string
}

func (c apiCall) String() string {
	if c.NonResource {
		return fmt.Sprintf("%s %s -> %d", c.Verb, c.Path, c.Code)
	}
	g := c.Group
	if g == "" {
		g = "core"
	}
	return fmt.Sprintf("%s %s/%s ns=%q name=%q -> %d", c.Verb, g, c.Resource, c.Namespace, c.Name, c.Code)
}

// recorder keeps every call that went through a proxy.
type recorder struct {
	mu    sync.Mutex
	calls []apiCall
}

func (r *recorder) add(c apiCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// Calls returns the calls so far.
func (r *recorder) Calls() []apiCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]apiCall(nil), r.calls...)
}

// has reports whether a successful call matched.
func (r *recorder) has(verb, resource, namespace string) bool {
	for _, c := range r.Calls() {
		if c.Verb == verb && c.Resource == resource && c.Namespace == namespace && c.Code < 300 {
			return true
		}
	}
	return false
}

var requestInfos = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// recordingTransport forwards to the API server as the impersonated user
// and records each request with the API server's answer.
type recordingTransport struct {
	next http.RoundTripper
	rec  *recorder
}

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	info, err := requestInfos.NewRequestInfo(req)
	if err != nil {
		return nil, fmt.Errorf("parse request %s %s: %w", req.Method, req.URL.Path, err)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	res := info.Resource
	if info.Subresource != "" {
		res += "/" + info.Subresource
	}
	t.rec.add(apiCall{Verb: info.Verb, Group: info.APIGroup, Resource: res, Namespace: info.Namespace, Name: info.Name,
		Code: resp.StatusCode, NonResource: !info.IsResourceRequest, Path: info.Path})
	return resp, nil
}

// serviceAccountProxy serves the API server of c on a local plain-HTTP
// address, as the ServiceAccount namespace/name (with the groups a real
// ServiceAccount token carries), recording every call. A program given the
// returned kubeconfig has exactly that ServiceAccount's permissions.
func serviceAccountProxy(t testing.TB, c *testcluster.Cluster, namespace, name string) (kubeconfig string, rec *recorder) {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	rt, err := rest.TransportFor(cfg)
	require.NoError(t, err)
	target, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	rec = &recorder{}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Del("Authorization")
		},
		Transport:     recordingTransport{next: rt, rec: rec},
		FlushInterval: -1, // watches stream
		// A component ending its watches cancels requests: not an error.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
  - name: proxy
    cluster:
      server: %s
users:
  - name: %s
    user: {}
contexts:
  - name: proxy
    context:
      cluster: proxy
      user: %s
current-context: proxy
`, srv.URL, name, name)), 0o600))
	return kubeconfig, rec
}

// summary lists distinct calls, for failure messages.
func summary(calls []apiCall) string {
	seen := map[string]bool{}
	var out []string
	for _, c := range calls {
		c.Name = ""
		s := c.String()
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
