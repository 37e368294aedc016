package depcache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/depcache"
)

// largeObject is more than a loopback connection buffers (Linux's
// tcp_wmem allows a sender 4 MiB by default, and stalled sets a
// receiver's 128 KiB), so that a download its client does not read
// blocks in a write of the server.
const largeObject = 12 << 20

// downloadsConfig fits a largeObject in a namespace's quota, with the
// downloads' bounds mods set.
func downloadsConfig(mods ...func(*depcache.Config)) depcache.Config {
	cfg := depcache.DefaultConfig()
	cfg.MaxNamespaceBytes = 2 * largeObject
	cfg.DownloadWriteTimeout = time.Minute // the stalls last the whole case, but where a case shortens it
	for _, m := range mods {
		m(&cfg)
	}
	return cfg
}

// stalled GETs path with token over a connection that reads nothing of
// the answer, as a pod that stopped reading: its download blocks once the
// connection's buffers are full. It is closed when the test ends.
func (s *server) stalled(path, token string) net.Conn {
	s.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	require.NoError(s.t, err)
	s.t.Cleanup(func() { _ = conn.Close() })
	// Small, but not below loopback's segment (64 KiB), which would make
	// what the server sent crawl out once the client reads again.
	require.NoError(s.t, conn.(*net.TCPConn).SetReadBuffer(128<<10))
	_, err = fmt.Fprintf(conn, "GET %s%s HTTP/1.1\r\nHost: cache\r\nAuthorization: Bearer %s\r\n\r\n", depcache.PathPrefix, path, token)
	require.NoError(s.t, err)
	return conn
}

// downloading is how many downloads hold a consumer of the bucket's
// chunks (the index's watch reads only the objects' descriptions).
func (s *server) downloading() int {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, "OBJ_"+s.bucket.Bucket)
	require.NoError(s.t, err)
	consumers := st.ListConsumers(ctx)
	n := 0
	for info := range consumers.Info() {
		if strings.HasPrefix(info.Config.FilterSubject, "$O."+s.bucket.Bucket+".C.") {
			n++
		}
	}
	require.NoError(s.t, consumers.Err())
	return n
}

// get GETs path with token, and returns the answer with its body read.
func (s *server) get(path, token string) (*http.Response, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url+depcache.PathPrefix+path, nil)
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp, body
}

// text is the start of an answer's body, to name in a message (a
// refusal's text, or what an object's first bytes look like).
func text(body []byte) string { return string(body[:min(len(body), 200)]) }

// noDeadlines hides the connection from http.ResponseController, as a
// middleware's writer without Unwrap does.
type noDeadlines struct{ http.ResponseWriter }

func TestDownloadBounds(t *testing.T) {
	w := newWorld(t)
	a, b := w.tokens["team-a"], w.tokens["team-b"]
	key := "nodejs22/" + hash
	// stores puts a largeObject of team-a's and a small one of team-b's,
	// and returns them.
	stores := func(t *testing.T, s *server) (ours, theirs []byte) {
		ours, theirs = exactly(t, largeObject), gz(t, 100<<10)
		code, msg := s.do(http.MethodPut, key, a, bytes.NewReader(ours))
		require.Equal(t, http.StatusCreated, code, string(msg))
		code, msg = s.do(http.MethodPut, key, b, bytes.NewReader(theirs))
		require.Equal(t, http.StatusCreated, code, string(msg))
		return ours, theirs
	}

	t.Run("a namespace's downloads at once past its share are 429, another's are served", func(t *testing.T) {
		s := w.serve(t, downloadsConfig(func(c *depcache.Config) { c.MaxNamespaceDownloads = 2 }), nil, 4*largeObject)
		_, theirs := stores(t, s)
		s.stalled(key, a)
		s.stalled(key, a)
		require.Eventually(t, func() bool { return s.downloading() == 2 }, 10*time.Second, 5*time.Millisecond, "team-a's two downloads under way")

		resp, msg := s.get(key, a)
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the third of team-a's: %q", text(msg))
		assert.Equal(t, "1", resp.Header.Get("Retry-After"))
		assert.Contains(t, text(msg), "namespace team-a has 2 downloads under way")
		assert.Equal(t, 2, s.downloading(), "the refused download opened no consumer")

		resp, got := s.get(key, b)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "team-b has its own share")
		assert.Equal(t, theirs, got)
		assert.Contains(t, scrape(t, s.metrics), `kfn_eventbridge_dependency_cache_requests_total{code="429",route="get"} 1`)
		// team-b's download ends once its handler returns, which can be
		// after its client read the last byte (seen under -race's load).
		require.Eventually(t, func() bool {
			return strings.Contains(scrape(t, s.metrics), "kfn_eventbridge_dependency_cache_downloads 2\n")
		}, 5*time.Second, 5*time.Millisecond, "team-a's two stalled downloads are the ones under way")
	})

	t.Run("downloads at once past the server's bound are 429", func(t *testing.T) {
		s := w.serve(t, downloadsConfig(func(c *depcache.Config) { c.MaxDownloads, c.MaxNamespaceDownloads = 2, 2 }), nil, 4*largeObject)
		stores(t, s)
		s.stalled(key, a)
		s.stalled(key, a)
		require.Eventually(t, func() bool { return s.downloading() == 2 }, 10*time.Second, 5*time.Millisecond, "team-a's two downloads under way")
		resp, msg := s.get(key, b)
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "team-b's, within its share: %q", text(msg))
		assert.Equal(t, "1", resp.Header.Get("Retry-After"))
		assert.Contains(t, text(msg), "too many downloads at once (2)")
	})

	t.Run("a download whose client stops reading is ended within the write timeout, and its slot is free again", func(t *testing.T) {
		s := w.serve(t, downloadsConfig(func(c *depcache.Config) {
			c.MaxNamespaceDownloads = 1
			c.DownloadWriteTimeout = 500 * time.Millisecond
		}), nil, 4*largeObject)
		ours, _ := stores(t, s)
		conn := s.stalled(key, a)
		require.Eventually(t, func() bool { return s.downloading() == 1 }, 10*time.Second, 5*time.Millisecond, "the download under way")
		require.Eventually(t, func() bool {
			return s.downloading() == 0 && strings.Contains(scrape(t, s.metrics), `kfn_eventbridge_dependency_cache_requests_total{code="200",route="get"} 1`)
		}, 5*time.Second, 10*time.Millisecond, "the stalled download ended (its consumer released) within 10 write timeouts")
		assert.Contains(t, scrape(t, s.metrics), "kfn_eventbridge_dependency_cache_downloads 0")

		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		n, err := io.Copy(io.Discard, conn)
		var netErr net.Error
		assert.False(t, errors.As(err, &netErr) && netErr.Timeout(), "the server closed the connection: %v", err)
		assert.Less(t, n, int64(len(ours)), "the stalled client had only what was sent before the timeout")

		resp, got := s.get(key, a)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "the namespace's slot is free again")
		assert.Equal(t, ours, got)
	})

	t.Run("without write deadlines a stalled download still releases its consumer, and holds its slot until its connection ends", func(t *testing.T) {
		hide := func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { h.ServeHTTP(noDeadlines{rw}, r) })
		}
		s := w.serveOn(t, w.js, w.bucket(4*largeObject), downloadsConfig(func(c *depcache.Config) {
			c.MaxNamespaceDownloads = 1
			c.DownloadWriteTimeout = 500 * time.Millisecond
		}), nil, hide)
		ours, _ := stores(t, s)
		conn := s.stalled(key, a)
		require.Eventually(t, func() bool { return s.downloading() == 1 }, 10*time.Second, 5*time.Millisecond, "the download under way")
		require.Eventually(t, func() bool { return s.downloading() == 0 }, 5*time.Second, 10*time.Millisecond,
			"the stalled download's consumer released within 10 write timeouts")
		resp, msg := s.get(key, a)
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the write still blocks: %q", text(msg))

		require.NoError(t, conn.Close())
		require.Eventually(t, func() bool {
			return strings.Contains(scrape(t, s.metrics), "kfn_eventbridge_dependency_cache_downloads 0")
		}, 10*time.Second, 10*time.Millisecond, "the download ended with its connection")
		resp, got := s.get(key, a)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, ours, got)
	})
}
