package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/scaler/server"
	"github.com/kfn-dev/kfn/test/scalertest"
)

// TestMutualTLS serves the scaler as the chart does by default (TLS, client
// certificates required, files mounted from a Secret) and calls it as KEDA
// does, through KEDA's generated client: with the CA's client certificate
// it is answered; without a certificate, or with one of another CA, the
// handshake fails before any call. A rotation is used without a restart:
// a CA file that gains a new CA lets its client certificates in, and once
// every file is the new CA's, the old client certificate is refused.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "scaler-ca")
	ca.writeServer(t, dir, "scaler.test")
	writePEM(t, filepath.Join(dir, "ca.crt"), "CERTIFICATE", ca.der)
	cfg, err := server.TLSConfig(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt"))
	require.NoError(t, err)

	n := scalertest.StartNATS(t)
	core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), activity.NewNATSListener(scalertest.Connect(t, n.Server.ClientURL())))
	require.NoError(t, err)
	srv, err := server.New(core, server.WithTLS(cfg))
	require.NoError(t, err)
	addr := serveTLS(t, srv)

	keda := ca.client(t, "keda-operator")
	other := newTestCA(t, "another-ca").client(t, "keda-operator")
	require.NoError(t, call(t, addr, ca.pool(), &keda), "KEDA's certificate is answered")
	require.Error(t, call(t, addr, ca.pool(), nil), "no client certificate: refused")
	require.Error(t, call(t, addr, ca.pool(), &other), "a certificate of another CA: refused")

	// Rotation, first the CA alone (a bundle of the old and the new CA, as
	// a rotation begins), then every file (the new CA's certificates only).
	next := newTestCA(t, "scaler-ca-2")
	rotated := next.client(t, "keda-operator")
	bundle := append(pemOf("CERTIFICATE", ca.der), pemOf("CERTIFICATE", next.der)...)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), bundle, 0o600))
	touch(t, dir, time.Second, "ca.crt")
	require.NoError(t, call(t, addr, ca.pool(), &rotated), "the new CA's client certificate is answered once the CA file has it")
	require.NoError(t, call(t, addr, ca.pool(), &keda), "and the old one still, during the rotation")
	next.writeServer(t, dir, "scaler.test")
	writePEM(t, filepath.Join(dir, "ca.crt"), "CERTIFICATE", next.der)
	touch(t, dir, 2*time.Second, "tls.crt", "tls.key", "ca.crt")
	require.NoError(t, call(t, addr, next.pool(), &rotated), "the new CA's certificate is answered after the rotation")
	require.Error(t, call(t, addr, next.pool(), &keda), "the old CA's certificate is refused after the rotation")
}

// call asks the scaler at addr for a Function's metric spec over TLS, as
// KEDA does,
// trusting roots, with client as its certificate (nil: none).
func call(t *testing.T, addr string, roots *x509.CertPool, client *tls.Certificate) error {
	t.Helper()
	cfg := &tls.Config{RootCAs: roots, ServerName: "scaler.test", MinVersion: tls.VersionTLS12}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pb.NewExternalScalerClient(conn).GetMetricSpec(ctx, &pb.ScaledObjectRef{Namespace: ns, Name: "orders"})
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unavailable {
		return nil // answered (a Function it does not know is not an error of the transport)
	}
	return err
}

func serveTLS(t *testing.T, srv *server.Server) string {
	t.Helper()
	conn, _ := serve(t, srv)
	return conn.Target()
}

// testCA is a certificate authority of a test.
type testCA struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, der: der, key: key}
}

func (c *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.cert)
	return p
}

func (c *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage, dns ...string) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.key)
	require.NoError(t, err)
	return der, key
}

func (c *testCA) writeServer(t *testing.T, dir, name string) {
	t.Helper()
	der, key := c.issue(t, name, x509.ExtKeyUsageServerAuth, name)
	writePEM(t, filepath.Join(dir, "tls.crt"), "CERTIFICATE", der)
	k, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	writePEM(t, filepath.Join(dir, "tls.key"), "PRIVATE KEY", k)
}

func (c *testCA) client(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	der, key := c.issue(t, cn, x509.ExtKeyUsageClientAuth)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pemOf(typ, der), 0o600))
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// touch sets the files' modification time to d from now, so that the
// scaler sees them changed whatever the file system's time resolution.
func touch(t *testing.T, dir string, d time.Duration, files ...string) {
	t.Helper()
	at := time.Now().Add(d)
	for _, f := range files {
		require.NoError(t, os.Chtimes(filepath.Join(dir, f), at, at))
	}
}
