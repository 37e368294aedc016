package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// renewal keeps the API server's answers (a token's review, an allowed
// decision) for a while each, and renews an answer asked for in the second
// half of its life in the background: a caller that calls at least once in
// every half of the time an answer is kept never waits for the API server
// after its first call (a review is tens of milliseconds on a busy node, a
// wake's whole budget), and no answer served is older than it was kept
// for, as with a cache that forgets. An answer kept without renewal (a
// denial) is forgotten when its time ends. At most max answers are kept:
// past it, the expired ones go first, then any.
type renewal[V any] struct {
	max     int
	timeout time.Duration // of one renewal
	now     func() time.Time

	mu      sync.Mutex
	answers map[string]*answer[V]
	// asks joins the first asks of one key that arrive together: one
	// review or decision answers them all.
	asks singleflight.Group
}

// answer is one kept answer: its value, when its time ends and when, once
// asked for again, it is renewed (never, for a zero renewAt).
type answer[V any] struct {
	value          V
	until, renewAt time.Time
	renewing       bool
}

func newRenewal[V any](max int, timeout time.Duration) *renewal[V] {
	return &renewal[V]{max: max, timeout: timeout, now: time.Now, answers: map[string]*answer[V]{}}
}

// fetch is how a renewal asks the API server for the answer of a key.
type fetch[V any] func(ctx context.Context) fetched[V]

// fetched is what a fetch got: the answer, or why there is none (err),
// how long to keep it (0: not at all, as when the API server could not be
// asked) and whether to renew it once asked for in the second half of that
// time; refused says the answer withdraws a kept one (a token the API
// server no longer accepts).
type fetched[V any] struct {
	value   V
	err     error
	keep    time.Duration
	renew   bool
	refused bool
}

// get returns key's kept answer while its time lasts, starting its renewal
// by ask (once at a time) when asked for in the second half of it; without
// one kept it asks, keeps the answer as ask says, and returns it or ask's
// error (the same to the gets of key that joined the ask). ask's context is
// detached from ctx (a renewal outlives the request that started it, and
// an ask is shared by the gets that joined it) but keeps its values (the
// audiences a review is for), bounded by the timeout. admit, when set, is
// asked first when no answer is kept (a renewal does not ask it): its
// error is returned instead of asking.
func (c *renewal[V]) get(ctx context.Context, key string, ask fetch[V], admit func() error) (V, error) {
	now := c.now()
	c.mu.Lock()
	if a, ok := c.answers[key]; ok && now.Before(a.until) {
		if !a.renewAt.IsZero() && !now.Before(a.renewAt) && !a.renewing {
			a.renewing = true
			go c.renew(context.WithoutCancel(ctx), key, ask)
		}
		v := a.value
		c.mu.Unlock()
		return v, nil
	}
	c.mu.Unlock()
	if admit != nil {
		if err := admit(); err != nil {
			var none V
			return none, err
		}
	}
	f, _, _ := c.asks.Do(key, func() (any, error) {
		// Detached from the first caller's context, bounded by the
		// timeout: a caller that goes away must not fail the others
		// that joined its ask.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		f := ask(actx)
		c.put(key, f)
		return f, nil
	})
	return f.(fetched[V]).value, f.(fetched[V]).err
}

// renew asks for key's answer again and keeps the new one. An answer
// that withdraws the kept one (refused) drops it at once; when the API
// server could not answer, the kept one lasts until its time ends, not
// renewed again.
func (c *renewal[V]) renew(ctx context.Context, key string, ask fetch[V]) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	f := ask(ctx)
	if f.keep > 0 || f.refused {
		c.put(key, f)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.answers[key]; ok {
		a.renewing = false
		a.renewAt = time.Time{}
	}
}

// put keeps f's answer as key's for f.keep, renewed once asked for in the
// second half of it when f.renew is set; an answer not to be kept forgets
// key.
func (c *renewal[V]) put(key string, f fetched[V]) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.keep <= 0 {
		delete(c.answers, key)
		return
	}
	if _, ok := c.answers[key]; !ok && len(c.answers) >= c.max {
		c.evict(now)
	}
	a := &answer[V]{value: f.value, until: now.Add(f.keep)}
	if f.renew {
		a.renewAt = now.Add(f.keep / 2)
	}
	c.answers[key] = a
}

// evict drops answers until fewer than max are kept: the expired ones,
// then those not renewed (denials: a flood of them must not push out the
// answers callers keep using), then any. c.mu is held.
func (c *renewal[V]) evict(now time.Time) {
	for _, drop := range []func(a *answer[V]) bool{
		func(a *answer[V]) bool { return !now.Before(a.until) },
		func(a *answer[V]) bool { return a.renewAt.IsZero() && !a.renewing },
		func(*answer[V]) bool { return true },
	} {
		for k, a := range c.answers {
			if len(c.answers) < c.max {
				return
			}
			if drop(a) {
				delete(c.answers, k)
			}
		}
	}
}

// decision is a kept answer of a SubjectAccessReview.
type decision struct {
	verdict authorizer.Decision
	reason  string
}

// renewedDecisions keeps the decisions of next: an allowed one for
// allowed, renewed in the background once asked for in the second half of
// it (renewal), so that a caller that keeps calling waits for no review
// after its first, and a revoked permission is denied from the renewal's
// answer on; a denied one for denied, not renewed (a caller granted the
// permission since is allowed once it ends); one next could not make
// (an error) not at all.
type renewedDecisions struct {
	next            authorizer.Authorizer
	allowed, denied time.Duration
	answers         *renewal[decision]
}

// Authorize implements authorizer.Authorizer.
func (d renewedDecisions) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	return d.decide(ctx, a, nil)
}

// decide is Authorize, asking admit (when set) before it asks next for a
// decision not kept: admit's error is returned instead.
func (d renewedDecisions) decide(ctx context.Context, a authorizer.Attributes, admit func() error) (authorizer.Decision, string, error) {
	key, err := decisionKey(a)
	if err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	got, err := d.answers.get(ctx, key, func(ctx context.Context) fetched[decision] {
		verdict, reason, err := d.next.Authorize(ctx, a)
		f := fetched[decision]{value: decision{verdict, reason}, err: err}
		switch {
		case err != nil:
		case verdict == authorizer.DecisionAllow:
			f.keep, f.renew = d.allowed, true
		default:
			// A denial withdraws a kept allowance at once.
			f.keep, f.refused = d.denied, true
		}
		return f
	}, admit)
	return got.verdict, got.reason, err
}

// decisionKey is what tells one decision from another: the caller (name,
// uid, groups, extra) and what they ask, as a SubjectAccessReview's spec
// has them.
func decisionKey(a authorizer.Attributes) (string, error) {
	k := struct {
		User, UID, Verb, Namespace, Group, Version, Resource, Subresource, Name, Path string
		Groups                                                                        []string
		Extra                                                                         map[string][]string
		ResourceRequest                                                               bool
	}{Verb: a.GetVerb(), Namespace: a.GetNamespace(), Group: a.GetAPIGroup(), Version: a.GetAPIVersion(), Resource: a.GetResource(),
		Subresource: a.GetSubresource(), Name: a.GetName(), Path: a.GetPath(), ResourceRequest: a.IsResourceRequest()}
	if u := a.GetUser(); u != nil {
		k.User, k.UID, k.Groups, k.Extra = u.GetName(), u.GetUID(), u.GetGroups(), u.GetExtra()
	}
	b, err := json.Marshal(k)
	if err != nil {
		return "", fmt.Errorf("decision key: %w", err)
	}
	return string(b), nil
}
