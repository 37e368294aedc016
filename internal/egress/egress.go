package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
)

// ErrRefused is wrapped by every error about an address a Policy does not
// let a connection reach.
var ErrRefused = errors.New("address refused")

// Policy says which addresses connections made for a tenant (deliveries,
// Git fetches) may reach. The zero value refuses only the addresses always
// refused (see package doc), loopback among them.
type Policy struct {
	// AllowLoopback lets connections reach loopback addresses: kfn dev,
	// whose functions are processes of the same machine, and tests.
	AllowLoopback bool
	// Networks, when not empty, are the only networks connections may
	// reach (a cluster's pod and Service networks).
	Networks []netip.Prefix
	// Deny, when not nil, refuses further addresses and ports, saying what
	// they are (the API server's). It must be safe for concurrent use.
	Deny func(netip.AddrPort) (what string, denied bool)
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	broadcast   = netip.MustParseAddr("255.255.255.255")
)

// Check returns nil when a connection may reach ap, else an error that
// wraps ErrRefused and says why.
func (p Policy) Check(ap netip.AddrPort) error {
	a := ap.Addr().Unmap()
	var why string
	switch {
	case !a.IsValid():
		why = "not an IP address"
	case a.IsLoopback() && !p.AllowLoopback:
		why = "a loopback address"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		why = "a link-local address (such as the cloud metadata service)"
	case a.IsUnspecified(), thisNetwork.Contains(a):
		why = "an unspecified address"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast(), a == broadcast:
		why = "a multicast or broadcast address"
	}
	if why == "" && p.Deny != nil {
		if what, denied := p.Deny(netip.AddrPortFrom(a, ap.Port())); denied {
			why = what
		}
	}
	if why == "" && len(p.Networks) > 0 && !p.inNetworks(a) && !a.IsLoopback() {
		why = fmt.Sprintf("outside the networks connections may reach (%v)", p.Networks)
	}
	if why != "" {
		return fmt.Errorf("%w: %s is %s", ErrRefused, netip.AddrPortFrom(a, ap.Port()), why)
	}
	return nil
}

func (p Policy) inNetworks(a netip.Addr) bool {
	for _, n := range p.Networks {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// Control is a net.Dialer Control function: it refuses to connect to an
// address that Check refuses. The dial's error then wraps ErrRefused.
func (p Policy) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP address and port: %w", ErrRefused, address, err)
	}
	return p.Check(ap)
}

// ParseNetworks parses comma-separated CIDRs (such as a flag's value); ""
// is none.
func ParseNetworks(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("network %q: %w", f, err)
		}
		out = append(out, n.Masked())
	}
	return out, nil
}

// APIServerService is the address of the Kubernetes API server's Service
// as the kubelet tells every pod (KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT); the zero AddrPort outside a cluster.
func APIServerService() netip.AddrPort {
	ap, err := netip.ParseAddrPort(net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")))
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// DenyAPIServer is a Policy.Deny that refuses the API server's addresses
// (its Service's, its own): the valid ones of addrs.
func DenyAPIServer(addrs ...netip.AddrPort) func(netip.AddrPort) (string, bool) {
	var denied []netip.AddrPort
	for _, a := range addrs {
		if a.IsValid() {
			denied = append(denied, netip.AddrPortFrom(a.Addr().Unmap(), a.Port()))
		}
	}
	return func(a netip.AddrPort) (string, bool) {
		return "the Kubernetes API server's address", slices.Contains(denied, a)
	}
}
