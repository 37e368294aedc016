package gitsource_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/gitsource"
	"github.com/kfn-dev/kfn/test/gittest"
)

// resolveWithin runs Resolve with a deadline of timeout and returns its
// error and how long it took; the test fails when Resolve still runs at
// bound (its goroutine is then left to the servers' cleanup, which closes
// their connections).
func resolveWithin(t *testing.T, timeout, bound time.Duration, url string, auth transport.AuthMethod) (error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := gitsource.Resolve(ctx, url, "main", auth, testEgress)
		done <- err
	}()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(bound):
		t.Fatalf("Resolve of %s with a deadline of %s still runs after %s", url, timeout, bound)
		return nil, bound
	}
}

// keyAuth is the credentials of a tenant's Secret of type key for url:
// any client key, and hostKey pinned.
func keyAuth(t *testing.T, url string, hostKey ssh.Signer) transport.AuthMethod {
	t.Helper()
	auth, err := gitsource.Auth(v1alpha2.RepositoryAuthSSHKey, url, sshKeyAuth(t, hostKey.PublicKey()))
	require.NoError(t, err)
	return auth
}

// TestResolveEndsAtItsDeadline: a Git server that accepts the connection
// and then never answers, at any step (the TCP connection, the SSH
// handshake, the SSH exec of git-upload-pack, the reference list, the
// HTTP response), holds a resolve only until its context's deadline: the
// controller's reconcile workers are not held forever.
func TestResolveEndsAtItsDeadline(t *testing.T) {
	_, hostKey := gittest.NewKey(t)
	tp := newTarpit(t)
	stalls := sshServer(t, hostKey, 0)
	for name, c := range map[string]struct {
		url string
		ssh bool
	}{
		"SSH, a server that accepts and never writes":   {url: "ssh://git@" + tp.Address + "/r.git", ssh: true},
		"SSH, a server that stalls after the handshake": {url: stalls.URL, ssh: true},
		"git://, a server that never writes":            {url: "git://" + tp.Address + "/r.git"},
		"HTTP, a server that never answers":             {url: "http://" + tp.Address + "/r.git"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var auth transport.AuthMethod
			if c.ssh {
				auth = keyAuth(t, c.url, hostKey)
			}
			err, took := resolveWithin(t, 2*time.Second, 5*time.Second, c.url, auth)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Less(t, took, 5*time.Second)
		})
	}
}

// TestResolveBoundsTheReferenceList: a server that advertises more
// references than MaxReferenceListBytes (here 64 MiB of long branch
// names) fails the resolve with an error that says the list is too large,
// and the resolve stops reading there: the server could write only a part
// of what it offered (the rest of its writes failed once the connection
// was closed).
func TestResolveBoundsTheReferenceList(t *testing.T) {
	const offered = 64 << 20
	_, hostKey := gittest.NewKey(t)
	for name, c := range map[string]struct {
		srv *floodServer
		ssh bool
	}{
		"HTTP":   {srv: floodHTTP(t, offered)},
		"git://": {srv: floodGit(t, offered)},
		"SSH":    {srv: sshServer(t, hostKey, offered), ssh: true},
	} {
		t.Run(name, func(t *testing.T) {
			var auth transport.AuthMethod
			if c.ssh {
				auth = keyAuth(t, c.srv.URL, hostKey)
			}
			err, _ := resolveWithin(t, 20*time.Second, 25*time.Second, c.srv.URL, auth)
			require.ErrorIs(t, err, gitsource.ErrReferencesTooLarge)
			assert.ErrorContains(t, err, "too large")
			assert.Less(t, c.srv.Written(), int64(offered/2), "bytes the server could write")
			t.Logf("the server wrote %d of the %d bytes it offered", c.srv.Written(), offered)
		})
	}
}
