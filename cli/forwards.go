package cli

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// keptForwards are port-forwards to kfn's pods kept open between reads, by
// pod and port: kfn view reads the event bridges' metrics every few
// seconds, and a port-forward opened for each read would ask the API
// server and the kubelet for a stream each time. A nil *keptForwards keeps
// none: each forward is opened for one read and closed after it.
type keptForwards struct {
	mu   sync.Mutex
	open map[string]keptForward
}

type keptForward struct {
	pod   string
	local int
	close func()
}

// forward returns the local port of a port-forward to port of pod, opened
// now or kept from before, and a func to call once the read is done,
// told whether it failed: a kept forward that failed is closed (the next
// read opens another; the pod may have gone).
func (k *keptForwards) forward(ctx context.Context, c *cluster, pod string, port int) (int, func(failed bool), error) {
	if k == nil {
		local, stop, err := c.forward(ctx, pod, port)
		if err != nil {
			return 0, nil, err
		}
		return local[0], func(bool) { stop() }, nil
	}
	key := fmt.Sprintf("%s:%d", pod, port)
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.open[key]
	if !ok {
		local, stop, err := c.forward(ctx, pod, port)
		if err != nil {
			return 0, nil, err
		}
		f = keptForward{pod: pod, local: local[0], close: stop}
		k.open[key] = f
	}
	return f.local, func(failed bool) {
		if failed {
			k.mu.Lock()
			defer k.mu.Unlock()
			if k.open[key].local == f.local {
				delete(k.open, key)
			}
			f.close()
		}
	}, nil
}

// prune closes the kept forwards to pods that are not among pods (gone,
// or not ready).
func (k *keptForwards) prune(pods []corev1.Pod) {
	if k == nil {
		return
	}
	live := map[string]bool{}
	for _, p := range pods {
		live[p.Name] = true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, f := range k.open {
		if !live[f.pod] {
			f.close()
			delete(k.open, key)
		}
	}
}

// closeAll closes every kept forward.
func (k *keptForwards) closeAll() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, f := range k.open {
		f.close()
		delete(k.open, key)
	}
}
