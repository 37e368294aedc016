package gitsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/kfn-dev/kfn/internal/egress"
)

// uploadPack is the command whose greeting is the reference list.
const uploadPack = "git-upload-pack"

// listOverConn returns the reference list an SSH or git:// server
// advertises, as go-git's upload-pack session does, but on a connection of
// its own: go-git dials these protocols, and runs the SSH handshake and
// starts the command, without a deadline, so that a server that accepts
// the connection and never answers would hold the caller forever. The connection is dialled to addr (checked again as it
// is dialled), closed when ctx ends, whatever step it is at, and what is
// read from it spends budget.
func listOverConn(ctx context.Context, ep *transport.Endpoint, addr netip.AddrPort, auth transport.AuthMethod,
	policy egress.Policy, budget *readBudget) (*packp.AdvRefs, error) {
	d := net.Dialer{Control: policy.Control}
	raw, err := d.DialContext(ctx, "tcp", addr.String())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	conn := budgetConn{Conn: raw, b: budget}

	port := ep.Port
	if port == 0 {
		port = int(addr.Port())
	}
	hostPort := net.JoinHostPort(ep.Host, strconv.Itoa(port))
	var (
		out    io.Reader
		stderr = &firstBytes{max: 1024}
	)
	switch ep.Protocol {
	case "git":
		if auth != nil {
			return nil, fmt.Errorf("%w: git:// has no credentials", transport.ErrInvalidAuthMethod)
		}
		host := ep.Host
		if port != 9418 {
			host = hostPort
		}
		req := packp.GitProtoRequest{RequestCommand: uploadPack, Pathname: ep.Path, Host: host}
		if err := req.Encode(conn); err != nil {
			return nil, ended(ctx, fmt.Errorf("send the request: %w", err))
		}
		out = conn
	case "ssh":
		session, err := sshSession(conn, hostPort, ep, auth)
		if err != nil {
			return nil, ended(ctx, err)
		}
		defer session.Close()
		session.Stderr = stderr
		if out, err = session.StdoutPipe(); err != nil {
			return nil, fmt.Errorf("SSH session: %w", err)
		}
		if err := session.Start(uploadPack + " " + shellQuote(ep.Path)); err != nil {
			return nil, ended(ctx, fmt.Errorf("start %s over SSH: %w", uploadPack, err))
		}
	default:
		return nil, fmt.Errorf("scheme %q is not listed on a connection of its own", ep.Protocol)
	}
	ar := packp.NewAdvRefs()
	if err := ar.Decode(out); err != nil {
		return nil, ended(ctx, advRefsError(err, stderr.String()))
	}
	if ar.IsEmpty() {
		return nil, transport.ErrEmptyRemoteRepository
	}
	return ar, nil
}

// sshSession runs the SSH handshake on conn with auth's client
// configuration (its host key check among it) and opens a session. A nil
// auth is go-git's default (the SSH agent).
func sshSession(conn net.Conn, hostPort string, ep *transport.Endpoint, auth transport.AuthMethod) (*ssh.Session, error) {
	if auth == nil {
		a, err := gitssh.DefaultAuthBuilder(ep.User)
		if err != nil {
			return nil, fmt.Errorf("SSH credentials: %w", err)
		}
		auth = a
	}
	a, ok := auth.(gitssh.AuthMethod)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not an SSH credential", transport.ErrInvalidAuthMethod, auth.Name())
	}
	cfg, err := a.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("SSH credentials: %w", err)
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, hostPort, cfg)
	if err != nil {
		return nil, fmt.Errorf("SSH handshake with %s: %w", hostPort, err)
	}
	session, err := ssh.NewClient(c, chans, reqs).NewSession()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("SSH session: %w", err)
	}
	return session, nil
}

// ended is err, or, when ctx ended (and closed the connection, which
// is what err is about), an error that says so.
func ended(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	return fmt.Errorf("no answer from the server before the deadline: %w", context.Cause(ctx))
}

// advRefsError is the error of a reference list that could not be read,
// with what the server wrote on its error stream when it sent nothing.
func advRefsError(err error, stderr string) error {
	switch {
	case errors.Is(err, packp.ErrEmptyAdvRefs):
		return transport.ErrEmptyRemoteRepository
	case errors.Is(err, packp.ErrEmptyInput) && strings.TrimSpace(stderr) != "":
		return fmt.Errorf("the server sent no references: %s", strings.TrimSpace(stderr))
	default:
		return fmt.Errorf("read the reference list: %w", err)
	}
}

// shellQuote quotes s for a POSIX shell (the SSH server runs the command
// with the user's shell), as git's sq_quote_buf does: in single quotes,
// with ' and ! closed, escaped and reopened.
func shellQuote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\'' || c == '!' {
			b.WriteString(`'\` + string(c) + `'`)
			continue
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('\'')
	return b.String()
}

// firstBytes keeps the first max bytes written to it and discards the
// rest. It is safe for concurrent use.
type firstBytes struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (f *firstBytes) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if room := f.max - f.buf.Len(); room > 0 {
		f.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (f *firstBytes) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.String()
}
