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
// in certFile and keyFile. With clientCAFile, every client must present a
// certificate signed by one of its CAs. The files are read again whenever
// one of them changes, so that a rotated certificate or CA (a Secret
// updated by the chart or cert-manager) is used without a restart; a file
// that is missing or half written keeps the last good set in use. The
// error wraps ErrInvalidOption and names the file that could not be used.
func TLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: TLS needs both a certificate and a key file", ErrInvalidOption)
	}
	r := &tlsReloader{certFile: certFile, keyFile: keyFile, clientCAFile: clientCAFile}
	if _, err := r.get(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.get()
		},
	}, nil
}

// tlsReloader holds the configuration made of the files last read.
type tlsReloader struct {
	certFile, keyFile, clientCAFile string

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
	// gRPC needs HTTP/2 negotiated by ALPN (its clients refuse a server
	// without it).
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}}
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
