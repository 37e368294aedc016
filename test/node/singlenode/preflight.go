package singlenode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrCannotRun is wrapped by every error of [Preflight]: the machine cannot
// run the cluster (not root, a missing program or kernel feature).
var ErrCannotRun = errors.New("this machine cannot run the single-node cluster")

// Packages are the Debian packages that provide the node's programs
// outside BinDir; test/node/assets.sh installs them when it runs as root.
var Packages = []string{"containerd", "runc", "containernetworking-plugins", "iptables", "conntrack", "iproute2"}

// Preflight checks, without changing anything, that the cluster can start
// here: root, the binaries in BinDir, the container runtime and CNI
// plugins, iptables, the bridge's netfilter hook, overlayfs and cgroups.
// The error names what is missing and how to get it.
func Preflight(cfg Config) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: it must run as root (containers, a bridge and iptables rules), and runs as user %d", ErrCannotRun, os.Geteuid())
	}
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kube-network-policies"} {
		if _, err := cfg.binary(b); err != nil {
			missing = append(missing, filepath.Join(cfg.BinDir, b))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s (test/node/assets.sh builds them)", ErrCannotRun, strings.Join(missing, ", "))
	}
	for _, p := range []string{cfg.ContainerdBin, ctrBinary(cfg), cfg.RuncBin,
		filepath.Join(cfg.CNIBinDir, "bridge"), filepath.Join(cfg.CNIBinDir, "host-local"), filepath.Join(cfg.CNIBinDir, "loopback")} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, c := range []string{"iptables", "ip", "conntrack"} {
		if _, err := exec.LookPath(c); err != nil {
			if _, err := os.Stat(filepath.Join("/usr/sbin", c)); err != nil {
				missing = append(missing, c)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s; install the Debian packages %s (test/node/assets.sh does as root)",
			ErrCannotRun, strings.Join(missing, ", "), strings.Join(Packages, " "))
	}
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil {
		return fmt.Errorf("%w: the kernel has no bridge netfilter (br_netfilter), which kube-proxy's rules need for pods on a bridge", ErrCannotRun)
	}
	fs, err := os.ReadFile("/proc/filesystems")
	if err != nil || !strings.Contains(string(fs), "overlay") {
		return fmt.Errorf("%w: the kernel has no overlay file system, which containerd's snapshotter needs", ErrCannotRun)
	}
	if len(cgroupHierarchies()) == 0 {
		return fmt.Errorf("%w: no cgroup file system is mounted", ErrCannotRun)
	}
	return nil
}
