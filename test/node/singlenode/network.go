package singlenode

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"

	"github.com/google/nftables"
)

// guardChain is the iptables chain (raw table, before connection tracking
// and kube-proxy's rules) that keeps the pods' traffic on this machine: a
// packet from the bridge may go only to a pod, a Service or the node, and
// nothing from another interface may reach a pod.
const guardChain = "KFN-CLUSTER-GUARD"

// policyChain is the iptables chain (mangle table, from FORWARD and INPUT)
// that hands the first packet of every new connection to or from a pod to
// the NetworkPolicy enforcer's NFQUEUE, which accepts or drops it.
// kube-network-policies queues them with nftables' own queue expression,
// which kernels without CONFIG_NFT_QUEUE (this machine's among them) lack:
// its nftables table then fails to load (it logs so every second) and
// iptables' NFQUEUE target (xt_NFQUEUE) diverts instead. Where both load,
// a new connection is judged twice, with the same verdict. The queue is
// bypassed while nothing listens on it: without the enforcer everything
// passes, as with kube-network-policies' own rules.
const policyChain = "KFN-CLUSTER-NETPOL"

// networkPolicyQueue is the NFQUEUE the enforcer listens on.
const networkPolicyQueue = "100"

// forwardSysctl is turned on while the cluster runs (a pod's packet to a
// Service is routed back onto the bridge after kube-proxy's DNAT) and set
// back to its earlier value by Down.
const forwardSysctl = "/proc/sys/net/ipv4/ip_forward"

// setUpNetwork creates the bridge with the pods' gateway address, gives the
// loopback interface the node's address, turns on IP forwarding and installs the guard chain
// and the policy chain.
func setUpNetwork(cfg Config) error {
	if hasAddr("lo", cfg.NodeIP) {
		return fmt.Errorf("the node address %s is on lo already: another cluster runs, or a run was not torn down (run Down)", cfg.NodeIP)
	}
	if _, err := net.InterfaceByName(cfg.Bridge); err == nil {
		return fmt.Errorf("interface %s exists already: another cluster runs, or a run was not torn down (run Down)", cfg.Bridge)
	}
	_, pods, _ := net.ParseCIDR(cfg.PodCIDR)
	ones, _ := pods.Mask.Size()
	steps := [][]string{
		{"ip", "link", "add", cfg.Bridge, "type", "bridge"},
		// The CNI bridge plugin wants the gateway address alone on the
		// bridge; the node's address lives on the loopback interface,
		// where pods reach it through the gateway.
		{"ip", "addr", "add", fmt.Sprintf("%s/%d", cfg.gatewayIP(), ones), "dev", cfg.Bridge},
		{"ip", "addr", "add", cfg.NodeIP + "/32", "dev", "lo"},
		{"ip", "link", "set", cfg.Bridge, "up"},
		// The host's own connections to Service addresses leave through
		// the bridge, never by the default route, even before kube-proxy
		// has written its rules.
		{"ip", "route", "add", cfg.ServiceCIDR, "dev", cfg.Bridge, "src", cfg.NodeIP},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			return err
		}
	}
	// No IPv6 on the bridge: pods get no address to reach anything with.
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+cfg.Bridge+"/disable_ipv6", []byte("1"), 0o644)
	if err := enableForwarding(cfg); err != nil {
		return err
	}
	if err := installGuard(cfg); err != nil {
		return err
	}
	return installPolicyChain(cfg, cfg.firstNode())
}

// enableForwarding records the current ip_forward value in StateDir, once,
// and sets it to 1.
func enableForwarding(cfg Config) error {
	saved := cfg.path("ip_forward.saved")
	if _, err := os.Stat(saved); errors.Is(err, os.ErrNotExist) {
		old, err := os.ReadFile(forwardSysctl)
		if err != nil {
			return fmt.Errorf("read %s: %w", forwardSysctl, err)
		}
		if err := writeFile(saved, old); err != nil {
			return err
		}
	}
	if err := os.WriteFile(forwardSysctl, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("turn on IP forwarding: %w", err)
	}
	return nil
}

// guardRules are the rules of the guard chain, in order.
func guardRules(cfg Config) [][]string {
	br := cfg.Bridge
	return [][]string{
		{"-i", br, "-d", cfg.ClusterCIDR, "-j", "RETURN"},
		{"-i", br, "-d", cfg.ServiceCIDR, "-j", "RETURN"},
		{"-i", br, "-d", cfg.NodeIP + "/32", "-j", "RETURN"},
		{"-i", br, "-j", "DROP"},
		{"!", "-i", br, "-d", cfg.ClusterCIDR, "-j", "DROP"},
		{"!", "-i", "lo", "-d", cfg.NodeIP + "/32", "-j", "DROP"},
	}
}

func installGuard(cfg Config) error {
	if err := run("iptables", "-w", "-t", "raw", "-N", guardChain); err != nil {
		return err
	}
	for _, r := range guardRules(cfg) {
		if err := run(append([]string{"iptables", "-w", "-t", "raw", "-A", guardChain}, r...)...); err != nil {
			return err
		}
	}
	return run("iptables", "-w", "-t", "raw", "-I", "PREROUTING", "-j", guardChain)
}

// policyRules are the rules of the policy chain: new connections from or
// to the pods (pod to pod, through a Service or not, and pod to node), the
// node's own connections to pods not among them (they never pass FORWARD),
// so the kubelet's probes and port-forwards are not judged, as
// kube-network-policies leaves root's traffic alone.
func policyRules(cfg Config) [][]string {
	queue := []string{"-m", "conntrack", "--ctstate", "NEW", "-j", "NFQUEUE", "--queue-num", networkPolicyQueue, "--queue-bypass"}
	return [][]string{
		append([]string{"-s", cfg.ClusterCIDR}, queue...),
		append([]string{"-d", cfg.ClusterCIDR}, queue...),
	}
}

// policyHooks are the built-in chains of the mangle table that jump to the
// policy chain.
var policyHooks = []string{"FORWARD", "INPUT"}

// installPolicyChain installs the policy chain in node n's network
// namespace, where its enforcer listens on the queue.
func installPolicyChain(cfg Config, n nodeSpec) error {
	if err := runIn(n, "iptables", "-w", "-t", "mangle", "-N", policyChain); err != nil {
		return err
	}
	for _, r := range policyRules(cfg) {
		if err := runIn(n, append([]string{"iptables", "-w", "-t", "mangle", "-A", policyChain}, r...)...); err != nil {
			return err
		}
	}
	for _, h := range policyHooks {
		if err := runIn(n, "iptables", "-w", "-t", "mangle", "-I", h, "-j", policyChain); err != nil {
			return err
		}
	}
	return nil
}

// runIn runs a command in node n's network namespace (see
// [nodeSpec.wrap]).
func runIn(n nodeSpec, args ...string) error {
	if !n.extra() {
		return run(args...)
	}
	return run(append([]string{nsenterBinary, "--net=" + n.netnsPath(), "--"}, args...)...)
}

// nodeLinkSteps are the commands that join an extra node's network
// namespace to the machine: a veth pair whose machine end has the first
// node's address (the API server's, and the source of the machine's
// packets to the node) and whose node end has the node's; the node's own
// bridge with its pods' gateway address; routes from the machine to the
// node's pods and from the node to the rest of the cluster (the other
// nodes' pods through the machine, Services on its own bridge as on the
// first node, where its kube-proxy translates them). The machine routes
// the first node's pods, as before, and masquerades nothing.
func nodeLinkSteps(cfg Config, n nodeSpec) [][]string {
	_, pods, _ := net.ParseCIDR(n.PodCIDR)
	ones, _ := pods.Mask.Size()
	ns := []string{"ip", "-n", n.NetNS}
	in := func(args ...string) []string { return append(append([]string{}, ns...), args...) }
	return [][]string{
		{"ip", "netns", "add", n.NetNS},
		{"ip", "link", "add", n.HostLink, "type", "veth", "peer", "name", "eth0", "netns", n.NetNS},
		{"ip", "addr", "add", cfg.NodeIP, "peer", n.IP + "/32", "dev", n.HostLink},
		{"ip", "link", "set", n.HostLink, "up"},
		{"ip", "route", "add", n.PodCIDR, "via", n.IP, "dev", n.HostLink, "src", cfg.NodeIP},
		in("link", "set", "lo", "up"),
		in("addr", "add", n.IP, "peer", cfg.NodeIP+"/32", "dev", "eth0"),
		in("link", "set", "eth0", "up"),
		in("link", "add", cfg.Bridge, "type", "bridge"),
		in("addr", "add", fmt.Sprintf("%s/%d", n.gatewayIP(), ones), "dev", cfg.Bridge),
		in("link", "set", cfg.Bridge, "up"),
		in("route", "add", cfg.ClusterCIDR, "via", cfg.NodeIP, "dev", "eth0", "src", n.IP),
		in("route", "add", cfg.ServiceCIDR, "dev", cfg.Bridge, "src", n.IP),
	}
}

// nodeGuardRules are the rules of the guard chain for an extra node's
// link, inserted before the first node's: from the link only the cluster's
// pods and the first node's address may be reached (the node's pods talk
// to the others' and to the API server; its kube-proxy has translated
// Service addresses already). Its own namespace needs no guard: the link
// is its only way out.
func nodeGuardRules(cfg Config, n nodeSpec) [][]string {
	return [][]string{
		{"-i", n.HostLink, "-d", cfg.ClusterCIDR, "-j", "RETURN"},
		{"-i", n.HostLink, "-d", cfg.NodeIP + "/32", "-j", "RETURN"},
		{"-i", n.HostLink, "-j", "DROP"},
	}
}

// nodeSysctls are the kernel settings of an extra node's network
// namespace (each namespace has its own): forwarding on, no IPv6 on its
// bridge and link.
func nodeSysctls(cfg Config) map[string]string {
	return map[string]string{
		"/proc/sys/net/ipv4/ip_forward":                           "1",
		"/proc/sys/net/ipv6/conf/" + cfg.Bridge + "/disable_ipv6": "1",
		"/proc/sys/net/ipv6/conf/eth0/disable_ipv6":               "1",
	}
}

// setUpNodeNetwork gives an extra node its network namespace, link,
// bridge, routes, guard rules and policy chain.
func setUpNodeNetwork(cfg Config, n nodeSpec) error {
	if _, err := os.Stat(n.netnsPath()); err == nil {
		return fmt.Errorf("network namespace %s exists already: another cluster runs, or a run was not torn down (run Down)", n.NetNS)
	}
	for _, s := range nodeLinkSteps(cfg, n) {
		if err := run(s...); err != nil {
			return err
		}
	}
	for path, value := range nodeSysctls(cfg) {
		if err := runIn(n, "sh", "-c", fmt.Sprintf("echo %s > %s", value, path)); err != nil {
			return err
		}
	}
	rules := nodeGuardRules(cfg, n)
	for i := len(rules) - 1; i >= 0; i-- {
		if err := run(append([]string{"iptables", "-w", "-t", "raw", "-I", guardChain, "1"}, rules[i]...)...); err != nil {
			return err
		}
	}
	return installPolicyChain(cfg, n)
}

// tearDownNodeNetwork removes what setUpNodeNetwork made; missing pieces
// are fine. The namespace takes its bridge, its end of the link, its
// iptables rules and its enforcer's nftables table with it.
func tearDownNodeNetwork(cfg Config, n nodeSpec) error {
	var errs []error
	// A rule may be there more than once after crashed runs.
	for _, r := range nodeGuardRules(cfg, n) {
		for i := 0; i < 10; i++ {
			if exec.Command("iptables", append([]string{"-w", "-t", "raw", "-D", guardChain}, r...)...).Run() != nil {
				break
			}
		}
	}
	if _, err := net.InterfaceByName(n.HostLink); err == nil {
		errs = append(errs, run("ip", "link", "del", n.HostLink))
	}
	if _, err := os.Stat(n.netnsPath()); err == nil {
		errs = append(errs, run("ip", "netns", "del", n.NetNS))
	}
	return errors.Join(errs...)
}

// tearDownNetwork removes what setUpNetwork made and restores ip_forward.
// Each step runs even if an earlier one failed; missing pieces are fine.
func tearDownNetwork(cfg Config) error {
	var errs []error
	// The jump may be there more than once after crashed runs.
	for i := 0; i < 10; i++ {
		if exec.Command("iptables", "-w", "-t", "raw", "-D", "PREROUTING", "-j", guardChain).Run() != nil {
			break
		}
	}
	if exec.Command("iptables", "-w", "-t", "raw", "-L", guardChain, "-n").Run() == nil {
		errs = append(errs, run("iptables", "-w", "-t", "raw", "-F", guardChain))
		errs = append(errs, run("iptables", "-w", "-t", "raw", "-X", guardChain))
	}
	errs = append(errs, removeChain("mangle", policyChain))
	if _, err := net.InterfaceByName(cfg.Bridge); err == nil {
		errs = append(errs, run("ip", "link", "del", cfg.Bridge))
	}
	if hasAddr("lo", cfg.NodeIP) {
		errs = append(errs, run("ip", "addr", "del", cfg.NodeIP+"/32", "dev", "lo"))
	}
	if old, err := os.ReadFile(cfg.path("ip_forward.saved")); err == nil {
		if err := os.WriteFile(forwardSysctl, old, 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore IP forwarding: %w", err))
		}
	}
	return errors.Join(errs...)
}

// run runs a command and returns its output in the error when it fails.
func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// hasAddr reports whether interface name has the IPv4 address ip.
func hasAddr(name, ip string) bool {
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return false
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip {
			return true
		}
	}
	return false
}

// networkPolicyTable is the nftables table (family inet) in which
// kube-network-policies queues packets; it leaves the table behind when it
// stops (it fails open, so the table then passes everything).
const networkPolicyTable = "kube-network-policies"

// removeNetworkPolicyTable deletes the enforcer's nftables table if there
// is one.
func removeNetworkPolicyTable() error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("open nftables: %w", err)
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("list nftables tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == networkPolicyTable {
			conn.DelTable(t)
			if err := conn.Flush(); err != nil {
				return fmt.Errorf("delete nftables table inet %s: %w", networkPolicyTable, err)
			}
		}
	}
	return nil
}
