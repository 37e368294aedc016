package function

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/test/fntest"
)

// holdConnections is a tenant's Git server that accepts connections and
// never answers (a real listener on loopback); it returns its address and
// how many connections it accepted, and closes them when the test ends.
func holdConnections(t *testing.T) (string, func() int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		accepted atomic.Int64
		conns    []net.Conn
		loop     sync.WaitGroup
	)
	loop.Add(1)
	go func() {
		defer loop.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			accepted.Add(1)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		loop.Wait() // conns is the accept loop's until then
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String(), func() int { return int(accepted.Load()) }
}

// TestGitResolvesPerNamespace: while as many resolutions of one namespace
// as it may run at once are held by a server that never answers, one more
// of the same namespace is refused at once (it does not wait in the
// reconcile worker) with an error that says why, and is to be retried
// soon (one resolved before keeps its commit meanwhile); another
// namespace's resolution starts; and once the held ones end, the
// namespace's resolutions start again.
func TestGitResolvesPerNamespace(t *testing.T) {
	addr, accepted := holdConnections(t)
	url := "http://" + addr + "/repo.git"
	g := &gitResolver{interval: time.Minute, egress: egress.Policy{AllowLoopback: true}, entries: map[types.NamespacedName]gitEntry{}}
	fn := func(name, ns string) *v1alpha2.Function {
		return fntest.Function(name, ns, fntest.Git(url, "fn", "main", nil))
	}
	type result struct {
		retry time.Duration
		err   error
	}
	resolve := func(ctx context.Context, f *v1alpha2.Function) <-chan result {
		out := make(chan result, 1)
		go func() {
			_, retry, err := g.resolve(ctx, f)
			out <- result{retry, err}
		}()
		return out
	}
	held, release := context.WithCancel(context.Background())
	defer release()

	const perNamespace = gitResolvesPerNamespace
	var slow []<-chan result
	for i := range perNamespace {
		slow = append(slow, resolve(held, fn("slow-"+string(rune('a'+i)), "tenant-a")))
	}
	require.Eventually(t, func() bool { return accepted() == perNamespace }, 10*time.Second, 10*time.Millisecond,
		"the namespace's resolutions reach the server")

	select {
	case r := <-resolve(held, fn("one-more", "tenant-a")):
		require.ErrorIs(t, r.err, errGitBusy)
		assert.ErrorContains(t, r.err, "at most 2 at once: trying again in 5s")
		assert.Equal(t, gitBusyRetry, r.retry, "retried soon")
	case <-time.After(5 * time.Second):
		t.Fatal("one more resolution of the namespace waits in the worker")
	}
	assert.Equal(t, perNamespace, accepted(), "the refused one did not connect")

	// A Function resolved before keeps its commit meanwhile (its status
	// does not turn False), and is reconciled again as soon.
	known := fn("known", "tenant-a")
	g.mu.Lock()
	g.entries[types.NamespacedName{Namespace: "tenant-a", Name: "known"}] = gitEntry{url: url, reference: "main",
		commit: "0123456789abcdef0123456789abcdef01234567", checked: time.Now().Add(-2 * g.interval)}
	g.mu.Unlock()
	commit, retry, err := g.resolve(held, known)
	require.NoError(t, err)
	assert.Equal(t, "0123456789abcdef0123456789abcdef01234567", commit)
	assert.Equal(t, gitBusyRetry, retry)
	assert.Equal(t, perNamespace, accepted(), "the known one did not connect")

	other := resolve(held, fn("other", "tenant-b"))
	require.Eventually(t, func() bool { return accepted() == perNamespace+1 }, 10*time.Second, 10*time.Millisecond,
		"another namespace's resolution starts")

	release()
	for _, r := range append(slow, other) {
		select {
		case <-r:
		case <-time.After(10 * time.Second):
			t.Fatal("a held resolution did not end with its context")
		}
	}
	again, cancel := context.WithCancel(context.Background())
	defer cancel()
	resolve(again, fn("later", "tenant-a"))
	require.Eventually(t, func() bool { return accepted() == perNamespace+2 }, 10*time.Second, 10*time.Millisecond,
		"the namespace's slots are free again")
}
