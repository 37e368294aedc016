package endpoints

import (
	"net"
	"sort"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// namedPorts are the ready host:port of one slice, by the name of the
// Service port they serve ("" for a Service's one unnamed port): what a
// request for a port of a Service with several is sent to.
type namedPorts map[string][]string

// readyNamedPorts returns host:port of the ready endpoints of a slice for
// each of its ports, by port name; nil for a slice without ready
// endpoints.
func readyNamedPorts(s *discoveryv1.EndpointSlice) namedPorts {
	var out namedPorts
	for _, p := range s.Ports {
		if p.Port == nil {
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		port := strconv.Itoa(int(*p.Port))
		for _, e := range s.Endpoints {
			if !isReady(e.Conditions) {
				continue
			}
			for _, a := range e.Addresses {
				if out == nil {
					out = namedPorts{}
				}
				out[name] = append(out[name], net.JoinHostPort(a, port))
			}
		}
	}
	return out
}

// setNamedPorts records the ready endpoints of one slice of k by port
// name, and flattens those of k's slices for PickPort. w.mu is held.
func (w *Watcher) setNamedPorts(k service, slice string, ports namedPorts) {
	if len(ports) == 0 {
		delete(w.named[k], slice)
	} else {
		if w.named[k] == nil {
			w.named[k] = map[string]namedPorts{}
		}
		w.named[k][slice] = ports
	}
	if len(w.named[k]) == 0 {
		delete(w.named, k)
		delete(w.namedFlat, k)
		return
	}
	flat := namedPorts{}
	for _, p := range w.named[k] {
		for name, addrs := range p {
			flat[name] = append(flat[name], addrs...)
		}
	}
	for _, addrs := range flat {
		sort.Strings(addrs) // slices come in map order
	}
	w.namedFlat[k] = flat
}

// PickPort returns host:port of a ready endpoint of namespace/name for
// the Service port named port ("" for a Service's one unnamed port: an
// EndpointSlice names its ports as the Service does), taking them in
// turn, from the Service's EndpointSlices only: never its DNS name, which
// for a Service of type ExternalName names whatever its namespace wrote.
// It reports false when none is ready.
func (w *Watcher) PickPort(namespace, name, port string) (string, bool) {
	w.mu.Lock()
	addrs := w.namedFlat[service{namespace, name}][port]
	w.mu.Unlock()
	if len(addrs) == 0 {
		return "", false
	}
	return addrs[int(w.next.Add(1)%uint64(len(addrs)))], true
}
