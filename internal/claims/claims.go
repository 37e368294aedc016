package claims

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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kfn-dev/kfn/contract/claim"
)

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
func (c *Client) Claim(ctx context.Context, namespace, name string) (claim.Answer, error) {
	var a claim.Answer
	err := c.toLeader(ctx, fmt.Sprintf("claim %s/%s", namespace, name), func(addr, token string) error {
		var err error
		a, err = c.ask(ctx, addr, token, namespace, name)
		return err
	})
	return a, err
}

// Warm has the controller's leader check this client as it checks a
// claim (claim.WarmPath), so that the leader holds the review of its
// token and its permission when the next claim comes: a Function's first
// event after a quiet time waits for no TokenReview or
// SubjectAccessReview.
func (c *Client) Warm(ctx context.Context) error {
	return c.toLeader(ctx, "warm", func(addr, token string) error { return c.warm(ctx, addr, token) })
}

// KeepWarm calls Warm every interval until ctx ends, its failures (no
// leader yet, say) dropped: the next claim then pays the reviews.
func (c *Client) KeepWarm(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		_ = c.Warm(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// toLeader sends one request with send to the leader: to the address
// that answered last first, to every address again when that one gives no
// answer (it lost its leadership, or restarted: a claim asked twice is
// given one pod), keeping the one that answered.
func (c *Client) toLeader(ctx context.Context, what string, send func(addr, token string) error) error {
	token, err := c.token()
	if err != nil {
		return fmt.Errorf("%s: read the token: %w", what, err)
	}
	c.mu.Lock()
	leader := c.leader
	c.mu.Unlock()
	var errs []error
	if leader != "" {
		err := send(leader, token)
		if !errors.Is(err, errUnreachable) && !errors.Is(err, errNoAnswer) {
			return err
		}
		errs = append(errs, err)
		leader = ""
	}
	addrs, err := c.look(ctx, c.host)
	if err != nil {
		return fmt.Errorf("%s: %w: resolve %s: %w", what, claim.ErrNoLeader, c.host, err)
	}
	for _, ip := range addrs {
		addr := net.JoinHostPort(ip, strconv.Itoa(c.port))
		if addr == leader {
			continue
		}
		err := send(addr, token)
		if errors.Is(err, errUnreachable) {
			errs = append(errs, err)
			continue
		}
		c.mu.Lock()
		c.leader = addr
		c.mu.Unlock()
		return err
	}
	return fmt.Errorf("%s: %w: %w", what, claim.ErrNoLeader, errors.Join(errs...))
}

// Failures of ask to get an answer: the address did not take the
// request (no listener), or gave no answer.
var (
	errUnreachable = errors.New("unreachable")
	errNoAnswer    = errors.New("no answer")
)

// ask sends one claim to addr.
func (c *Client) ask(ctx context.Context, addr, token, namespace, name string) (claim.Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+claim.Path(namespace, name), http.NoBody)
	if err != nil {
		return claim.Answer{}, fmt.Errorf("claim %s/%s: %w", namespace, name, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	// A claim asked twice is given one pod: the transport may send it
	// again on a new connection when a kept one turns out closed.
	req.Header.Set("Idempotency-Key", namespace+"/"+name)
	resp, err := c.send(req, addr, fmt.Sprintf("claim %s/%s", namespace, name))
	if err != nil {
		return claim.Answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return claim.Answer{}, fmt.Errorf("claim %s/%s at %s: read the answer: %w", namespace, name, addr, err)
	}
	if len(body) > maxAnswerBytes {
		return claim.Answer{}, fmt.Errorf("claim %s/%s at %s: the answer is over %d bytes", namespace, name, addr, maxAnswerBytes)
	}
	text := strings.TrimSpace(string(body))
	refused := func(sentinel error) error {
		// The controller's text starts with the sentinel's own.
		return fmt.Errorf("claim %s/%s: %w%s", namespace, name, sentinel, strings.TrimPrefix(text, sentinel.Error()))
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return claim.Answer{}, refused(claim.ErrNotPooled)
	case http.StatusConflict:
		return claim.Answer{}, refused(claim.ErrServed)
	case http.StatusServiceUnavailable:
		return claim.Answer{}, refused(claim.ErrNoStandby)
	default:
		return claim.Answer{}, fmt.Errorf("claim %s/%s at %s: answered %d: %s", namespace, name, addr, resp.StatusCode, text)
	}
	var a claim.Answer
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return claim.Answer{}, fmt.Errorf("claim %s/%s at %s: decode the answer: %w", namespace, name, addr, err)
	}
	if _, err := netip.ParseAddrPort(a.Address); err != nil || a.Pod == "" {
		return claim.Answer{}, fmt.Errorf("claim %s/%s at %s: the answer names no pod and address: %q", namespace, name, addr, body)
	}
	return a, nil
}

// warm sends one warm-up to addr: nil when the leader answered 204.
func (c *Client) warm(ctx context.Context, addr, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+claim.WarmPath, http.NoBody)
	if err != nil {
		return fmt.Errorf("warm: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.send(req, addr, "warm")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("warm at %s: answered %d: %s", addr, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// send sends req to addr; its errors say whether the address took no
// connection (errUnreachable: no listener) or gave no answer
// (errNoAnswer), what names the request.
func (c *Client) send(req *http.Request, addr, what string) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err == nil {
		return resp, nil
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return nil, fmt.Errorf("%w: %s: %w", errUnreachable, addr, err)
	}
	return nil, fmt.Errorf("%s at %s: %w: %w", what, addr, errNoAnswer, err)
}
