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
	return installPolicyChain(cfg)
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

func installPolicyChain(cfg Config) error {
	if err := run("iptables", "-w", "-t", "mangle", "-N", policyChain); err != nil {
		return err
	}
	for _, r := range policyRules(cfg) {
		if err := run(append([]string{"iptables", "-w", "-t", "mangle", "-A", policyChain}, r...)...); err != nil {
			return err
		}
	}
	for _, h := range policyHooks {
		if err := run("iptables", "-w", "-t", "mangle", "-I", h, "-j", policyChain); err != nil {
			return err
		}
	}
	return nil
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
