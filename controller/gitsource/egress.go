package gitsource

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/kfn-dev/kfn/internal/egress"
)

// MaxRedirects bounds the redirects one request to a repository's HTTP
// server follows (each to an address the egress policy allows).
const MaxRedirects = 3

// egressKey is the context key of the egress policy of a Resolve or Fetch.
type egressKey struct{}

// policyOf is the egress policy ctx carries: the zero Policy (the strict
// one) when none.
func policyOf(ctx context.Context) egress.Policy {
	p, _ := ctx.Value(egressKey{}).(egress.Policy)
	return p
}

var installHTTP sync.Once

// useEgress prepares a Fetch, or a Resolve over HTTP(S) or file, of
// repoURL under policy (a path on this machine, go-git's file transport,
// only where it allows loopback; a Resolve over SSH or git:// dials its
// connection itself, listOverConn): it returns the context the
// connections are made in, the URL to use and the credentials to send. HTTP(S) connections are checked as they are dialled
// (go-git's protocol table gets an HTTP transport that asks the policy the
// request's context carries; redirects are bounded by MaxRedirects); an SSH
// or git:// server's name is resolved and checked first, an SSH
// connection's address is checked again before its host key (and so
// before the client authenticates), and a git:// URL is rewritten to the
// address checked, since go-git dials those itself.
func useEgress(ctx context.Context, policy egress.Policy, repoURL string, auth transport.AuthMethod) (context.Context, string, transport.AuthMethod, error) {
	installHTTP.Do(func() {
		c := githttp.NewClientWithOptions(&http.Client{Transport: egressTransport(), CheckRedirect: boundRedirects},
			&githttp.ClientOptions{RedirectPolicy: githttp.FollowInitialRedirects})
		client.InstallProtocol("http", c)
		client.InstallProtocol("https", c)
	})
	ctx = context.WithValue(ctx, egressKey{}, policy)
	ep, err := transport.NewEndpoint(repoURL)
	if err != nil {
		return nil, "", nil, fmt.Errorf("repository URL %s: %w", repoURL, err)
	}
	switch ep.Protocol {
	case "http", "https":
		return ctx, repoURL, auth, nil
	case "ssh", "git":
	case "file":
		if policy.AllowLoopback {
			return ctx, repoURL, auth, nil
		}
		return nil, "", nil, fmt.Errorf("%w: repository URL %s: a path on this machine, like a loopback address", egress.ErrRefused, repoURL)
	default:
		return nil, "", nil, fmt.Errorf("%w: repository URL %s: scheme %q is not fetched", egress.ErrRefused, repoURL, ep.Protocol)
	}
	addr, err := serverAddress(ctx, policy, ep)
	if err != nil {
		return nil, "", nil, err
	}
	if ep.Protocol == "git" {
		return ctx, "git://" + addr.String() + ep.Path, auth, nil
	}
	if pk, ok := auth.(*gitssh.PublicKeys); ok {
		checked := *pk
		next := pk.HostKeyCallback
		checked.HostKeyCallback = func(host string, remote net.Addr, key ssh.PublicKey) error {
			if err := checkAddr(policy, remote); err != nil {
				return err
			}
			return next(host, remote, key)
		}
		auth = &checked
	}
	return ctx, repoURL, auth, nil
}

// serverAddress is the address of an SSH or git:// endpoint's server (its
// port, or the protocol's default), when policy allows every address its
// host resolves to.
func serverAddress(ctx context.Context, policy egress.Policy, ep *transport.Endpoint) (netip.AddrPort, error) {
	port := ep.Port
	if port == 0 {
		port = map[string]int{"ssh": 22, "git": 9418}[ep.Protocol]
	}
	return resolve(ctx, policy, ep.Host, port)
}

// resolve returns the first address host resolves to, with port, when
// policy allows every one of them.
func resolve(ctx context.Context, policy egress.Policy, host string, port int) (netip.AddrPort, error) {
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return netip.AddrPort{}, fmt.Errorf("resolve %s: no address", host)
	}
	for _, a := range addrs {
		if err := policy.Check(netip.AddrPortFrom(a, uint16(port))); err != nil {
			return netip.AddrPort{}, err
		}
	}
	return netip.AddrPortFrom(addrs[0].Unmap(), uint16(port)), nil
}

// checkAddr checks a connection's remote address.
func checkAddr(policy egress.Policy, remote net.Addr) error {
	ap, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP address and port: %w", egress.ErrRefused, remote, err)
	}
	return policy.Check(ap)
}

// egressTransport is net/http's default transport (proxies from the
// environment, HTTP/2, timeouts) whose dialer refuses what the egress
// policy of the request's context refuses. It keeps no idle connection, so
// that every request is dialled, and checked, under its own policy. A
// response's headers are bounded (maxResponseHeaderBytes), and its body
// spends the read budget of the request's context, when it has one (a
// Resolve's).
func egressTransport() http.RoundTripper {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		ControlContext: func(ctx context.Context, network, address string, c syscall.RawConn) error {
			return policyOf(ctx).Control(network, address, c)
		}}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = d.DialContext
	t.DisableKeepAlives = true
	t.MaxResponseHeaderBytes = maxResponseHeaderBytes
	return budgetTransport{t}
}

// budgetTransport makes the bodies of its responses spend the read budget
// of their request's context.
type budgetTransport struct{ next http.RoundTripper }

// RoundTrip sends req with the next transport, and wraps the body of the
// response.
func (t budgetTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if b := budgetOf(req.Context()); b != nil {
		res.Body = budgetBody{ReadCloser: res.Body, b: b}
	}
	return res, nil
}

// errTooManyRedirects is boundRedirects' refusal.
var errTooManyRedirects = errors.New("stopped after " + strconv.Itoa(MaxRedirects) + " redirects")

// boundRedirects lets a request follow at most MaxRedirects redirects.
func boundRedirects(_ *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return errTooManyRedirects
	}
	return nil
}
