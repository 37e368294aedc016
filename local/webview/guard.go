package webview

import (
	"net"
	"net/http"
	"strings"
)

// Guard protects a view and what is served beside it (kfn dev's admin API,
// kfn view's replays) from the other web pages a user has open: a request
// that changes something (a replay) from another origin is refused
// (http.CrossOriginProtection: Sec-Fetch-Site, Origin), and so is any
// request whose Host is a name other than localhost, which is how a page of
// a domain that resolves to 127.0.0.1 (DNS rebinding) would read what is
// served as its own. who names the server in the refusals. The kfn command
// sends neither browser header and names an address, so it is never
// refused.
func Guard(h http.Handler, who string) http.Handler {
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "cross-origin request refused: "+who+" answers only its own web view and the kfn command", http.StatusForbidden)
	}))
	return LocalOnly(csrf.Handler(h), who+" answers requests to localhost or an IP address")
}

// LocalOnly refuses, saying why, a request whose Host is not LocalHost.
func LocalOnly(h http.Handler, why string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !LocalHost(r.Host) {
			http.Error(w, "host "+r.Host+" refused: "+why, http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// LocalHost reports whether a request's Host names the server without a
// DNS name of someone else's: an IP address (the server listens on one),
// or localhost.
func LocalHost(hostport string) bool {
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
