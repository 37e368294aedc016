package claim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/validation"
)

// DefaultPort is the port of the controller's claim listener.
const DefaultPort = 8083

// PathPrefix starts every claim's path.
const PathPrefix = "/claims/"

// Path is the path of a claim for Function namespace/name.
func Path(namespace, name string) string {
	return PathPrefix + url.PathEscape(namespace) + "/" + url.PathEscape(name)
}

// ErrInvalidPath is wrapped by ParsePath's errors.
var ErrInvalidPath = errors.New("invalid claim path")

// ParsePath returns the Function a claim's path names: two DNS labels
// after PathPrefix.
func ParsePath(path string) (namespace, name string, err error) {
	rest, ok := strings.CutPrefix(path, PathPrefix)
	if !ok {
		return "", "", fmt.Errorf("%w: %q does not start with %s", ErrInvalidPath, path, PathPrefix)
	}
	namespace, name, ok = strings.Cut(rest, "/")
	if !ok || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%w: want %s<namespace>/<function>, got %q", ErrInvalidPath, PathPrefix, path)
	}
	for _, s := range []string{namespace, name} {
		if errs := validation.NameIsDNSLabel(s, false); len(errs) > 0 {
			return "", "", fmt.Errorf("%w: %q: %s", ErrInvalidPath, s, strings.Join(errs, "; "))
		}
	}
	return namespace, name, nil
}

// Answer is a granted claim: the pod given to the Function, whose host
// serves it now.
type Answer struct {
	// Pod is the pod's name, in the Function's namespace.
	Pod string `json:"pod"`
	// Address is host:port of the pod's host.
	Address string `json:"address"`
}

// Errors of Client.Claim for the controller's refusals.
var (
	// ErrNotPooled: the warm pool does not serve the Function (404).
	ErrNotPooled = errors.New("the warm pool does not serve the Function")
	// ErrServed: the Function has a ready pod of its own (409).
	ErrServed = errors.New("the Function has a ready pod of its own")
	// ErrNoStandby: no standby pod of the Function's pool has started (503).
	ErrNoStandby = errors.New("no standby pod for the Function")
	// ErrNoLeader: no address of the controller answered.
	ErrNoLeader = errors.New("no controller leader answered")
)

// StatusOf is the status the controller answers for err, one of the
// errors above (or anything else: 502, the host refused the Function).
func StatusOf(err error) int {
	switch {
	case errors.Is(err, ErrNotPooled):
		return http.StatusNotFound
	case errors.Is(err, ErrServed):
		return http.StatusConflict
	case errors.Is(err, ErrNoStandby):
		return http.StatusServiceUnavailable
	default:
		return http.StatusBadGateway
	}
}

// maxAnswerBytes bounds an answer's body.
const maxAnswerBytes = 4 << 10

// Client claims pods from the controller's leader. It is safe for
// concurrent use.
type Client struct {
	host  string
	port  int
	token func() (string, error)
	http  *http.Client
	look  func(ctx context.Context, host string) ([]string, error)

	mu     sync.Mutex
	leader string // host:port that answered last
}

// NewClient returns a Client of the controller's claim listeners at every
// address host resolves to (the controller's headless Service), on port,
// that sends the bearer token token returns (read at each claim: a
// projected token is renewed on disk).
func NewClient(host string, port int, token func() (string, error)) *Client {
	return &Client{
		host: host, port: port, token: token,
		http: &http.Client{
			Timeout: 15 * time.Second,
			Transport: &http.Transport{
				DialContext:            (&net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}).DialContext,
				MaxIdleConnsPerHost:    4,
				IdleConnTimeout:        90 * time.Second,
				MaxResponseHeaderBytes: maxAnswerBytes,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		look: net.DefaultResolver.LookupHost,
	}
}

// Claim asks the controller's leader for a standby pod for Function
// namespace/name and returns it once its host serves the Function. It
// tries the address that answered last first, then every other address
// of the controller; a controller that does not listen (not the leader)
// refuses the connection at once.
func (c *Client) Claim(ctx context.Context, namespace, name string) (Answer, error) {
	token, err := c.token()
	if err != nil {
		return Answer{}, fmt.Errorf("claim %s/%s: read the token: %w", namespace, name, err)
	}
	c.mu.Lock()
	leader := c.leader
	c.mu.Unlock()
	var errs []error
	if leader != "" {
		// Any failure to get an answer from it (it lost its leadership,
		// or restarted) sends the claim to every address again: a claim
		// asked twice is given one pod.
		a, err := c.ask(ctx, leader, token, namespace, name)
		if !errors.Is(err, errUnreachable) && !errors.Is(err, errNoAnswer) {
			return a, err
		}
		errs = append(errs, err)
		leader = ""
	}
	addrs, err := c.look(ctx, c.host)
	if err != nil {
		return Answer{}, fmt.Errorf("claim %s/%s: %w: resolve %s: %w", namespace, name, ErrNoLeader, c.host, err)
	}
	for _, ip := range addrs {
		addr := net.JoinHostPort(ip, strconv.Itoa(c.port))
		if addr == leader {
			continue
		}
		a, err := c.ask(ctx, addr, token, namespace, name)
		if errors.Is(err, errUnreachable) {
			errs = append(errs, err)
			continue
		}
		c.mu.Lock()
		c.leader = addr
		c.mu.Unlock()
		return a, err
	}
	return Answer{}, fmt.Errorf("claim %s/%s: %w: %w", namespace, name, ErrNoLeader, errors.Join(errs...))
}

// Failures of ask to get an answer: the address did not take the
// request (no listener), or gave no answer.
var (
	errUnreachable = errors.New("unreachable")
	errNoAnswer    = errors.New("no answer")
)

// ask sends one claim to addr.
func (c *Client) ask(ctx context.Context, addr, token, namespace, name string) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+Path(namespace, name), http.NoBody)
	if err != nil {
		return Answer{}, fmt.Errorf("claim %s/%s: %w", namespace, name, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	// A claim asked twice is given one pod: the transport may send it
	// again on a new connection when a kept one turns out closed.
	req.Header.Set("Idempotency-Key", namespace+"/"+name)
	resp, err := c.http.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return Answer{}, fmt.Errorf("%w: %s: %w", errUnreachable, addr, err)
		}
		return Answer{}, fmt.Errorf("claim %s/%s at %s: %w: %w", namespace, name, addr, errNoAnswer, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return Answer{}, fmt.Errorf("claim %s/%s at %s: read the answer: %w", namespace, name, addr, err)
	}
	if len(body) > maxAnswerBytes {
		return Answer{}, fmt.Errorf("claim %s/%s at %s: the answer is over %d bytes", namespace, name, addr, maxAnswerBytes)
	}
	text := strings.TrimSpace(string(body))
	refused := func(sentinel error) error {
		// The controller's text starts with the sentinel's own.
		return fmt.Errorf("claim %s/%s: %w%s", namespace, name, sentinel, strings.TrimPrefix(text, sentinel.Error()))
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return Answer{}, refused(ErrNotPooled)
	case http.StatusConflict:
		return Answer{}, refused(ErrServed)
	case http.StatusServiceUnavailable:
		return Answer{}, refused(ErrNoStandby)
	default:
		return Answer{}, fmt.Errorf("claim %s/%s at %s: answered %d: %s", namespace, name, addr, resp.StatusCode, text)
	}
	var a Answer
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Answer{}, fmt.Errorf("claim %s/%s at %s: decode the answer: %w", namespace, name, addr, err)
	}
	if _, err := netip.ParseAddrPort(a.Address); err != nil || a.Pod == "" {
		return Answer{}, fmt.Errorf("claim %s/%s at %s: the answer names no pod and address: %q", namespace, name, addr, body)
	}
	return a, nil
}
