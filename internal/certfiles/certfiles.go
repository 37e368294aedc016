package certfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// ErrNoKeyPair is returned when a certificate or key file is not named.
var ErrNoKeyPair = errors.New("TLS needs both a certificate and a key file")

// ServerTLS returns a server TLS configuration with the certificate and
// key in certFile and keyFile, offering nextProtos by ALPN (gRPC needs
// "h2"; an HTTP server "h2" and "http/1.1"). With clientCAFile, every
// client must present a certificate signed by one of its CAs. The files
// are read again whenever one of them changes (see the package doc); the
// error names the file that could not be used.
func ServerTLS(certFile, keyFile, clientCAFile string, nextProtos ...string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, ErrNoKeyPair
	}
	r := &tlsReloader{certFile: certFile, keyFile: keyFile, clientCAFile: clientCAFile, nextProtos: nextProtos}
	if _, err := r.get(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.get()
		},
	}, nil
}

// tlsReloader holds the configuration made of the files last read.
type tlsReloader struct {
	certFile, keyFile, clientCAFile string
	nextProtos                      []string

	mu      sync.Mutex
	cfg     *tls.Config
	modTime time.Time
}

func (r *tlsReloader) get() (*tls.Config, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var latest time.Time
	for _, f := range r.files() {
		fi, err := os.Stat(f)
		if err != nil {
			if r.cfg != nil {
				return r.cfg, nil // keep serving the last good set
			}
			return nil, fmt.Errorf("TLS file: %w", err)
		}
		if fi.ModTime().After(latest) {
			latest = fi.ModTime()
		}
	}
	if r.cfg != nil && !latest.After(r.modTime) {
		return r.cfg, nil
	}
	cfg, err := r.load()
	if err != nil {
		if r.cfg != nil {
			return r.cfg, nil // a half-written rotation: keep the last good set
		}
		return nil, err
	}
	r.cfg, r.modTime = cfg, latest
	return r.cfg, nil
}

func (r *tlsReloader) files() []string {
	if r.clientCAFile == "" {
		return []string{r.certFile, r.keyFile}
	}
	return []string{r.certFile, r.keyFile, r.clientCAFile}
}

func (r *tlsReloader) load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS key pair %s, %s: %w", r.certFile, r.keyFile, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: r.nextProtos}
	if r.clientCAFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(r.clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("read client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("client CA file %s holds no PEM certificate", r.clientCAFile)
	}
	cfg.ClientCAs = pool
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	return cfg, nil
}
