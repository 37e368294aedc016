package server

import (
	"crypto/tls"
	"fmt"

	"github.com/kfn-dev/kfn/internal/certfiles"
)

// TLSConfig returns the scaler's server TLS configuration with the
// certificate and key in certFile and keyFile, HTTP/2 offered by ALPN (gRPC
// clients refuse a server without it). With clientCAFile, every client
// must present a certificate signed by one of its CAs. The files are read
// again whenever one of them changes (package certfiles). The error wraps
// ErrInvalidOption and names the file that could not be used.
func TLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cfg, err := certfiles.ServerTLS(certFile, keyFile, clientCAFile, "h2")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return cfg, nil
}
