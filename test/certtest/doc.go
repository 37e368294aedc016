// Package certtest writes self-signed server certificates for tests, as a
// kubernetes.io/tls Secret mounted in a pod holds them (tls.crt, tls.key).
package certtest
