package certfiles_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/certfiles"
)

// writeSelfSigned writes a self-signed certificate for host and its key
// to dir's tls.crt and tls.key, and returns the certificate's pool.
func writeSelfSigned(t *testing.T, dir, host string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	// The key first, then the certificate: a reader between the two
	// writes sees a pair that does not match, and keeps the last good one.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	later := time.Now().Add(time.Duration(len(host)) * time.Second) // a later mtime than the set before, however fast the writes
	require.NoError(t, os.Chtimes(filepath.Join(dir, "tls.crt"), later, later))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// An HTTPS server on the files answers HTTP/1.1 and HTTP/2 clients, and
// uses a rotated certificate without a restart; files that go missing
// keep the last good one.
func TestServerTLSFollowsItsFiles(t *testing.T) {
	dir := t.TempDir()
	first := writeSelfSigned(t, dir, "a.example.com")
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

	second := writeSelfSigned(t, dir, "bb.example.com")
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
