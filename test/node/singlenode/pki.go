package singlenode

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long the cluster's certificates are valid: a cluster
// lives for a test run or a working day, and Up makes new ones every time.
const certValidity = 30 * 24 * time.Hour

// authority is a certificate authority held in memory while the cluster's
// certificates are made.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

// certSpec says what one certificate is for.
type certSpec struct {
	file   string // base name of the .crt and .key files
	cn     string
	orgs   []string
	client bool
	server bool
	dns    []string
	ips    []net.IP
}

// writePKI makes the cluster's certificate authorities, the certificates of
// every component and the service-account key pair under dir. Each call
// makes new keys.
func writePKI(dir string, cfg Config) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	ca, err := newAuthority("kfn-cluster-ca")
	if err != nil {
		return err
	}
	frontProxy, err := newAuthority("kfn-cluster-front-proxy-ca")
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "ca.crt"), ca.pem); err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, "ca.key"), ca.key); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "front-proxy-ca.crt"), frontProxy.pem); err != nil {
		return err
	}
	for _, spec := range clusterCerts(cfg) {
		if err := ca.issue(dir, spec); err != nil {
			return err
		}
	}
	if err := frontProxy.issue(dir, certSpec{file: "front-proxy-client", cn: "front-proxy-client", client: true}); err != nil {
		return err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service account key: %w", err)
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return fmt.Errorf("encode service account public key: %w", err)
	}
	return writeFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
}

// clusterCerts lists the certificates the cluster's CA issues: the API
// server's and the kubelet's serving certificates, and a client certificate
// for every component that calls the API server or the kubelet.
func clusterCerts(cfg Config) []certSpec {
	nodeIP := net.ParseIP(cfg.NodeIP)
	return append(nodeCerts(cfg.firstNode()), []certSpec{
		{
			file: "apiserver", cn: "kube-apiserver", server: true,
			dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
			ips: []net.IP{nodeIP, cfg.apiServiceIP(), net.IPv4(127, 0, 0, 1)},
		},
		{file: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		{file: "admin", cn: "kfn-cluster-admin", orgs: []string{"system:masters"}, client: true},
		{file: "controller-manager", cn: "system:kube-controller-manager", client: true},
		{file: "scheduler", cn: "system:kube-scheduler", client: true},
		{file: "kube-proxy", cn: "system:kube-proxy", client: true},
		// The NetworkPolicy enforcer lists and watches pods, namespaces
		// and NetworkPolicies; addons.yaml grants that to this user.
		{file: "network-policies", cn: NetworkPolicyUser, client: true},
	}...)
}

// nodeCerts are a node's own certificates: its kubelet's serving
// certificate for its name and address, and its kubelet's client
// certificate as system:node:<name>, which the Node authorizer and the
// NodeRestriction admission plugin confine to the node's own objects.
func nodeCerts(n nodeSpec) []certSpec {
	return []certSpec{
		{file: "kubelet", cn: n.Name, server: true, dns: []string{n.Name, "localhost"}, ips: []net.IP{net.ParseIP(n.IP)}},
		{file: "kubelet-client", cn: "system:node:" + n.Name, orgs: []string{"system:nodes"}, client: true},
	}
}

// writeNodePKI writes an extra node's certificates (nodeCerts) under
// dir, signed by the cluster's CA, whose certificate and key are in
// caDir.
func writeNodePKI(caDir, dir string, n nodeSpec) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	ca, err := loadAuthority(caDir)
	if err != nil {
		return err
	}
	for _, spec := range nodeCerts(n) {
		if err := ca.issue(dir, spec); err != nil {
			return err
		}
	}
	return nil
}

// loadAuthority reads the cluster's CA (ca.crt and ca.key) from dir.
func loadAuthority(dir string) (*authority, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("read the cluster CA: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, fmt.Errorf("read the cluster CA's key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("read the cluster CA in %s: not PEM", dir)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse the cluster CA: %w", err)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse the cluster CA's key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("the cluster CA's key in %s cannot sign", dir)
	}
	return &authority{cert: cert, key: signer, pem: certPEM}, nil
}

func newAuthority(cn string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate %s key: %w", cn, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create %s certificate: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse %s certificate: %w", cn, err)
	}
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue writes spec.file.crt and spec.file.key under dir, signed by a.
func (a *authority) issue(dir string, spec certSpec) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate %s key: %w", spec.file, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     spec.dns,
		IPAddresses:  spec.ips,
	}
	if spec.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if spec.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return fmt.Errorf("sign %s certificate: %w", spec.file, err)
	}
	if err := writeFile(filepath.Join(dir, spec.file+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, spec.file+".key"), key)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		// crypto/rand does not fail on Linux; a fixed serial would still
		// make valid certificates.
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return writeFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// writeFile writes data readable by its owner only: the cluster's keys and
// configuration are root's.
func writeFile(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
