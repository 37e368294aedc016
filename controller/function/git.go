package function

import (
	"context"
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

// gitResolveTimeout bounds one reference resolution.
const gitResolveTimeout = 30 * time.Second

// gitResolver resolves Git Functions' references and remembers each
// answer for the poll interval, so that the many reconciles of a Function
// (status changes of its pods, for example) ask the server once per
// interval.
type gitResolver struct {
	secrets  client.Reader
	interval time.Duration
	// knownHosts are the installation's SSH known hosts.
	knownHosts string
	// egress is where a resolution may connect.
	egress egress.Policy

	mu      sync.Mutex
	entries map[types.NamespacedName]gitEntry
}

type gitEntry struct {
	url, reference string
	auth           v1alpha2.RepositoryAuth
	commit         string
	checked        time.Time
}

// resolve returns the commit of fn's reference and how long it stays
// valid. The credentials Secret is read from the API server, not a cache.
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
	if ok && e.url == want.url && e.reference == want.reference && e.auth == want.auth {
		if age := time.Since(e.checked); age < g.interval {
			return e.commit, g.interval - age, nil
		}
	}
	var auth transport.AuthMethod
	if src.Auth != nil {
		secret := &corev1.Secret{}
		if err := g.secrets.Get(ctx, types.NamespacedName{Namespace: fn.Namespace, Name: src.Auth.SecretName}, secret); err != nil {
			return "", 0, fmt.Errorf("read the credentials Secret %s: %w", src.Auth.SecretName, err)
		}
		data := maps.Clone(secret.Data)
		if data == nil {
			data = map[string][]byte{}
		}
		data[gitsource.KeyPlatformKnownHosts] = []byte(g.knownHosts)
		a, err := gitsource.Auth(src.Auth.Type, src.URL, data)
		if err != nil {
			return "", 0, fmt.Errorf("Secret %s: %w", src.Auth.SecretName, err)
		}
		auth = a
	}
	ctx, cancel := context.WithTimeout(ctx, gitResolveTimeout)
	defer cancel()
	commit, err := gitsource.Resolve(ctx, src.URL, src.Reference, auth, g.egress)
	if err != nil {
		return "", 0, err
	}
	want.commit, want.checked = commit, time.Now()
	g.mu.Lock()
	g.entries[key] = want
	g.mu.Unlock()
	return commit, g.interval, nil
}

func (g *gitResolver) forget(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.entries, key)
}
