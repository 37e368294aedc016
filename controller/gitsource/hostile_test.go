package gitsource_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/kfn-dev/kfn/test/gittest"
)

// The servers of this file are what a tenant can run at the URL of a Git
// Function: real listeners on loopback, each hostile in one way.

// tarpit is a TCP server that accepts connections and never writes a byte
// (nor reads one): what an SSH, git:// or HTTP client meets at a tenant's
// server that stalls.
type tarpit struct {
	Address  string
	accepted atomic.Int64
}

// newTarpit listens on loopback until the test ends; then it closes the
// connections it holds.
func newTarpit(t *testing.T) *tarpit {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tp := &tarpit{Address: l.Addr().String()}
	var (
		conns  []net.Conn
		accept sync.WaitGroup
	)
	accept.Add(1)
	go func() {
		defer accept.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			tp.accepted.Add(1)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		accept.Wait() // conns is the accept loop's until then
		for _, c := range conns {
			c.Close()
		}
	})
	return tp
}

// Accepted is how many connections the tarpit holds or held.
func (tp *tarpit) Accepted() int { return int(tp.accepted.Load()) }

// pkt is one pkt-line.
func pkt(payload string) string { return fmt.Sprintf("%04x%s", len(payload)+4, payload) }

// flood writes an endless reference advertisement (long branch names) to
// w until total bytes are written or a write fails, and counts into
// written what w accepted.
func flood(w io.Writer, total int64, written *atomic.Int64) {
	const hash = "0123456789abcdef0123456789abcdef01234567"
	first := pkt(hash + " HEAD\x00agent=flood\n")
	n, err := io.WriteString(w, first)
	written.Add(int64(n))
	name := strings.Repeat("x", 1000)
	for i := 0; err == nil && written.Load() < total; i++ {
		n, err = io.WriteString(w, pkt(hash+" refs/heads/"+strconv.Itoa(i)+name+"\n"))
		written.Add(int64(n))
	}
}

// floodServer offers total bytes of references and counts what it wrote.
type floodServer struct {
	URL     string
	written atomic.Int64
}

// Written is how many bytes the server's writes accepted.
func (f *floodServer) Written() int64 { return f.written.Load() }

// floodHTTP is a smart HTTP Git server whose info/refs is total bytes.
func floodHTTP(t *testing.T, total int64) *floodServer {
	f := &floodServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		_, _ = io.WriteString(w, pkt("# service=git-upload-pack\n")+"0000")
		flood(w, total, &f.written)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL + "/repo.git"
	return f
}

// floodGit is a git:// server that reads the request, then advertises
// total bytes of references.
func floodGit(t *testing.T, total int64) *floodServer {
	f := &floodServer{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f.URL = "git://" + l.Addr().String() + "/repo.git"
	serve(t, l, func(c net.Conn) {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		n, err := strconv.ParseUint(string(size[:]), 16, 16)
		if err != nil || n < 4 {
			return
		}
		if _, err := io.CopyN(io.Discard, c, int64(n)-4); err != nil {
			return
		}
		flood(c, total, &f.written)
	})
	return f
}

// sshServer is an SSH server that lets any client in, with hostKey, and
// answers an exec of git-upload-pack with total bytes of references, or,
// when total is 0, never answers it (a server that stalls after the
// handshake).
func sshServer(t *testing.T, hostKey ssh.Signer, total int64) *floodServer {
	f := &floodServer{}
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(hostKey)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f.URL = "ssh://git@" + l.Addr().String() + "/repo.git"
	serve(t, l, func(c net.Conn) {
		conn, chans, reqs, err := ssh.NewServerConn(c, cfg)
		if err != nil {
			return
		}
		defer conn.Close()
		go ssh.DiscardRequests(reqs)
		for nc := range chans {
			ch, requests, err := nc.Accept()
			if err != nil {
				return
			}
			go func() {
				defer ch.Close()
				for req := range requests {
					if total == 0 {
						continue // no reply, ever
					}
					_ = req.Reply(req.Type == "exec", nil)
					if req.Type == "exec" {
						flood(ch, total, &f.written)
						return
					}
				}
			}()
		}
	})
	return f
}

// serve runs handle on each connection l accepts until the test ends, then
// closes l and the connections and waits for the handlers.
func serve(t *testing.T, l net.Listener, handle func(net.Conn)) {
	var (
		conns            []net.Conn
		accept, handlers sync.WaitGroup
	)
	accept.Add(1)
	go func() {
		defer accept.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		accept.Wait() // conns is the accept loop's until then
		for _, c := range conns {
			c.Close()
		}
		handlers.Wait()
	})
}

// sshKeyAuth is what a tenant's Secret of type key gives: any client key
// and a known_hosts line pinning hostKey.
func sshKeyAuth(t *testing.T, hostKey ssh.PublicKey) map[string][]byte {
	clientPEM, _ := gittest.NewKey(t)
	return map[string][]byte{
		"ssh-privatekey": clientPEM,
		"known_hosts":    []byte("pinned.example " + string(ssh.MarshalAuthorizedKey(hostKey))),
	}
}
