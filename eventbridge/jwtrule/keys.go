package jwtrule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/kfn-dev/kfn/internal/egress"
)

// KeySetConfig bounds KeySets. Zero values take the defaults.
type KeySetConfig struct {
	// Egress is where key sets may be fetched from: the deliveries' rules.
	Egress egress.Policy
	// Timeout bounds one fetch, redirects included. Default 5 s.
	Timeout time.Duration
	// MaxBytes bounds a key set's body. Default 256 KiB.
	MaxBytes int64
	// MaxKeys bounds the keys kept of one set. Default 64.
	MaxKeys int
	// Refresh is how long a key set is used before it is fetched again.
	// Default 10 min.
	Refresh time.Duration
	// MinRefetch is the least time between two fetches of one set, whatever
	// asks (a token naming a key the set does not have, a failed fetch).
	// Default 30 s.
	MinRefetch time.Duration
	// MaxSets bounds the key sets kept; the least recently used goes.
	// Default 1,000.
	MaxSets int
	// Transport replaces the fetches' transport (tests); nil: one that
	// dials through Egress.
	Transport http.RoundTripper
}

func (c KeySetConfig) withDefaults() KeySetConfig {
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 256 << 10
	}
	if c.MaxKeys <= 0 {
		c.MaxKeys = 64
	}
	if c.Refresh <= 0 {
		c.Refresh = 10 * time.Minute
	}
	if c.MinRefetch <= 0 {
		c.MinRefetch = 30 * time.Second
	}
	if c.MaxSets <= 0 {
		c.MaxSets = 1000
	}
	return c
}

// ErrNoKeys is wrapped by Keys' error when the set could not be fetched
// and none was fetched before.
var ErrNoKeys = errors.New("no keys")

// KeySets fetches and caches the JWKS of issuers by URI. Safe for
// concurrent use.
type KeySets struct {
	cfg    KeySetConfig
	client *http.Client
	now    func() time.Time

	mu   sync.Mutex
	sets map[string]*keySet
}

// keySet is one URI's keys and its fetching. Guarded by KeySets.mu.
type keySet struct {
	keys    []jose.JSONWebKey
	fetched time.Time // of the keys; zero: none yet
	tried   time.Time // the last fetch's start
	err     error     // the last fetch's, nil when it succeeded
	used    time.Time
	// loading is closed when the fetch under way ends; nil when none is.
	loading chan struct{}
}

// NewKeySets returns KeySets bounded by cfg.
func NewKeySets(cfg KeySetConfig) *KeySets {
	cfg = cfg.withDefaults()
	rt := cfg.Transport
	if rt == nil {
		rt = &http.Transport{
			DialContext:            (&net.Dialer{Timeout: cfg.Timeout, Control: cfg.Egress.Control}).DialContext,
			TLSHandshakeTimeout:    cfg.Timeout,
			ResponseHeaderTimeout:  cfg.Timeout,
			MaxResponseHeaderBytes: 64 << 10,
			MaxIdleConnsPerHost:    2,
			IdleConnTimeout:        time.Minute,
		}
	}
	client := &http.Client{Transport: rt, Timeout: cfg.Timeout, CheckRedirect: func(_ *http.Request, via []*http.Request) error {
		if len(via) >= 3 {
			return errors.New("more than 3 redirects")
		}
		return nil // each is dialled through Egress again
	}}
	return &KeySets{cfg: cfg, client: client, now: time.Now, sets: map[string]*keySet{}}
}

// Keys returns the keys of the set at uri that may have signed a token
// whose header names kid ("": every key of the set), fetching the set when
// it has none yet, when its keys are older than Refresh, or when none is
// kid (and the last fetch is MinRefetch old). It waits for a fetch under
// way (at most ctx). When a fetch fails, the keys fetched before are used;
// without any the error wraps ErrNoKeys. A set fetched that has no key
// kid names returns none, and no error.
func (k *KeySets) Keys(ctx context.Context, uri, kid string) ([]jose.JSONWebKey, error) {
	for waited := false; ; waited = true {
		k.mu.Lock()
		now := k.now()
		s := k.sets[uri]
		if s == nil {
			s = &keySet{used: now}
			k.sets[uri] = s
			k.evictLocked()
		}
		s.used = now
		found := pick(s.keys, kid)
		fresh := !s.fetched.IsZero() && now.Sub(s.fetched) < k.cfg.Refresh
		if !waited && (!fresh || len(found) == 0) && s.loading == nil && now.Sub(s.tried) >= k.cfg.MinRefetch {
			s.loading, s.tried = make(chan struct{}), now
			go k.fetch(uri, s)
		}
		loading, err, ever := s.loading, s.err, !s.fetched.IsZero()
		k.mu.Unlock()
		if waited {
			loading = nil // one fetch waited for, whatever came of it
		}
		switch {
		case len(found) > 0 && (fresh || loading == nil):
			// Fresh keys, or the old ones while no fetch is under way
			// (the last failed, or was too recent).
			return found, nil
		case loading == nil && err != nil && !ever:
			return nil, fmt.Errorf("%w: %v", ErrNoKeys, err)
		case loading == nil:
			return nil, nil // the set has no key kid names
		}
		select {
		case <-loading:
			// Its outcome on the next turn, which waits for no other.
		case <-ctx.Done():
			if len(found) > 0 {
				return found, nil // the old keys, while the new ones are on their way
			}
			return nil, fmt.Errorf("%w: %v", ErrNoKeys, ctx.Err())
		}
	}
}

// pick returns the keys of keys that kid names, all of them for "".
func pick(keys []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	if kid == "" {
		return keys
	}
	var out []jose.JSONWebKey
	for _, key := range keys {
		if key.KeyID == kid {
			out = append(out, key)
		}
	}
	return out
}

// fetch fetches s's keys from uri, and ends its loading.
func (k *KeySets) fetch(uri string, s *keySet) {
	keys, err := k.get(uri)
	k.mu.Lock()
	defer k.mu.Unlock()
	s.err = err
	if err == nil {
		s.keys, s.fetched = keys, k.now()
	}
	close(s.loading)
	s.loading = nil
}

// get fetches and parses the key set at uri: its public signing keys,
// at most MaxKeys.
func (k *KeySets) get(uri string) ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(context.Background(), k.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch JWKS: answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, k.cfg.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	if int64(len(body)) > k.cfg.MaxBytes {
		return nil, fmt.Errorf("fetch JWKS: larger than %d bytes", k.cfg.MaxBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, key := range set.Keys {
		if key.Use != "" && key.Use != "sig" || !key.Valid() {
			continue
		}
		if !key.IsPublic() {
			key = key.Public() // never keep a private key an issuer published by mistake
		}
		if len(keys) == k.cfg.MaxKeys {
			break
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, errors.New("fetch JWKS: no signing key in the set")
	}
	return keys, nil
}

// evictLocked drops the least recently used sets past MaxSets (not one
// being fetched). The mu is held.
func (k *KeySets) evictLocked() {
	for len(k.sets) > k.cfg.MaxSets {
		var oldest string
		var at time.Time
		for uri, s := range k.sets {
			if s.loading == nil && (oldest == "" || s.used.Before(at)) {
				oldest, at = uri, s.used
			}
		}
		if oldest == "" {
			return
		}
		delete(k.sets, oldest)
	}
}
