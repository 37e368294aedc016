package depcache

import (
	"fmt"
	"sync/atomic"
)

// namespaceUploads are a namespace's uploads under way on one server.
type namespaceUploads struct {
	uploads int
	bytes   atomic.Int64
}

// claim marks k as uploading on this server and returns its namespace's
// uploads under way; or why it cannot be: k is already being uploaded
// here, or its namespace has MaxNamespaceUploads under way here.
func (c *Cache) claim(k key) (*namespaceUploads, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.uploading[k.name()] {
		return nil, "an upload of these dependencies is under way"
	}
	ns := c.inflight[k.namespace]
	if ns == nil {
		ns = &namespaceUploads{}
		c.inflight[k.namespace] = ns
	}
	if ns.uploads >= c.cfg.MaxNamespaceUploads {
		return nil, fmt.Sprintf("namespace %s has %d uploads under way, as many as it may at once", k.namespace, ns.uploads)
	}
	c.uploading[k.name()] = true
	ns.uploads++
	return ns, ""
}

// uploadsOf is how many uploads of namespace are under way here.
func (c *Cache) uploadsOf(namespace string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ns := c.inflight[namespace]; ns != nil {
		return ns.uploads
	}
	return 0
}

// release ends the upload of k claimed.
func (c *Cache) release(k key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.uploading, k.name())
	if ns := c.inflight[k.namespace]; ns != nil {
		if ns.uploads--; ns.uploads == 0 {
			delete(c.inflight, k.namespace)
		}
	}
}

// inflightBytes is what every upload under way here has read so far.
func (c *Cache) inflightBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, ns := range c.inflight {
		n += ns.bytes.Load()
	}
	return n
}
