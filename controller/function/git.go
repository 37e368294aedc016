package function

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/gitsource"
	"github.com/kfn-dev/kfn/internal/egress"
)

const (
	// gitResolveTimeout bounds one reference resolution.
	gitResolveTimeout = 30 * time.Second
	// gitResolvesPerNamespace bounds the resolutions of one namespace's
	// Functions that run at once: a namespace whose servers answer slowly,
	// or not at all until gitResolveTimeout, holds at most that many of the
	// controller's reconcile workers (Config.Workers) at a time.
	gitResolvesPerNamespace = 2
	// gitBusyRetry is how soon a Function is reconciled again when its
	// resolution could not start (its namespace had
	// gitResolvesPerNamespace running).
	gitBusyRetry = 5 * time.Second
	// gitFailedRetry bounds how long a Function waits to be reconciled
	// again after its resolution failed (the poll interval when shorter).
	gitFailedRetry = time.Minute
)

// errGitBusy is the error of a resolution that could not start: its
// namespace has gitResolvesPerNamespace running.
var errGitBusy = errors.New("too many Git references of this namespace are being resolved")

// gitResolver resolves Git Functions' references and remembers each
// answer for the poll interval, so that the many reconciles of a Function
// (status changes of its pods, for example) ask the server once per
// interval; it runs at most gitResolvesPerNamespace resolutions of one
// namespace at once. It is safe for concurrent use.
type gitResolver struct {
	secrets  client.Reader
	interval time.Duration
	// knownHosts are the installation's SSH known hosts.
	knownHosts string
	// egress is where a resolution may connect.
	egress egress.Policy

	mu      sync.Mutex
	entries map[types.NamespacedName]gitEntry
	// running counts the resolutions running, by namespace.
	running map[string]int
}

type gitEntry struct {
	url, reference string
	auth           v1alpha2.RepositoryAuth
	commit         string
	checked        time.Time
}

// resolve returns the commit of fn's reference and how long it stays
// valid, or an error and how soon to try again. The credentials Secret is
// read from the API server, not a cache. A resolution does not wait for
// one of its namespace's (gitResolvesPerNamespace at most run at once):
// when none is free, resolve returns the commit it resolved before for the
// same source, valid for gitBusyRetry, or, without one, an error that
// wraps errGitBusy, to try again after gitBusyRetry.
func (g *gitResolver) resolve(ctx context.Context, fn *v1alpha2.Function) (string, time.Duration, error) {
	src := fn.Spec.Source.GitRepository
	key := client.ObjectKeyFromObject(fn)
	want := gitEntry{url: src.URL, reference: src.Reference}
	if src.Auth != nil {
		want.auth = *src.Auth
	}
	g.mu.Lock()
	e, ok := g.entries[key]
	g.mu.Unlock()
	same := ok && e.url == want.url && e.reference == want.reference && e.auth == want.auth
	if age := time.Since(e.checked); same && age < g.interval {
		return e.commit, g.interval - age, nil
	}
	if !g.start(fn.Namespace) {
		if same {
			return e.commit, gitBusyRetry, nil
		}
		return "", gitBusyRetry, fmt.Errorf("%w: %d are running already, at most %d at once: trying again in %s",
			errGitBusy, gitResolvesPerNamespace, gitResolvesPerNamespace, gitBusyRetry)
	}
	defer g.done(fn.Namespace)
	retry := min(g.interval, gitFailedRetry)
	auth, err := g.auth(ctx, fn)
	if err != nil {
		return "", retry, err
	}
	ctx, cancel := context.WithTimeout(ctx, gitResolveTimeout)
	defer cancel()
	commit, err := gitsource.Resolve(ctx, src.URL, src.Reference, auth, g.egress)
	if err != nil {
		return "", retry, err
	}
	want.commit, want.checked = commit, time.Now()
	g.mu.Lock()
	g.entries[key] = want
	g.mu.Unlock()
	return commit, g.interval, nil
}

// auth returns the credentials of fn's Git source, nil when it names no
// Secret.
func (g *gitResolver) auth(ctx context.Context, fn *v1alpha2.Function) (transport.AuthMethod, error) {
	src := fn.Spec.Source.GitRepository
	if src.Auth == nil {
		return nil, nil
	}
	secret := &corev1.Secret{}
	if err := g.secrets.Get(ctx, types.NamespacedName{Namespace: fn.Namespace, Name: src.Auth.SecretName}, secret); err != nil {
		return nil, fmt.Errorf("read the credentials Secret %s: %w", src.Auth.SecretName, err)
	}
	data := maps.Clone(secret.Data)
	if data == nil {
		data = map[string][]byte{}
	}
	data[gitsource.KeyPlatformKnownHosts] = []byte(g.knownHosts)
	a, err := gitsource.Auth(src.Auth.Type, src.URL, data)
	if err != nil {
		return nil, fmt.Errorf("Secret %s: %w", src.Auth.SecretName, err)
	}
	return a, nil
}

// start takes one of namespace's resolution slots, false when all
// gitResolvesPerNamespace are taken; done gives it back.
func (g *gitResolver) start(namespace string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running[namespace] >= gitResolvesPerNamespace {
		return false
	}
	if g.running == nil {
		g.running = map[string]int{}
	}
	g.running[namespace]++
	return true
}

// done gives back a slot start took.
func (g *gitResolver) done(namespace string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running[namespace]--; g.running[namespace] <= 0 {
		delete(g.running, namespace)
	}
}

func (g *gitResolver) forget(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.entries, key)
}
