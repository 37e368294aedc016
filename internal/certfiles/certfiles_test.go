package certfiles_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/certfiles"
	"github.com/kfn-dev/kfn/test/certtest"
)

// An HTTPS server on the files answers HTTP/1.1 and HTTP/2 clients, and
// uses a rotated certificate without a restart; files that go missing
// keep the last good one.
func TestServerTLSFollowsItsFiles(t *testing.T) {
	dir := t.TempDir()
	first := certtest.WriteSelfSigned(t, dir, "a.example.com")
	cfg, err := certfiles.ServerTLS(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), "", "h2", "http/1.1")
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(r.Proto)) }))
	srv.TLS = cfg
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	get := func(pool *x509.CertPool, name string, h2 bool) (string, error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: name}, ForceAttemptHTTP2: h2}
		if !h2 {
			tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(srv.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		return resp.Proto, nil
	}
	proto, err := get(first, "a.example.com", false)
	require.NoError(t, err)
	assert.Equal(t, "HTTP/1.1", proto)
	proto, err = get(first, "a.example.com", true)
	require.NoError(t, err)
	assert.Equal(t, "HTTP/2.0", proto)

	second := certtest.WriteSelfSigned(t, dir, "bb.example.com")
	_, err = get(second, "bb.example.com", false)
	require.NoError(t, err, "the rotated certificate, without a restart")
	_, err = get(first, "a.example.com", false)
	assert.Error(t, err, "the old one is no longer served")

	require.NoError(t, os.Remove(filepath.Join(dir, "tls.key")))
	_, err = get(second, "bb.example.com", false)
	assert.NoError(t, err, "a missing file keeps the last good set")

	_, err = certfiles.ServerTLS(filepath.Join(dir, "tls.crt"), "", "")
	assert.ErrorIs(t, err, certfiles.ErrNoKeyPair)
	_, err = certfiles.ServerTLS(filepath.Join(dir, "none.crt"), filepath.Join(dir, "none.key"), "")
	assert.ErrorContains(t, err, "none.crt")
}
