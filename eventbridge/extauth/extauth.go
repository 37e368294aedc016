package extauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kfn-dev/kfn/internal/seats"
)

// Authorizer is one external authorizer, as the chart defines it.
type Authorizer struct {
	// Name is what an APIRule's extAuth.authorizers says.
	Name string `json:"name"`
	// URL is the service's, http(s); its path is put before the request's.
	URL string `json:"url"`
	// Timeout bounds one check. Default 5 s.
	Timeout Duration `json:"timeout,omitempty"`
	// IncludeRequestHeaders are the request's headers sent to it. Default
	// Authorization and Cookie.
	IncludeRequestHeaders []string `json:"includeRequestHeaders,omitempty"`
	// HeadersToUpstream are the headers of its allowing answer set on the
	// request that goes on to the Function.
	HeadersToUpstream []string `json:"headersToUpstream,omitempty"`
	// HeadersToDownstreamOnDeny are the headers of a refusing answer the
	// client gets. Default Location, Set-Cookie, WWW-Authenticate and
	// Content-Type.
	HeadersToDownstreamOnDeny []string `json:"headersToDownstreamOnDeny,omitempty"`
}

// Duration is a time.Duration written as Go writes one ("5s").
type Duration time.Duration

// UnmarshalJSON reads "5s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MaxDenyBody bounds the body of a refusing answer passed to the client.
const MaxDenyBody = 64 << 10

// Defaults of Config.
const (
	DefaultTimeout              = 5 * time.Second
	DefaultInFlightPerNamespace = 64
	DefaultInFlight             = 1024
)

// ParseAuthorizers reads the authorizers of the -apirule-authorizers flag:
// a JSON list. Names must be unique, URLs http(s).
func ParseAuthorizers(s string) ([]Authorizer, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var as []Authorizer
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&as); err != nil {
		return nil, fmt.Errorf("authorizers: %w", err)
	}
	seen := map[string]bool{}
	for i, a := range as {
		if a.Name == "" || seen[a.Name] {
			return nil, fmt.Errorf("authorizers[%d]: a name of its own is needed", i)
		}
		seen[a.Name] = true
		u, err := url.Parse(a.URL)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("authorizers[%d] (%s): url %q is not http(s)", i, a.Name, a.URL)
		}
	}
	return as, nil
}

// Checker asks authorizers. Safe for concurrent use.
type Checker struct {
	by     map[string]*authorizer
	client *http.Client
	seats  *seats.Gate
}

type authorizer struct {
	Authorizer
	base                *url.URL
	timeout             time.Duration
	include, up, onDeny []string
}

// Config bounds a Checker. Zero values take the defaults.
type Config struct {
	// InFlightPerNamespace bounds the checks of one namespace's requests
	// at once, InFlight all of them; past them a check waits, within its
	// timeout.
	InFlightPerNamespace, InFlight int
	// Transport replaces the checks' transport (tests).
	Transport http.RoundTripper
}

// New returns a Checker of authorizers.
func New(authorizers []Authorizer, cfg Config) *Checker {
	if cfg.InFlightPerNamespace <= 0 {
		cfg.InFlightPerNamespace = DefaultInFlightPerNamespace
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = DefaultInFlight
	}
	rt := cfg.Transport
	if rt == nil {
		rt = &http.Transport{
			DialContext:            (&net.Dialer{Timeout: DefaultTimeout}).DialContext,
			MaxIdleConnsPerHost:    64,
			IdleConnTimeout:        90 * time.Second,
			MaxResponseHeaderBytes: 64 << 10,
		}
	}
	c := &Checker{by: map[string]*authorizer{}, seats: seats.New(cfg.InFlightPerNamespace, seats.WithTotal(cfg.InFlight)),
		client: &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, a := range authorizers {
		base, err := url.Parse(a.URL)
		if err != nil {
			continue // ParseAuthorizers refused it
		}
		z := &authorizer{Authorizer: a, base: base, timeout: time.Duration(a.Timeout),
			include: canonical(a.IncludeRequestHeaders, "Authorization", "Cookie"),
			up:      canonical(a.HeadersToUpstream),
			onDeny:  canonical(a.HeadersToDownstreamOnDeny, "Location", "Set-Cookie", "Www-Authenticate", "Content-Type")}
		if z.timeout <= 0 {
			z.timeout = DefaultTimeout
		}
		c.by[a.Name] = z
	}
	return c
}

func canonical(names []string, defaults ...string) []string {
	if len(names) == 0 {
		names = defaults
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = http.CanonicalHeaderKey(n)
	}
	return out
}

// Unknown returns the first of names no authorizer has, "" when all are
// known.
func (c *Checker) Unknown(names []string) string {
	for _, n := range names {
		if c == nil || c.by[n] == nil {
			return n
		}
	}
	return ""
}

// Denial is a refusal: what the client is answered. Header is never nil.
type Denial struct {
	Status int
	Header http.Header
	Body   []byte
}

// Write answers the client with d.
func (d *Denial) Write(w http.ResponseWriter) {
	for k, vs := range d.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(d.Status)
	_, _ = w.Write(d.Body)
}

func refuse(status int, format string, args ...any) *Denial {
	return &Denial{Status: status, Header: http.Header{}, Body: []byte(fmt.Sprintf(format, args...) + "\n")}
}

// Check asks each of names about req, a request of namespace's APIRule,
// in turn: nil when every one allowed (req then carries the headers they
// add), else the first refusal.
func (c *Checker) Check(ctx context.Context, namespace string, names []string, req *http.Request) *Denial {
	for _, n := range names {
		a := c.by[n]
		if a == nil {
			return refuse(http.StatusForbidden, "external authorizer %q is not defined", n)
		}
		if d := c.ask(ctx, namespace, a, req); d != nil {
			return d
		}
	}
	return nil
}

// ask asks a about req.
func (c *Checker) ask(ctx context.Context, namespace string, a *authorizer, req *http.Request) *Denial {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	if err := c.seats.Enter(ctx, namespace); err != nil {
		return refuse(http.StatusTooManyRequests, "too many external authorization checks in flight: %v", err)
	}
	defer c.seats.Leave(namespace)
	// The path as the Function gets it, escaped as it came (an escaped
	// "/" stays one), after the authorizer's.
	u := *a.base
	u.Path = strings.TrimSuffix(a.base.Path, "/") + req.URL.Path
	u.RawPath = strings.TrimSuffix(a.base.EscapedPath(), "/") + req.URL.EscapedPath()
	u.RawQuery = req.URL.RawQuery
	check, err := http.NewRequestWithContext(ctx, req.Method, u.String(), http.NoBody)
	if err != nil {
		return refuse(http.StatusForbidden, "external authorizer %q: %v", a.Name, err)
	}
	check.Host = req.Host
	for _, h := range a.include {
		for _, v := range req.Header.Values(h) {
			check.Header.Add(h, v)
		}
	}
	check.Header.Set("X-Forwarded-Host", req.Host)
	check.Header.Set("X-Forwarded-Uri", req.URL.RequestURI())
	check.Header.Set("X-Forwarded-Method", req.Method)
	resp, err := c.client.Do(check)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return refuse(http.StatusForbidden, "external authorizer %q did not answer within %s", a.Name, a.timeout)
		}
		return refuse(http.StatusForbidden, "external authorizer %q failed", a.Name)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		for _, h := range a.up {
			if vs := resp.Header.Values(h); len(vs) > 0 {
				req.Header[h] = append([]string(nil), vs...)
			}
		}
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxDenyBody))
	d := &Denial{Status: resp.StatusCode, Header: http.Header{}, Body: bytes.Clone(body)}
	if d.Status < 400 && (d.Status < 300 || d.Status > 399) {
		d.Status = http.StatusForbidden // an answer that neither allows nor refuses nor redirects
	}
	for _, h := range a.onDeny {
		for _, v := range resp.Header.Values(h) {
			d.Header.Add(h, v)
		}
	}
	return d
}
