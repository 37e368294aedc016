package depcache_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/depcache"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/test/natstest"
	"github.com/kfn-dev/kfn/test/testcluster"
)

// hash is a dependency hash (64 lowercase hex digits).
const hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// userToken stands for a user's bearer token: the test API server
// authenticates users by client certificate only, and the cache reads
// bearer tokens, so withUser answers for this one token what
// auth.Kubernetes answers for a user's (no namespace).
const userToken = "a-users-bearer-token"

// withUser is the cluster's senders, but for userToken.
type withUser struct{ depcache.Senders }

func (u withUser) SenderNamespace(r *http.Request) (string, error) {
	if r.Header.Get("Authorization") == "Bearer "+userToken {
		return "", nil
	}
	return u.Senders.SenderNamespace(r)
}

// world is what every case shares: a real API server with the
// ServiceAccounts team-a/fn and team-b/fn, whose tokens of kfn's audience
// are tokens[namespace], and a real NATS.
type world struct {
	cluster *testcluster.Cluster
	nats    *natstest.Server
	admin   kubernetes.Interface
	tokens  map[string]string
	js      jetstream.JetStream
	senders *auth.Kubernetes
	writers depcache.Writers
	buckets atomic.Int32

	mu sync.Mutex
	// written are the writer tokens made for (namespace, runtime/hash).
	written map[[2]string]string
}

func newWorld(t *testing.T) *world {
	w := &world{cluster: testcluster.New(t), tokens: map[string]string{}, written: map[[2]string]string{}}
	var err error
	w.admin, err = kubernetes.NewForConfig(w.cluster.Config)
	require.NoError(t, err)
	w.writers, err = depcache.NewTokenReviews(w.admin.AuthenticationV1(), time.Minute)
	require.NoError(t, err)
	for _, ns := range []string{"team-a", "team-b"} {
		w.tokens[ns] = w.token(t, ns, auth.Audience)
	}
	w.senders, err = auth.NewKubernetes(w.admin, auth.KubernetesConfig{})
	require.NoError(t, err)
	w.nats = natstest.Start(t)
	w.js = w.nats.JetStream()
	return w
}

// token makes the ServiceAccount ns/fn (if missing) and a token of it for
// audience.
func (w *world) token(t *testing.T, ns, audience string) string {
	ctx := context.Background()
	_, err := w.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err == nil {
		_, err = w.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "fn"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	tr, err := w.admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "fn", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// writer is the writer token the install container of a pod of ns gets
// for object (runtime/hash): bound to a pod, of the audience of that
// object only.
func (w *world) writer(t *testing.T, ns, object string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if tok, ok := w.written[[2]string{ns, object}]; ok {
		return tok
	}
	runtime, h, _ := strings.Cut(object, "/")
	tok := w.boundToken(t, ns, runtimes.DependencyWriterAudience(runtime, h), true)
	w.written[[2]string{ns, object}] = tok
	return tok
}

// boundToken makes a token of ns/fn for audience ("": the API server's),
// bound to a pod of ns when toPod (as the kubelet asks for a projected
// token).
func (w *world) boundToken(t *testing.T, ns, audience string, toPod bool) string {
	t.Helper()
	ctx := context.Background()
	w.token(t, ns, auth.Audience) // the namespace and ServiceAccount
	spec := authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}
	if audience != "" {
		spec.Audiences = []string{audience}
	}
	if toPod {
		pod, err := w.admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "fn-"},
			Spec:       corev1.PodSpec{ServiceAccountName: "fn", Containers: []corev1.Container{{Name: "fn", Image: "fn"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := w.admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "fn", &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// namespaceOf is the namespace whose identity token token is ("" for
// another token).
func (w *world) namespaceOf(token string) string {
	for ns, tok := range w.tokens {
		if tok == token {
			return ns
		}
	}
	return ""
}

// server is one cache, on a bucket of its own, served over HTTP.
type server struct {
	t       *testing.T
	w       *world
	url     string
	bucket  jetstream.ObjectStoreConfig
	js      jetstream.JetStream
	metrics *prometheus.Registry
}

// serve serves a cache with cfg and senders (nil: the cluster's), whose
// bucket is bounded by bucketBytes (0: 16 MiB; JetStream reserves a
// bucket's bound from the server's storage, which the default's 2 GiB a
// bucket would soon exhaust on a test's disk).
func (w *world) serve(t *testing.T, cfg depcache.Config, senders depcache.Senders, bucketBytes int64, mods ...func(*stream.Config)) *server {
	return w.serveOn(t, w.js, w.bucket(bucketBytes, mods...), cfg, senders)
}

// bucket is the configuration of a new bucket of bucketBytes (0: 16 MiB).
func (w *world) bucket(bucketBytes int64, mods ...func(*stream.Config)) stream.Config {
	sc := stream.DefaultConfig()
	for _, m := range mods {
		m(&sc)
	}
	sc.DependencyBucket = fmt.Sprintf("deps-%d", w.buckets.Add(1))
	sc.DependencyMaxBytes = 16 << 20
	if bucketBytes != 0 {
		sc.DependencyMaxBytes = bucketBytes
	}
	return sc
}

// serveOn serves a cache of sc's bucket through js (an event bridge
// replica), running as the event bridge runs it until the test ends,
// behind wraps (as a host's middleware).
func (w *world) serveOn(t *testing.T, js jetstream.JetStream, sc stream.Config, cfg depcache.Config, senders depcache.Senders,
	wraps ...func(http.Handler) http.Handler) *server {
	if senders == nil {
		senders = withUser{w.senders}
	}
	reg := prometheus.NewRegistry()
	c, err := depcache.New(js, jsstream.DependencyBucketConfig(sc), senders, w.writers, cfg, depcache.WithMetrics(reg),
		depcache.WithLogger(slog.New(slog.NewTextHandler(testWriter{t}, nil))))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx, 10*time.Millisecond); close(done) }()
	var h http.Handler = c
	for _, wrap := range wraps {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	return &server{t: t, w: w, url: srv.URL, bucket: jsstream.DependencyBucketConfig(sc), js: js, metrics: reg}
}

// testWriter writes a cache's log into its test's.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// do sends method to path (after the prefix) with token and body (nil:
// none), and returns the status and the answer's body. A PUT with the
// identity token of a namespace of the world carries the writer token of
// a pod of that namespace for path, as an install container's does.
func (s *server) do(method, path, token string, body io.Reader) (int, []byte) {
	s.t.Helper()
	writer := ""
	if ns := s.w.namespaceOf(token); method == http.MethodPut && ns != "" {
		writer = s.w.writer(s.t, ns, path)
	}
	return s.doWith(method, path, token, writer, body)
}

// doWith is do with writer as the writer token ("": none).
func (s *server) doWith(method, path, token, writer string, body io.Reader) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+depcache.PathPrefix+path, body)
	require.NoError(s.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if writer != "" {
		req.Header.Set(runtimes.DependencyWriterHeader, writer)
	}
	req.Header.Set("Content-Type", depcache.ContentType)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp.StatusCode, b
}

// unread PUTs path with token and a Content-Length of size, and sends no
// body until the answer came (at most 10 s, while the upload timeout is
// longer): its status.
func (s *server) unread(path, token string, size int64) int {
	s.t.Helper()
	never, closeBody := io.Pipe()
	defer closeBody.Close()
	req, err := http.NewRequest(http.MethodPut, s.url+depcache.PathPrefix+path, never)
	require.NoError(s.t, err)
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(runtimes.DependencyWriterHeader, s.w.writer(s.t, s.w.namespaceOf(token), path))
	answered := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	select {
	case code := <-answered:
		return code
	case <-time.After(10 * time.Second):
		return -1 // waiting for the body
	}
}

// objects are the names the bucket holds.
func (s *server) objects() []string {
	s.t.Helper()
	obs, err := s.js.CreateOrUpdateObjectStore(context.Background(), s.bucket)
	require.NoError(s.t, err)
	// Bounded: a List whose watch never sends its end marker would
	// otherwise hang the test (an Eventually's condition included) and
	// hide what it found; nats.go#1610 was such a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		s.t.Logf("listing the bucket did not end in 5 s")
		return []string{"(listing did not end)"}
	}
	require.NoError(s.t, err)
	var names []string
	for _, o := range list {
		names = append(names, o.Name)
	}
	return names
}

// chunks is how many chunks of objects the bucket's stream holds: a
// refused upload leaves none.
func (s *server) chunks() uint64 {
	s.t.Helper()
	st, err := s.js.Stream(context.Background(), "OBJ_"+s.bucket.Bucket)
	require.NoError(s.t, err)
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter("$O."+s.bucket.Bucket+".C.>"))
	require.NoError(s.t, err)
	var n uint64
	for _, count := range info.State.Subjects {
		n += count
	}
	return n
}

// gz is a gzip stream of n random bytes: about n bytes long, for the
// cache only looks at its first two.
func gz(t *testing.T, n int) []byte {
	t.Helper()
	raw := make([]byte, n)
	_, _ = rand.Read(raw)
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.NoCompression)
	require.NoError(t, err)
	_, err = zw.Write(raw)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// exactly is a body of n bytes that the cache takes: gzip's first two
// bytes, then random ones.
func exactly(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	b[0], b[1] = 0x1f, 0x8b
	return b
}

// chunked hides a body's length, so that it is sent without
// Content-Length and counted only as it streams.
type chunked struct{ r io.Reader }

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p) }

func TestDependencyCache(t *testing.T) {
	w := newWorld(t)
	a, b := w.tokens["team-a"], w.tokens["team-b"]
	key := "nodejs22/" + hash

	t.Run("round trip", func(t *testing.T) {
		s := w.serve(t, depcache.DefaultConfig(), nil, 0)
		code, _ := s.do(http.MethodGet, key, a, nil)
		assert.Equal(t, http.StatusNotFound, code, "nothing cached yet")
		body := gz(t, 300<<10)
		code, msg := s.do(http.MethodPut, key, a, bytes.NewReader(body))
		require.Equal(t, http.StatusCreated, code, string(msg))
		code, got := s.do(http.MethodGet, key, a, nil)
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, body, got, "the same bytes back")

		req, _ := http.NewRequest(http.MethodHead, s.url+depcache.PathPrefix+key, nil)
		req.Header.Set("Authorization", "Bearer "+a)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, int64(len(body)), resp.ContentLength)
		assert.Equal(t, depcache.ContentType, resp.Header.Get("Content-Type"))
		assert.Equal(t, []string{"team-a/nodejs22/" + hash}, s.objects(), "stored under the token's namespace")
		assert.Equal(t, uint64(3), s.chunks(), "300 KiB in chunks of 128 KiB")

		assert.Equal(t, 1.0, testutil.ToFloat64(counter(t, s.metrics, "kfn_eventbridge_dependency_cache_stored_objects_total")))
		assert.Equal(t, float64(len(body)), testutil.ToFloat64(counter(t, s.metrics, "kfn_eventbridge_dependency_cache_stored_bytes_total")))
		page := scrape(t, s.metrics)
		assert.Contains(t, page, `kfn_eventbridge_dependency_cache_requests_total{code="201",route="put"} 1`)
		assert.Contains(t, page, `kfn_eventbridge_dependency_cache_requests_total{code="404",route="get"} 1`)
		assert.Contains(t, page, `kfn_eventbridge_dependency_cache_requests_total{code="200",route="head"} 1`)
		assert.Regexp(t, `kfn_eventbridge_dependency_cache_bucket_bytes \d{6}`, page, "the bucket holds the object")
	})

	t.Run("first write wins", func(t *testing.T) {
		s := w.serve(t, depcache.DefaultConfig(), nil, 0)
		first, second := gz(t, 1000), gz(t, 2000)
		code, _ := s.do(http.MethodPut, key, a, bytes.NewReader(first))
		require.Equal(t, http.StatusCreated, code)
		code, _ = s.do(http.MethodPut, key, a, bytes.NewReader(second))
		assert.Equal(t, http.StatusOK, code, "already there")
		_, got := s.do(http.MethodGet, key, a, nil)
		assert.Equal(t, first, got, "unchanged")
	})

	t.Run("another namespace neither reads nor overwrites", func(t *testing.T) {
		s := w.serve(t, depcache.DefaultConfig(), nil, 0)
		ours, theirs := gz(t, 1000), gz(t, 1500)
		code, _ := s.do(http.MethodPut, key, a, bytes.NewReader(ours))
		require.Equal(t, http.StatusCreated, code)
		code, _ = s.do(http.MethodGet, key, b, nil)
		assert.Equal(t, http.StatusNotFound, code, "team-b does not read team-a's")
		code, _ = s.do(http.MethodPut, key, b, bytes.NewReader(theirs))
		assert.Equal(t, http.StatusCreated, code, "team-b stores its own copy")
		_, got := s.do(http.MethodGet, key, a, nil)
		assert.Equal(t, ours, got, "team-a's unchanged")
		_, got = s.do(http.MethodGet, key, b, nil)
		assert.Equal(t, theirs, got)
		assert.ElementsMatch(t, []string{"team-a/nodejs22/" + hash, "team-b/nodejs22/" + hash}, s.objects())
	})

	t.Run("who is not a ServiceAccount the cluster knows gets 401", func(t *testing.T) {
		s := w.serve(t, depcache.DefaultConfig(), nil, 0)
		otherAudience := w.token(t, "team-a", "someone-else")
		for name, token := range map[string]string{"no token": "", "a user": userToken, "made up": "not-a-token-the-cluster-knows",
			"another audience": otherAudience} {
			code, msg := s.do(http.MethodPut, key, token, bytes.NewReader(gz(t, 100)))
			assert.Equal(t, http.StatusUnauthorized, code, "%s: %s", name, msg)
			code, _ = s.do(http.MethodGet, key, token, nil)
			assert.Equal(t, http.StatusUnauthorized, code, name)
		}
		assert.Empty(t, s.objects(), "nothing stored")
		code, _ := s.do(http.MethodGet, key, a, nil)
		assert.Equal(t, http.StatusNotFound, code)
		_, msg := s.do(http.MethodGet, key, userToken, nil)
		assert.Contains(t, string(msg), "the token is not a ServiceAccount's")
		_, msg = s.do(http.MethodGet, key, "", nil)
		assert.Contains(t, string(msg), "send the pod's ServiceAccount token")
	})

	t.Run("only the install step of a pod of the object's own dependency set stores it", func(t *testing.T) {
		s := w.serve(t, depcache.DefaultConfig(), nil, 0)
		other := "python312/" + hash
		apiServers := w.boundToken(t, "team-a", "", true) // as a pod's automounted token
		for name, tc := range map[string]struct{ identity, writer string }{
			"the identity alone (the function container's, or its code's)": {identity: a},
			"a token the API server takes as the writer":                   {identity: a, writer: apiServers},
			"the identity token as the writer":                             {identity: a, writer: a},
			"the writer token of another dependency set":                   {identity: a, writer: w.writer(t, "team-a", other)},
			"the writer token of another namespace's pod":                  {identity: a, writer: w.writer(t, "team-b", key)},
			"a writer token bound to no pod":                               {identity: a, writer: w.boundToken(t, "team-a", runtimes.DependencyWriterAudience("nodejs22", hash), false)},
			"a made-up writer token":                                       {identity: a, writer: "not-a-token-the-cluster-knows"},
		} {
			code, msg := s.doWith(http.MethodPut, key, tc.identity, tc.writer, bytes.NewReader(gz(t, 100)))
			assert.Equal(t, http.StatusForbidden, code, "%s: %s", name, msg)
		}
		code, msg := s.doWith(http.MethodPut, key, w.writer(t, "team-a", key), "", bytes.NewReader(gz(t, 100)))
		assert.Equal(t, http.StatusUnauthorized, code, "the writer token is no identity: %s", msg)
		code, msg = s.doWith(http.MethodPut, key, apiServers, "", bytes.NewReader(gz(t, 100)))
		assert.Equal(t, http.StatusUnauthorized, code, "a pod's API token alone is no identity over plain HTTP: %s", msg)
		_, msg = s.doWith(http.MethodPut, key, a, "", bytes.NewReader(gz(t, 100)))
		assert.Contains(t, string(msg), runtimes.DependencyWriterHeader, "the refusal says what is missing")
		assert.Empty(t, s.objects(), "nothing stored")

		body := gz(t, 100)
		code, msg = s.doWith(http.MethodPut, key, a, w.writer(t, "team-a", key), bytes.NewReader(body))
		require.Equal(t, http.StatusCreated, code, string(msg))
		code, got := s.do(http.MethodGet, key, a, nil)
		assert.Equal(t, http.StatusOK, code, "reads need the identity only")
		assert.Equal(t, body, got)
	})

	t.Run("bad keys are 400", func(t *testing.T) {
		s := w.serve(t, depcache.DefaultConfig(), nil, 0)
		for name, path := range map[string]string{
			"dot dot":           "nodejs22/../../team-b/nodejs22/" + hash,
			"dot dot hash":      "nodejs22/..",
			"escaped slash":     "nodejs22%2F" + hash,
			"escaped in hash":   "nodejs22/" + hash[:62] + "%2F",
			"uppercase hex":     "nodejs22/" + strings.ToUpper(hash),
			"63 digits":         "nodejs22/" + hash[:63],
			"65 digits":         "nodejs22/" + hash + "0",
			"not hex":           "nodejs22/" + hash[:63] + "g",
			"unknown runtime":   "ruby33/" + hash,
			"no hash":           "nodejs22",
			"empty hash":        "nodejs22/",
			"a third segment":   "nodejs22/" + hash + "/x",
			"namespace in path": "team-b/nodejs22/" + hash,
		} {
			code, msg := s.do(http.MethodPut, path, a, bytes.NewReader(gz(t, 100)))
			assert.Equal(t, http.StatusBadRequest, code, "%s: %s", name, msg)
			code, _ = s.do(http.MethodGet, path, a, nil)
			assert.Equal(t, http.StatusBadRequest, code, name)
		}
		code, _ := s.do(http.MethodPost, key, a, nil)
		assert.Equal(t, http.StatusMethodNotAllowed, code)
		code, _ = s.do(http.MethodPut, key, a, strings.NewReader("plain text, not gzip"))
		assert.Equal(t, http.StatusUnsupportedMediaType, code)
		code, _ = s.do(http.MethodPut, key, a, strings.NewReader(""))
		assert.Equal(t, http.StatusUnsupportedMediaType, code, "an empty body")
		assert.Empty(t, s.objects(), "nothing stored")
	})

	t.Run("an object past the bound is 413 and stores nothing", func(t *testing.T) {
		cfg := depcache.DefaultConfig()
		cfg.MaxObjectBytes = 256 << 10
		s := w.serve(t, cfg, nil, 0)
		code, _ := s.do(http.MethodPut, key, a, bytes.NewReader(gz(t, 300<<10)))
		assert.Equal(t, http.StatusRequestEntityTooLarge, code, "told by Content-Length")
		code, _ = s.do(http.MethodPut, key, a, chunked{bytes.NewReader(gz(t, 300<<10))})
		assert.Equal(t, http.StatusRequestEntityTooLarge, code, "counted as it streams")
		assert.Equal(t, http.StatusRequestEntityTooLarge, s.unread(key, a, 300<<10), "answered before the body is read")
		assert.Empty(t, s.objects())
		assert.Zero(t, s.chunks(), "no chunk left behind")
		code, _ = s.do(http.MethodPut, key, a, chunked{bytes.NewReader(exactly(t, 256<<10))})
		assert.Equal(t, http.StatusCreated, code, "the bound itself, as it streams")
		code, _ = s.do(http.MethodPut, "python312/"+hash, a, bytes.NewReader(exactly(t, 256<<10)))
		assert.Equal(t, http.StatusCreated, code, "the bound itself, by Content-Length")
	})

	t.Run("a namespace past its quota is 507 and stores nothing", func(t *testing.T) {
		cfg := depcache.DefaultConfig()
		cfg.MaxNamespaceBytes = 400 << 10
		s := w.serve(t, cfg, nil, 0)
		code, _ := s.do(http.MethodPut, "nodejs22/"+hash, a, bytes.NewReader(exactly(t, 250<<10)))
		require.Equal(t, http.StatusCreated, code)
		other := "python312/" + hash
		code, msg := s.do(http.MethodPut, other, a, bytes.NewReader(gz(t, 250<<10)))
		assert.Equal(t, http.StatusInsufficientStorage, code, "told by Content-Length: %s", msg)
		assert.Contains(t, string(msg), "namespace team-a")
		code, _ = s.do(http.MethodPut, other, a, chunked{bytes.NewReader(gz(t, 250<<10))})
		assert.Equal(t, http.StatusInsufficientStorage, code, "counted as it streams")
		assert.Equal(t, http.StatusInsufficientStorage, s.unread(other, a, 250<<10), "answered before the body is read")
		code, _ = s.do(http.MethodGet, other, a, nil)
		assert.Equal(t, http.StatusNotFound, code)
		assert.Equal(t, []string{"team-a/nodejs22/" + hash}, s.objects())
		code, _ = s.do(http.MethodPut, other, b, bytes.NewReader(gz(t, 250<<10)))
		assert.Equal(t, http.StatusCreated, code, "another namespace has its own quota")
		code, _ = s.do(http.MethodPut, other, a, bytes.NewReader(exactly(t, 100<<10)))
		assert.Equal(t, http.StatusCreated, code, "within what is left")
		code, _ = s.do(http.MethodPut, "nodejs24/"+hash, a, chunked{bytes.NewReader(exactly(t, 25<<10))})
		assert.Equal(t, http.StatusCreated, code, "up to the quota itself, as it streams")
		code, _ = s.do(http.MethodPut, "nodejs26/"+hash, a, bytes.NewReader(exactly(t, 25<<10)))
		assert.Equal(t, http.StatusCreated, code, "up to the quota itself, by Content-Length")
		code, _ = s.do(http.MethodPut, "python314/"+hash, a, bytes.NewReader(exactly(t, 2)))
		assert.Equal(t, http.StatusInsufficientStorage, code, "full")
	})

	t.Run("a finished upload counts once against the quota", func(t *testing.T) {
		cfg := depcache.DefaultConfig()
		cfg.MaxNamespaceBytes = 400 << 10
		cfg.MaxNamespaceUploads = 2
		s := w.serve(t, cfg, nil, 0)
		slow, finish := io.Pipe()
		first := make(chan int, 1)
		go func() {
			code, _ := s.do(http.MethodPut, key, a, slow)
			first <- code
		}()
		_, err := finish.Write(exactly(t, 10<<10)[:10<<10])
		require.NoError(t, err)
		uploads := counter(t, s.metrics, "kfn_eventbridge_dependency_cache_uploads")
		require.Eventually(t, func() bool { return testutil.ToFloat64(uploads) == 1 }, 10*time.Second, 5*time.Millisecond)
		code, _ := s.do(http.MethodPut, "python312/"+hash, a, bytes.NewReader(exactly(t, 150<<10)))
		require.Equal(t, http.StatusCreated, code)
		code, msg := s.do(http.MethodPut, "python314/"+hash, a, bytes.NewReader(exactly(t, 150<<10)))
		assert.Equal(t, http.StatusCreated, code, "150 KiB stored, 10 KiB under way, 150 KiB more: within 400 KiB: %s", msg)
		require.NoError(t, finish.Close())
		assert.Equal(t, http.StatusCreated, <-first)
	})

	t.Run("objects expire after the bucket's max age", func(t *testing.T) {
		s := w.serve(t, depcache.DefaultConfig(), nil, 0, func(c *stream.Config) { c.DependencyMaxAge = time.Second })
		code, _ := s.do(http.MethodPut, key, a, bytes.NewReader(exactly(t, 200<<10)))
		require.Equal(t, http.StatusCreated, code)
		require.Eventually(t, func() bool { code, _ = s.do(http.MethodGet, key, a, nil); return code == http.StatusNotFound },
			20*time.Second, 100*time.Millisecond, "gone after a second")
		require.Eventually(t, func() bool { return len(s.objects()) == 0 && s.chunks() == 0 }, 20*time.Second, 100*time.Millisecond,
			"the stream drops it")
		code, _ = s.do(http.MethodPut, key, a, bytes.NewReader(exactly(t, 100)))
		assert.Equal(t, http.StatusCreated, code, "stored again by the next pod that installs")
	})

	t.Run("a full bucket is 507 and stores nothing", func(t *testing.T) {
		cfg := depcache.DefaultConfig()
		cfg.MaxNamespaceBytes = 1 << 20
		s := w.serve(t, cfg, nil, 512<<10)
		code, msg := s.do(http.MethodPut, key, a, bytes.NewReader(gz(t, 600<<10)))
		assert.Equal(t, http.StatusInsufficientStorage, code, string(msg))
		assert.Empty(t, s.objects())
		assert.Zero(t, s.chunks(), "no chunk left behind")
		code, _ = s.do(http.MethodPut, key, a, bytes.NewReader(gz(t, 100<<10)))
		assert.Equal(t, http.StatusCreated, code, "what fits is stored")
	})

	t.Run("uploads past the bound at once are 429", func(t *testing.T) {
		cfg := depcache.DefaultConfig()
		cfg.MaxUploads = 1
		s := w.serve(t, cfg, nil, 0)
		slow, finish := io.Pipe()
		first := make(chan int, 1)
		go func() {
			code, _ := s.do(http.MethodPut, key, a, slow)
			first <- code
		}()
		_, err := finish.Write(gz(t, 1000)[:500])
		require.NoError(t, err)
		uploads := counter(t, s.metrics, "kfn_eventbridge_dependency_cache_uploads")
		require.Eventually(t, func() bool { return testutil.ToFloat64(uploads) == 1 }, 10*time.Second, 5*time.Millisecond, "the first upload under way")
		code, msg := s.do(http.MethodPut, "python312/"+hash, b, bytes.NewReader(gz(t, 100)))
		assert.Equal(t, http.StatusTooManyRequests, code, string(msg))
		code, _ = s.do(http.MethodGet, key, a, nil)
		assert.Equal(t, http.StatusNotFound, code, "reads are not uploads; nothing stored yet")
		require.NoError(t, finish.Close())
		assert.Equal(t, http.StatusCreated, <-first)
		code, _ = s.do(http.MethodPut, "python312/"+hash, b, bytes.NewReader(gz(t, 100)))
		assert.Equal(t, http.StatusCreated, code, "the slot is free again")
	})

	t.Run("a second upload of the same object at once is 429", func(t *testing.T) {
		s := w.serve(t, depcache.DefaultConfig(), nil, 0)
		slow, finish := io.Pipe()
		first := make(chan int, 1)
		go func() {
			code, _ := s.do(http.MethodPut, key, a, slow)
			first <- code
		}()
		body := gz(t, 1000)
		_, err := finish.Write(body[:500])
		require.NoError(t, err)
		uploads := counter(t, s.metrics, "kfn_eventbridge_dependency_cache_uploads")
		require.Eventually(t, func() bool { return testutil.ToFloat64(uploads) == 1 }, 10*time.Second, 5*time.Millisecond)
		code, _ := s.do(http.MethodPut, key, a, bytes.NewReader(gz(t, 100)))
		assert.Equal(t, http.StatusTooManyRequests, code)
		code, _ = s.do(http.MethodPut, key, b, bytes.NewReader(gz(t, 100)))
		assert.Equal(t, http.StatusCreated, code, "another namespace's object is another object")
		_, err = finish.Write(body[500:])
		require.NoError(t, err)
		require.NoError(t, finish.Close())
		assert.Equal(t, http.StatusCreated, <-first)
		_, got := s.do(http.MethodGet, key, a, nil)
		assert.Equal(t, body, got)
	})

	t.Run("a slow body is cut and stores nothing", func(t *testing.T) {
		cfg := depcache.DefaultConfig()
		cfg.UploadTimeout = 500 * time.Millisecond
		s := w.serve(t, cfg, nil, 0)
		aWriter := w.writer(t, "team-a", key)
		slow, stalled := io.Pipe()
		t.Cleanup(func() { _ = stalled.Close() })
		done := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodPut, s.url+depcache.PathPrefix+key, slow)
			req.Header.Set("Authorization", "Bearer "+a)
			req.Header.Set(runtimes.DependencyWriterHeader, aWriter)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- 0 // the connection closed before the answer was read
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		_, err := stalled.Write(gz(t, 200<<10)[:200<<10]) // a chunk stored, then nothing more
		require.NoError(t, err)
		select {
		case code := <-done:
			assert.Contains(t, []int{http.StatusRequestTimeout, 0}, code)
		case <-time.After(30 * time.Second):
			t.Fatal("the slow upload was not cut")
		}
		uploads := counter(t, s.metrics, "kfn_eventbridge_dependency_cache_uploads")
		// The request is counted when its handler returns, after the
		// upload's gauge dropped.
		require.Eventually(t, func() bool {
			return testutil.ToFloat64(uploads) == 0 &&
				strings.Contains(scrape(t, s.metrics), `kfn_eventbridge_dependency_cache_requests_total{code="408",route="put"} 1`)
		}, 10*time.Second, 5*time.Millisecond, "the upload ended, answered 408")
		assert.Empty(t, s.objects())
		assert.Zero(t, s.chunks(), "no chunk left behind")
	})

	t.Run("a body cut short stores nothing", func(t *testing.T) {
		s := w.serve(t, depcache.DefaultConfig(), nil, 0)
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		require.NoError(t, err)
		body := gz(t, 200<<10)
		_, err = fmt.Fprintf(conn, "PUT %s%s HTTP/1.1\r\nHost: cache\r\nAuthorization: Bearer %s\r\n%s: %s\r\nContent-Length: %d\r\n\r\n",
			depcache.PathPrefix, key, a, runtimes.DependencyWriterHeader, w.writer(t, "team-a", key), len(body))
		require.NoError(t, err)
		_, err = conn.Write(body[:150<<10])
		require.NoError(t, err)
		uploads := counter(t, s.metrics, "kfn_eventbridge_dependency_cache_uploads")
		require.Eventually(t, func() bool { return testutil.ToFloat64(uploads) == 1 }, 10*time.Second, 5*time.Millisecond)
		require.NoError(t, conn.Close())
		require.Eventually(t, func() bool { return testutil.ToFloat64(uploads) == 0 }, 10*time.Second, 5*time.Millisecond)
		assert.Empty(t, s.objects())
		assert.Zero(t, s.chunks(), "no chunk left behind")
	})

	t.Run("a namespace's uploads at once past its share are 429", func(t *testing.T) {
		s := w.serve(t, depcache.DefaultConfig(), nil, 0) // 4 at once, 1 a namespace
		slow, finish := io.Pipe()
		first := make(chan int, 1)
		go func() {
			code, _ := s.do(http.MethodPut, key, a, slow)
			first <- code
		}()
		_, err := finish.Write(gz(t, 1000)[:500])
		require.NoError(t, err)
		uploads := counter(t, s.metrics, "kfn_eventbridge_dependency_cache_uploads")
		require.Eventually(t, func() bool { return testutil.ToFloat64(uploads) == 1 }, 10*time.Second, 5*time.Millisecond, "the first upload under way")
		code, msg := s.do(http.MethodPut, "python312/"+hash, a, bytes.NewReader(gz(t, 100)))
		assert.Equal(t, http.StatusTooManyRequests, code, string(msg))
		assert.Contains(t, string(msg), "namespace team-a")
		code, msg = s.do(http.MethodPut, "python312/"+hash, b, bytes.NewReader(gz(t, 100)))
		assert.Equal(t, http.StatusCreated, code, "another namespace has its own share: %s", msg)
		require.NoError(t, finish.Close())
		assert.Equal(t, http.StatusCreated, <-first)
		code, _ = s.do(http.MethodPut, "python312/"+hash, a, bytes.NewReader(gz(t, 100)))
		assert.Equal(t, http.StatusCreated, code, "the namespace's share is free again")
	})

	t.Run("by default a namespace stores a share of the bucket", func(t *testing.T) {
		s := w.serve(t, depcache.DefaultConfig(), nil, 16<<20) // a 32nd: 512 KiB
		code, msg := s.do(http.MethodPut, key, a, bytes.NewReader(exactly(t, 600<<10)))
		assert.Equal(t, http.StatusInsufficientStorage, code, string(msg))
		assert.Contains(t, string(msg), "may store 524288")
		code, msg = s.do(http.MethodPut, key, a, bytes.NewReader(exactly(t, 500<<10)))
		assert.Equal(t, http.StatusCreated, code, string(msg))
	})

	t.Run("a full bucket makes room from the namespaces past their fair share, least read first", func(t *testing.T) {
		cfg := depcache.DefaultConfig()
		cfg.NamespaceShares = 1 // a namespace may fill the bucket alone: as many at their quota would
		s := w.serve(t, cfg, nil, 1<<20)
		keys := []string{"nodejs22/" + hash, "python312/" + hash, "nodejs24/" + hash}
		for _, k := range keys {
			code, msg := s.do(http.MethodPut, k, a, bytes.NewReader(exactly(t, 300<<10)))
			require.Equal(t, http.StatusCreated, code, string(msg))
		}
		code, _ := s.do(http.MethodGet, keys[0], a, nil) // read since: the second is the least read
		require.Equal(t, http.StatusOK, code)
		code, msg := s.do(http.MethodPut, "python312/"+hash, b, bytes.NewReader(exactly(t, 200<<10)))
		assert.Equal(t, http.StatusCreated, code, "team-b stores, though team-a filled the bucket: %s", msg)
		assert.ElementsMatch(t, []string{"team-a/" + keys[0], "team-a/" + keys[2], "team-b/python312/" + hash}, s.objects(),
			"team-a's least read object made room")
		code, msg = s.do(http.MethodPut, "nodejs26/"+hash, a, bytes.NewReader(exactly(t, 300<<10)))
		assert.Equal(t, http.StatusInsufficientStorage, code, "team-a is past its fair share: nothing of team-b's goes: %s", msg)
		assert.Len(t, s.objects(), 3)
	})

	t.Run("a namespace stores at most its number of objects", func(t *testing.T) {
		cfg := depcache.DefaultConfig()
		cfg.MaxNamespaceObjects = 2
		s := w.serve(t, cfg, nil, 0)
		for _, k := range []string{"nodejs22/" + hash, "python312/" + hash} {
			code, msg := s.do(http.MethodPut, k, a, bytes.NewReader(gz(t, 100)))
			require.Equal(t, http.StatusCreated, code, string(msg))
		}
		code, msg := s.do(http.MethodPut, "nodejs24/"+hash, a, bytes.NewReader(gz(t, 100)))
		assert.Equal(t, http.StatusInsufficientStorage, code, string(msg))
		assert.Contains(t, string(msg), "2 objects")
		code, _ = s.do(http.MethodPut, "nodejs24/"+hash, b, bytes.NewReader(gz(t, 100)))
		assert.Equal(t, http.StatusCreated, code, "another namespace has its own count")
		assert.Len(t, s.objects(), 3)
	})

	t.Run("objects not read for the idle time are removed, a read keeps one", func(t *testing.T) {
		cfg := depcache.DefaultConfig()
		cfg.MaxIdle = 2 * time.Second
		s := w.serve(t, cfg, nil, 0)
		used, unused := "nodejs22/"+hash, "python312/"+hash
		for _, k := range []string{used, unused} {
			code, msg := s.do(http.MethodPut, k, a, bytes.NewReader(gz(t, 1000)))
			require.Equal(t, http.StatusCreated, code, string(msg))
		}
		require.Eventually(t, func() bool {
			code, _ := s.do(http.MethodGet, used, a, nil)
			require.Equal(t, http.StatusOK, code, "read every 200 ms, kept")
			code, _ = s.do(http.MethodHead, unused, a, nil) // a HEAD is no read
			return code == http.StatusNotFound
		}, 20*time.Second, 200*time.Millisecond, "the unread object is removed")
		assert.Equal(t, []string{"team-a/" + used}, s.objects())
		code, _ := s.do(http.MethodPut, unused, a, bytes.NewReader(gz(t, 100)))
		assert.Equal(t, http.StatusCreated, code, "stored again by the next pod that installs")
		if !assert.Eventually(t, func() bool { return len(s.objects()) == 0 }, 20*time.Second, 100*time.Millisecond,
			"unread, both go") {
			t.Fatalf("left in the bucket: %v", s.objects()) // failed once in a cold make test's race phase, both logged removed
		}
		assert.Zero(t, s.chunks())
	})

	t.Run("replicas share one count of a namespace's objects", func(t *testing.T) {
		cfg := depcache.DefaultConfig()
		cfg.MaxNamespaceBytes = 400 << 10
		sc := w.bucket(0)
		one := w.serveOn(t, w.js, sc, cfg, nil)
		code, _ := one.do(http.MethodPut, "nodejs22/"+hash, a, bytes.NewReader(exactly(t, 250<<10)))
		require.Equal(t, http.StatusCreated, code)
		// A replica that starts now reads what the bucket holds before it
		// takes an upload; one running learns it as it is stored (a few
		// milliseconds later).
		two := w.serveOn(t, w.nats.JetStream(), sc, cfg, nil)
		code, msg := two.do(http.MethodPut, "python312/"+hash, a, bytes.NewReader(exactly(t, 250<<10)))
		assert.Equal(t, http.StatusInsufficientStorage, code, "the other replica counts what this one stored: %s", msg)
		code, _ = two.do(http.MethodPut, "python312/"+hash, a, bytes.NewReader(exactly(t, 100<<10)))
		assert.Equal(t, http.StatusCreated, code, "within what is left")
	})

	t.Run("an upload does not list the bucket", func(t *testing.T) {
		sc := w.bucket(64 << 20)
		nc := w.nats.Connect()
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		obs, err := w.js.CreateOrUpdateObjectStore(context.Background(), jsstream.DependencyBucketConfig(sc))
		require.NoError(t, err)
		for i := range 1000 {
			_, err := obs.PutBytes(context.Background(), fmt.Sprintf("team-c/nodejs22/%064x", i), []byte{0x1f, 0x8b})
			require.NoError(t, err)
		}
		s := w.serveOn(t, js, sc, depcache.DefaultConfig(), nil)
		code, msg := s.do(http.MethodGet, key, a, nil) // the cache has read the bucket once
		require.Equal(t, http.StatusNotFound, code, string(msg))
		code, msg = s.do(http.MethodPut, key, b, bytes.NewReader(gz(t, 1000)))
		require.Equal(t, http.StatusCreated, code, string(msg))
		for i, k := range []string{key, "python312/" + hash} {
			before := nc.Stats().InMsgs
			code, msg := s.do(http.MethodPut, k, a, bytes.NewReader(gz(t, 1000)))
			require.Equal(t, http.StatusCreated, code, string(msg))
			assert.Less(t, nc.Stats().InMsgs-before, uint64(50), "upload %d: messages the cache received, not one per object of the bucket", i)
		}
	})

	t.Run("new tokens past their rate are 429", func(t *testing.T) {
		slow, err := auth.NewKubernetes(w.admin, auth.KubernetesConfig{NewTokensPerSecond: 0.01})
		require.NoError(t, err)
		s := w.serve(t, depcache.DefaultConfig(), slow, 0)
		code, _ := s.do(http.MethodGet, key, a, nil)
		assert.Equal(t, http.StatusNotFound, code, "the first new token is reviewed")
		code, _ = s.do(http.MethodPut, key, b, bytes.NewReader(gz(t, 100)))
		assert.Equal(t, http.StatusTooManyRequests, code, "the second waits")
		code, _ = s.do(http.MethodGet, key, a, nil)
		assert.Equal(t, http.StatusNotFound, code, "a token reviewed before passes")
		assert.Empty(t, s.objects())
	})

	t.Run("a watch that never says it read the bucket", func(t *testing.T) { testUnsaidHistory(t, w) })
}

// TestConfigValidate checks that every bound must be set.
func TestConfigValidate(t *testing.T) {
	require.NoError(t, depcache.DefaultConfig().Validate())
	for name, mod := range map[string]func(*depcache.Config){
		"object":         func(c *depcache.Config) { c.MaxObjectBytes = 0 },
		"namespace":      func(c *depcache.Config) { c.MaxNamespaceBytes = -1 },
		"shares":         func(c *depcache.Config) { c.NamespaceShares = 0 },
		"share":          func(c *depcache.Config) { c.MaxNamespaceUploads = 0 },
		"uploads":        func(c *depcache.Config) { c.MaxUploads = 0 },
		"timeout":        func(c *depcache.Config) { c.UploadTimeout = 0 },
		"objects":        func(c *depcache.Config) { c.MaxNamespaceObjects = 0 },
		"idle":           func(c *depcache.Config) { c.MaxIdle = 0 },
		"downloads":      func(c *depcache.Config) { c.MaxDownloads = 0 },
		"download share": func(c *depcache.Config) { c.MaxNamespaceDownloads = 0 },
		"write timeout":  func(c *depcache.Config) { c.DownloadWriteTimeout = 0 },
		"download time":  func(c *depcache.Config) { c.DownloadTimeout = 0 },
	} {
		c := depcache.DefaultConfig()
		mod(&c)
		assert.ErrorIs(t, c.Validate(), depcache.ErrInvalidConfig, name)
	}
}

// counter finds the metric named name in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	return gathered{reg: reg, name: name}
}

// gathered is one metric of a registry, as a collector testutil reads.
type gathered struct {
	reg  *prometheus.Registry
	name string
}

func (g gathered) Describe(chan<- *prometheus.Desc) {}

func (g gathered) Collect(ch chan<- prometheus.Metric) {
	mfs, err := g.reg.Gather()
	if err != nil {
		return
	}
	for _, mf := range mfs {
		if mf.GetName() != g.name {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(g.name, "", nil, nil), prometheus.UntypedValue, v)
		}
	}
}

// scrape is the registry's metrics in the text format.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	var b strings.Builder
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name := mf.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			fmt.Fprintf(&b, "%s %v\n", name, m.GetCounter().GetValue()+m.GetGauge().GetValue())
		}
	}
	return b.String()
}
