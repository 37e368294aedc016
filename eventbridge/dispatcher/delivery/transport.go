package delivery

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/internal/egress"
)

// MaxResponseHeaderBytes bounds the headers of a sink's answer (what
// NewTransport reads of them), as the publisher bounds a request's
// (publisher.MaxHeaderBytes) and JetStream an event's: an answer with more
// is a failed attempt, not 10 MiB (Go's own bound) held per delivery in
// flight.
const MaxResponseHeaderBytes = 64 << 10

// NewTransport returns the HTTP transport the dispatcher uses by default:
// keep-alive connections, many per sink, no proxy, no compression,
// connections only to the addresses policy lets deliveries reach, and
// answers with at most MaxResponseHeaderBytes of headers.
func NewTransport(policy egress.Policy) *http.Transport {
	return &http.Transport{
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: policy.Control}).DialContext,
		MaxIdleConns:           4096,
		MaxIdleConnsPerHost:    512,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true,
		ForceAttemptHTTP2:      false,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
}

// Resolver maps a Subscription's sink to the URL the dispatcher POSTs to.
// In a cluster the sink URL is used as written (cluster DNS resolves it);
// local mode maps http://<fn>.<ns>.svc.cluster.local to a local process.
type Resolver interface {
	// Resolve returns the absolute URL to deliver to. An error is a failed
	// delivery attempt, retried like a network error.
	Resolve(sink v1alpha2.Sink) (string, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(sink v1alpha2.Sink) (string, error)

// Resolve calls f.
func (f ResolverFunc) Resolve(sink v1alpha2.Sink) (string, error) { return f(sink) }

// DirectResolver delivers to the sink URL as written.
var DirectResolver Resolver = ResolverFunc(func(sink v1alpha2.Sink) (string, error) {
	if sink.URL == nil {
		return "", fmt.Errorf("sink %s/%s has no URL", sink.Namespace, sink.Service)
	}
	return sink.URL.String(), nil
})

// maxRedirects bounds the redirects one delivery attempt follows.
const maxRedirects = 3

// do sends a delivery request and follows the sink's 307 and 308
// redirects (the event goes again, method, headers and body) to the same
// scheme, host and port only, up to maxRedirects: a redirect cannot take
// the event, on the event bridge's behalf, out of the sink it was meant for
// (to another namespace, the API server, the bridge's own admin API). Any
// other answer is the sink's answer, judged as any non-2xx status: a
// redirect elsewhere, one too many, and a 301, 302 or 303 (which would
// turn the POST into a GET without the event).
//
// The transport sends the request itself: http.Client.Do copies every
// header of every request in case a redirect needs them, which costs each
// event more than anything else the client does for it.
func (s *Sender) do(req *http.Request) (*http.Response, error) {
	origin := req.URL
	for hops := 0; ; hops++ {
		resp, err := s.cfg.Transport.RoundTrip(req)
		if err != nil {
			// As http.Client says it: Post "url": what went wrong.
			return nil, &url.Error{Op: req.Method[:1] + strings.ToLower(req.Method[1:]), URL: req.URL.Redacted(), Err: err}
		}
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusTemporaryRedirect && resp.StatusCode != http.StatusPermanentRedirect || loc == "" ||
			hops == maxRedirects || req.GetBody == nil {
			return resp, nil
		}
		next, err := req.URL.Parse(loc)
		if err != nil || next.Scheme != origin.Scheme || next.Host != origin.Host {
			return resp, nil // judged as the 3xx it is
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if req, err = redirected(req, next); err != nil {
			return nil, err
		}
	}
}

// redirected is req sent again to u. A transport leaves a request as it
// was but for the body it sent.
func redirected(req *http.Request, u *url.URL) (*http.Request, error) {
	next := req.Clone(req.Context())
	next.URL, next.Host = u, ""
	var err error
	if next.Body, err = req.GetBody(); err != nil {
		return nil, fmt.Errorf("follow redirect to %s: %w", u.Redacted(), err)
	}
	return next, nil
}
