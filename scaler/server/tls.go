package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"
)

// TLSConfig returns a server TLS configuration with the certificate and key
// in certFile and keyFile, read again whenever either file changes (so a
// rotated certificate is used without a restart). With clientCAFile, every
// client must present a certificate signed by one of its CAs. The error
// wraps ErrInvalidOption and names the file that could not be used.
func TLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: TLS needs both a certificate and a key file", ErrInvalidOption)
	}
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if _, err := r.get(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.get() },
	}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: read client CA: %w", ErrInvalidOption, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: client CA file %s holds no PEM certificate", ErrInvalidOption, clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

type certReloader struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
}

func (r *certReloader) get() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var latest time.Time
	for _, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			if r.cert != nil {
				return r.cert, nil // keep serving the last good one
			}
			return nil, fmt.Errorf("TLS file: %w", err)
		}
		if fi.ModTime().After(latest) {
			latest = fi.ModTime()
		}
	}
	if r.cert != nil && !latest.After(r.modTime) {
		return r.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		if r.cert != nil {
			return r.cert, nil // a half-written rotation: keep the last good one
		}
		return nil, fmt.Errorf("load TLS key pair %s, %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.modTime = &cert, latest
	return r.cert, nil
}
