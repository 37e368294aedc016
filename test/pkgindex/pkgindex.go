package pkgindex

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// The package the index serves, and the credentials it asks for.
const (
	// Package is the package's name, for npm and for pip.
	Package = "kfn-greet"
	// Version is its one version.
	Version = "1.0.0"
	// NPMToken is the bearer token the npm registry requires.
	NPMToken = "s3cr3t-token"
	// PipUser and PipPassword are the basic auth the pip index requires.
	PipUser, PipPassword = "kfn", "pw"
)

// Paths of the two halves on the listener.
const (
	npmPrefix    = "/npm/"
	simplePrefix = "/simple/"
	filesPrefix  = "/files/"
)

// Ecosystem says which half of the index a request asked.
type Ecosystem string

// The two ecosystems the index serves.
const (
	NPM  Ecosystem = "npm"
	PyPI Ecosystem = "pypi"
)

// Index is a running package index. Its methods are safe for concurrent
// use.
type Index struct {
	// URL is http://host:port of the listener.
	URL string

	srv       *http.Server
	tarball   []byte
	wheelName string
	wheel     []byte

	mu       sync.Mutex
	requests map[Ecosystem]map[string]int
}

// Start serves the index on addr (host:port; port 0 picks one) until
// Close. Pods reach it when addr is an address of the node they run on.
func Start(addr string) (*Index, error) {
	tarball, err := npmTarball(map[string]string{
		"package/package.json": fmt.Sprintf(`{"name":%q,"version":%q,"main":"index.js"}`, Package, Version),
		"package/index.js":     "module.exports = { greet: (who) => 'Hi ' + who + ' from " + Package + "' };\n",
	})
	if err != nil {
		return nil, fmt.Errorf("build the npm tarball: %w", err)
	}
	wheelName, wheel, err := buildWheel()
	if err != nil {
		return nil, fmt.Errorf("build the wheel: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("package index: %w", err)
	}
	ix := &Index{
		URL:       "http://" + ln.Addr().String(),
		tarball:   tarball,
		wheelName: wheelName,
		wheel:     wheel,
		requests:  map[Ecosystem]map[string]int{NPM: {}, PyPI: {}},
	}
	ix.srv = &http.Server{Handler: ix.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ix.srv.Serve(ln) }()
	return ix, nil
}

// Close stops the index, waiting up to 5 s for requests under way.
func (ix *Index) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return ix.srv.Shutdown(ctx)
}

// NPMRegistry is the npm registry's URL (with its trailing slash).
func (ix *Index) NPMRegistry() string { return ix.URL + npmPrefix }

// NPMRC is the content of an .npmrc that installs from the registry with
// its token.
func (ix *Index) NPMRC() string {
	u, _ := url.Parse(ix.NPMRegistry())
	return fmt.Sprintf("registry=%s\n//%s%s:_authToken=%s\n", ix.NPMRegistry(), u.Host, u.Path, NPMToken)
}

// PipConf is the content of a pip.conf that installs from the index with
// its credentials; the host is trusted, since the index serves plain HTTP
// (pip trusts only loopback addresses without HTTPS).
func (ix *Index) PipConf() string {
	u, _ := url.Parse(ix.URL)
	return fmt.Sprintf("[global]\nindex-url = http://%s:%s@%s%s\ntrusted-host = %s\n",
		PipUser, PipPassword, u.Host, simplePrefix, u.Hostname())
}

// Wheel returns the wheel's file name and content (for an install from a
// local directory, without the index).
func (ix *Index) Wheel() (name string, data []byte) { return ix.wheelName, ix.wheel }

// Requests returns how many requests for the package name of ecosystem e
// (its metadata or its file, whether or not they presented the
// credentials) the index has had.
func (ix *Index) Requests(e Ecosystem, name string) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.requests[e][name]
}

func (ix *Index) count(e Ecosystem, name string) {
	ix.mu.Lock()
	ix.requests[e][name]++
	ix.mu.Unlock()
}

func (ix *Index) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(npmPrefix, func(w http.ResponseWriter, r *http.Request) {
		// /npm/<name> is the package's document, /npm/<name>/-/<file>
		// its tarball.
		name, file, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, npmPrefix), "/-/")
		ix.count(NPM, name)
		if r.Header.Get("Authorization") != "Bearer "+NPMToken {
			http.Error(w, `{"error":"auth required"}`, http.StatusUnauthorized)
			return
		}
		switch {
		case name == Package && file == "":
			sha1sum := sha1.Sum(ix.tarball)
			sha512sum := sha512.Sum512(ix.tarball)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"name":%[1]q,"dist-tags":{"latest":%[2]q},"versions":{%[2]q:{`+
				`"name":%[1]q,"version":%[2]q,"main":"index.js",`+
				`"dist":{"tarball":"%[3]s%[1]s/-/%[1]s-%[2]s.tgz","shasum":"%[4]s","integrity":"sha512-%[5]s"}}}}`,
				Package, Version, ix.NPMRegistry(), hex.EncodeToString(sha1sum[:]), base64.StdEncoding.EncodeToString(sha512sum[:]))
		case name == Package && file == Package+"-"+Version+".tgz":
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(ix.tarball)
		default:
			http.NotFound(w, r)
		}
	})
	pip := func(name string, serve func(w http.ResponseWriter)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if name == "" {
				name = strings.Trim(strings.TrimPrefix(r.URL.Path, simplePrefix), "/")
			}
			ix.count(PyPI, name)
			if u, p, ok := r.BasicAuth(); !ok || u != PipUser || p != PipPassword {
				w.Header().Set("WWW-Authenticate", `Basic realm="kfn"`)
				http.Error(w, "auth required", http.StatusUnauthorized)
				return
			}
			if serve == nil {
				http.NotFound(w, r)
				return
			}
			serve(w)
		}
	}
	mux.HandleFunc("GET "+simplePrefix+Package+"/", pip(Package, func(w http.ResponseWriter) {
		sum := sha256.Sum256(ix.wheel)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="%s%s#sha256=%x">%s</a></body></html>`, filesPrefix, ix.wheelName, sum, ix.wheelName)
	}))
	mux.HandleFunc("GET "+filesPrefix+ix.wheelName, pip(Package, func(w http.ResponseWriter) { _, _ = w.Write(ix.wheel) }))
	mux.HandleFunc(simplePrefix, pip("", nil))
	return mux
}

// npmTarball is a gzipped tar of files, as npm pack makes.
func npmTarball(files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(1e9, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// buildWheel builds a pure-Python wheel of the package (module kfn_greet).
func buildWheel() (name string, data []byte, err error) {
	module := strings.ReplaceAll(Package, "-", "_")
	distInfo := module + "-" + Version + ".dist-info/"
	files := []struct{ name, body string }{
		{module + "/__init__.py", "def greet(who):\n    return 'Hi ' + who + ' from " + Package + "'\n"},
		{distInfo + "METADATA", "Metadata-Version: 2.1\nName: " + Package + "\nVersion: " + Version + "\n"},
		{distInfo + "WHEEL", "Wheel-Version: 1.0\nGenerator: kfn-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record bytes.Buffer
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			return "", nil, err
		}
		if _, err := w.Write([]byte(f.body)); err != nil {
			return "", nil, err
		}
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString(distInfo + "RECORD,,\n")
	w, err := zw.Create(distInfo + "RECORD")
	if err != nil {
		return "", nil, err
	}
	if _, err := w.Write(record.Bytes()); err != nil {
		return "", nil, err
	}
	if err := zw.Close(); err != nil {
		return "", nil, err
	}
	return module + "-" + Version + "-py3-none-any.whl", buf.Bytes(), nil
}
