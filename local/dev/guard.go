package dev

import (
	"net"
	"net/http"
	"strings"
)

// guardAdmin protects kfn dev's admin API and web view from the other web
// pages a developer has open: a request that changes something (replaying
// dead letters) from another origin is refused (http.CrossOriginProtection:
// Sec-Fetch-Site, Origin), and so is any request whose Host is a name
// other than localhost, which is how a page of a domain that resolves to
// 127.0.0.1 (DNS rebinding) would read the status and logs as its own. The
// kfn command sends neither browser header and names an address, so it is
// never refused.
func guardAdmin(h http.Handler) http.Handler {
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "cross-origin request refused: kfn dev's admin API answers only its own web view and the kfn command", http.StatusForbidden)
	}))
	protected := csrf.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !localHost(r.Host) {
			http.Error(w, "host "+r.Host+" refused: kfn dev's admin API answers requests to localhost or an IP address", http.StatusForbidden)
			return
		}
		protected.ServeHTTP(w, r)
	})
}

// localHost reports whether a request's Host names kfn dev without a DNS
// name of someone else's: an IP address (kfn dev listens on one), or
// localhost.
func localHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return true // HTTP/1.0 without Host
	}
	if net.ParseIP(host) != nil {
		return true
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}
