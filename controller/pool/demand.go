package pool

import (
	"cmp"
	"slices"
	"time"
)

// Defaults of the demand policy (Config.Window, Config.Idle,
// Config.MaxStandby).
const (
	// DefaultWindow is how far back a pool's wakes size it.
	DefaultWindow = 10 * time.Minute
	// DefaultIdle is how long a pool keeps a standby pod after its
	// Functions last woke or joined it.
	DefaultIdle = time.Hour
	// DefaultMaxStandby is the most standby pods the pool keeps in the
	// cluster.
	DefaultMaxStandby = 100
	// MaxMaxStandby bounds Config.MaxStandby.
	MaxMaxStandby = 10000
)

// demand is what one pool's Functions asked of it: their wakes, counted
// per minute, and when one of them last woke or joined the pool.
type demand struct {
	perMinute map[int64]int // wakes by Unix minute
	last      time.Time
}

// joined notes that a Function joined the pool at now: the pool keeps a
// standby pod for it from then on, for Idle.
func (d *demand) joined(now time.Time) {
	d.last = later(d.last, now)
}

// woke notes a wake at now, and forgets the minutes before window.
func (d *demand) woke(now time.Time, window time.Duration) {
	if d.perMinute == nil {
		d.perMinute = map[int64]int{}
	}
	d.perMinute[now.Unix()/60]++
	d.last = later(d.last, now)
	d.forget(now, window)
}

// forget drops the minutes that ended before now-window.
func (d *demand) forget(now time.Time, window time.Duration) {
	oldest := now.Add(-window).Unix() / 60
	for m := range d.perMinute {
		if m < oldest {
			delete(d.perMinute, m)
		}
	}
}

// want is the standby pods the pool should keep at now: none when its
// Functions have neither woken nor joined it for idle; else as many as
// the most wakes it saw in one minute of the last window (a pod serves
// one wake, and is replaced within seconds), at least one, at most size.
func (d *demand) want(now time.Time, window, idle time.Duration, size int) int {
	if d == nil || now.Sub(d.last) > idle || size <= 0 {
		return 0
	}
	d.forget(now, window)
	peak := 1
	for _, n := range d.perMinute {
		peak = max(peak, n)
	}
	return min(peak, size)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// allocate bounds the standby pods wanted per pool to most in all (most
// <= 0: no bound): in rounds, each namespace that wants one more gets one,
// for the pool of its own that got the fewest so far, the namespaces (and,
// within one, the pools) whose Functions woke or joined last first, until
// most are given. A namespace cannot take the cluster's pods from others
// by waking many Functions, nor by spreading them over many shapes (a
// pool each): every namespace gets its first pod before any gets a
// second, and within a namespace every pool its first before any its
// second.
func allocate(want map[poolKey]int, last map[poolKey]time.Time, most int) map[poolKey]int {
	total := 0
	for _, n := range want {
		total += n
	}
	if most <= 0 || total <= most {
		return want
	}
	keys := make([]poolKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b poolKey) int {
		if c := last[b].Compare(last[a]); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.shape, b.shape))
	})
	// A namespace's pools, in the order of keys; the namespaces in the
	// order of their freshest pool.
	var namespaces [][]poolKey
	at := map[string]int{}
	for _, k := range keys {
		i, ok := at[k.namespace]
		if !ok {
			i = len(namespaces)
			at[k.namespace] = i
			namespaces = append(namespaces, nil)
		}
		namespaces[i] = append(namespaces[i], k)
	}
	got := make(map[poolKey]int, len(want))
	for left := most; left > 0; {
		gave := false
		for _, pools := range namespaces {
			if left == 0 {
				break
			}
			pick, ok := poolKey{}, false
			for _, k := range pools {
				if got[k] < want[k] && (!ok || got[k] < got[pick]) {
					pick, ok = k, true
				}
			}
			if ok {
				got[pick]++
				left--
				gave = true
			}
		}
		if !gave {
			break
		}
	}
	return got
}
