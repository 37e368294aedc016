package eventbridge

import (
	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
)

// ClusterResolver delivers to the base URLs of static (see StaticResolver);
// else, for an http sink, to the next ready endpoint of its Service that
// eps names (each delivery to the next pod, not over a connection that
// kube-proxy pinned to one, and from the moment a pod is ready, not once
// kube-proxy has written its rules); else to the sink as written. eps may
// be nil.
func ClusterResolver(eps *endpoints.Watcher, static map[string]string) dispatcher.Resolver {
	fallback := StaticResolver(static)
	if eps == nil {
		return fallback
	}
	return dispatcher.ResolverFunc(func(sink v1alpha2.Sink) (string, error) {
		if _, ok := static[sink.Service+"."+sink.Namespace]; ok || sink.URL == nil || sink.URL.Scheme != "http" {
			return fallback.Resolve(sink)
		}
		addr, ok := eps.Pick(sink.Namespace, sink.Service)
		if !ok {
			return fallback.Resolve(sink)
		}
		u := *sink.URL
		u.Host = addr
		return u.String(), nil
	})
}

// StaticResolver delivers to the base URLs of m, keyed "<service>.<namespace>",
// with the sink's path and query; other sinks as written.
func StaticResolver(m map[string]string) dispatcher.Resolver {
	return dispatcher.ResolverFunc(func(sink v1alpha2.Sink) (string, error) {
		base, ok := m[sink.Service+"."+sink.Namespace]
		if !ok {
			return dispatcher.DirectResolver.Resolve(sink)
		}
		u := base + sink.URL.EscapedPath()
		if sink.URL.RawQuery != "" {
			u += "?" + sink.URL.RawQuery
		}
		return u, nil
	})
}
