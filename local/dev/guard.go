package dev

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/kfn-dev/kfn/local/webview"
)

// guardAdmin protects kfn dev's admin API and web view from the other web
// pages a developer has open (webview.Guard).
func guardAdmin(h http.Handler) http.Handler { return webview.Guard(h, "kfn dev's admin API") }

// guardEvents protects the routes that publish events and call functions
// (the publisher's and the gateway's) from the other web pages a developer
// has open: a request whose Host is a name other than localhost is refused
// (DNS rebinding: the hosts of the project's APIRules, which a page can
// rebind only if its author controls the name, are served before, by
// their rules), and so are the writes guardWrites refuses.
func guardEvents(h http.Handler) http.Handler {
	return webview.LocalOnly(guardWrites(h), "kfn dev answers requests to localhost, an IP address or a host of the project's APIRules")
}

// guardWrites refuses a request that can change something (any method
// but GET, HEAD and OPTIONS) sent by a page of another site, unless that
// page is itself served from this machine (an Origin on localhost or a
// loopback address: the developer's own front end on another port). Tools
// that send no Origin (curl, the kfn command, the functions) are never
// refused.
func guardWrites(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if foreignPage(r) {
				http.Error(w, "cross-origin request refused: kfn dev takes events and calls from this machine's pages and tools only", http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// foreignPage reports whether r was sent by a browser for a page that is
// not served from this machine.
func foreignPage(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		// A browser that sends no Origin still says where the request
		// comes from; a tool says nothing.
		site := r.Header.Get("Sec-Fetch-Site")
		return site == "cross-site" || site == "same-site"
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return true // "null" (a sandboxed or file: page) or garbage
	}
	return !loopbackHost(u.Hostname())
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}
