package gittest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

// SSHServer serves a Repo over SSH on loopback for tests: x/crypto/ssh's
// server side authenticates the client's public key, and git's own
// upload-pack answers the fetch, as an OpenSSH server running git would.
// Only fetching is served (git-upload-pack).
type SSHServer struct {
	// Address is host:port of the server on loopback.
	Address string
	// HostKey is the server's host key.
	HostKey ssh.PublicKey

	mu       sync.Mutex
	accepted int
}

// URL returns the repository's ssh:// URL on this server.
func (s *SSHServer) URL() string { return "ssh://git@" + s.Address + "/repo.git" }

// Sessions returns how many connections got past the client's key check
// (the client accepted the host key and authenticated).
func (s *SSHServer) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// NewKey returns a new ed25519 key pair: the private key in OpenSSH's PEM
// form (what a Secret's ssh-privatekey holds) and its signer.
func NewKey(t testing.TB) ([]byte, ssh.Signer) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "test key")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block), signer
}

// ServeSSH serves r over SSH until the test ends, to a client that
// authenticates with clientKey, with hostKey, or a new host key of its own
// when nil.
func (r *Repo) ServeSSH(t testing.TB, clientKey ssh.PublicKey, hostKey ssh.Signer) *SSHServer {
	t.Helper()
	if hostKey == nil {
		_, hostKey = NewKey(t)
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(k.Marshal(), clientKey.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("unknown client key")
		},
	}
	cfg.AddHostKey(hostKey)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &SSHServer{Address: l.Addr().String(), HostKey: hostKey.PublicKey()}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serve(c, cfg, r.dir)
			}()
		}
	}()
	return s
}

// serve runs one connection: each session's exec of git-upload-pack runs
// git upload-pack on the repository.
func (s *SSHServer) serve(c net.Conn, cfg *ssh.ServerConfig, dir string) {
	defer c.Close()
	conn, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return // a client that refused the host key, or a wrong client key
	}
	defer conn.Close()
	s.mu.Lock()
	s.accepted++
	s.mu.Unlock()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, requests, err := nc.Accept()
		if err != nil {
			return
		}
		go s.session(ch, requests, dir)
	}
}

func (s *SSHServer) session(ch ssh.Channel, requests <-chan *ssh.Request, dir string) {
	defer ch.Close()
	for req := range requests {
		if req.Type != "exec" {
			_ = req.Reply(req.Type == "env", nil)
			continue
		}
		var payload struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &payload); err != nil || !strings.HasPrefix(payload.Command, "git-upload-pack ") {
			_ = req.Reply(false, nil)
			continue
		}
		_ = req.Reply(true, nil)
		cmd := exec.Command("git", "upload-pack", dir)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
		status := uint32(0)
		if err := cmd.Run(); err != nil {
			status = 1
			fmt.Fprintln(ch.Stderr(), err)
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], status)
		_, _ = ch.SendRequest("exit-status", false, b[:])
		return
	}
}

// KnownHostsLine is the known_hosts line of the server's host key, for
// the host names given (for example "[127.0.0.1]:port").
func (s *SSHServer) KnownHostsLine(hosts ...string) string {
	return strings.Join(hosts, ",") + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey))) + "\n"
}
