package depcache

import (
	"sync"

	"golang.org/x/time/rate"
)

// A namespace's uploads, each of which may cost a TokenReview of its
// writer token: namespaceUploadsPerSecond, in bursts of
// namespaceUploadsBurst (the pods of a scale-out that all missed the same
// set). More are answered 429 before any review, so that a tenant's code,
// which holds its pod's identity token, cannot have made-up writer tokens
// reviewed at the API server's or other namespaces' expense.
const (
	namespaceUploadsPerSecond = 2.0
	namespaceUploadsBurst     = 20
)

// maxRates is how many namespaces' rates are kept before the idle ones
// (their bucket full again) are forgotten.
const maxRates = 4096

// namespaceRates is a token bucket per namespace.
type namespaceRates struct {
	limit rate.Limit
	burst int

	mu    sync.Mutex
	rates map[string]*rate.Limiter
}

func newNamespaceRates(perSecond float64, burst int) *namespaceRates {
	return &namespaceRates{limit: rate.Limit(perSecond), burst: burst, rates: map[string]*rate.Limiter{}}
}

// allow takes a token of namespace's bucket, false when it is empty.
func (n *namespaceRates) allow(namespace string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.rates[namespace]
	if l == nil {
		if len(n.rates) >= maxRates {
			for ns, r := range n.rates {
				if r.Tokens() >= float64(n.burst) {
					delete(n.rates, ns)
				}
			}
		}
		l = rate.NewLimiter(n.limit, n.burst)
		n.rates[namespace] = l
	}
	return l.Allow()
}
