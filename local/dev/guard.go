package dev

import (
	"net"
	"net/http"
	"net/url"
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
	return localOnly(csrf.Handler(h), "kfn dev's admin API answers requests to localhost or an IP address")
}

// localOnly refuses, saying why, a request whose Host is not localHost.
func localOnly(h http.Handler, why string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !localHost(r.Host) {
			http.Error(w, "host "+r.Host+" refused: "+why, http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
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

// guardEvents protects the routes that publish events and call functions
// (the publisher's and the gateway's) from the other web pages a developer
// has open: a request whose Host is a name other than localhost is refused
// (DNS rebinding: the hosts of the project's APIRules, which a page can
// rebind only if its author controls the name, are served before, by
// their rules), and so are the writes guardWrites refuses.
func guardEvents(h http.Handler) http.Handler {
	return localOnly(guardWrites(h), "kfn dev answers requests to localhost, an IP address or a host of the project's APIRules")
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
