package singlenode

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupParent is the cgroup (in every v1 hierarchy) under which the
// kubelet puts every pod: killing what it holds stops every container.
const cgroupParent = "kfn-cluster"

// kubeletChains are the iptables chains the kubelet makes (its canary, by
// which it notices a flush, the hint of which iptables it uses, and its
// firewall against remote access to 127.0.0.0/8), per table; kube-proxy's
// --cleanup removes kube-proxy's own.
var kubeletChains = map[string][]string{
	"mangle": {"KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"},
	"nat":    {"KUBE-KUBELET-CANARY"},
	"filter": {"KUBE-KUBELET-CANARY", "KUBE-FIREWALL"},
}

// Down stops every process of the cluster described by cfg, its extra
// nodes' included, and removes what it left: containers, mounts, network
// namespaces, cgroups, the bridge and the nodes' links, iptables rules and
// StateDir. DataDir (images) stays. It works
// on a cluster that runs, one that half-started, one whose processes were
// killed, and when there is none at all; each step runs even if an earlier
// one failed, and the error lists every step that failed.
func Down(cfg Config) error {
	var errs []error
	stop := func(name string, grace time.Duration) {
		if err := cfg.stop(name, grace); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", name, err))
		}
	}
	// The extra nodes first (AddNode), then the first node's kubelet, so
	// that it restarts nothing; then the containers and their shims, then
	// containerd and the control plane.
	errs = append(errs, downExtraNodes(cfg))
	stop("kubelet", 10*time.Second)
	stop("kube-proxy", 5*time.Second)
	// It waits 5 s after SIGTERM before it exits.
	stop("kube-network-policies", 10*time.Second)
	errs = append(errs, killCgroup(cgroupParent))
	stop("containerd", 10*time.Second)
	for _, pid := range processesMentioning(cfg.StateDir) {
		if err := terminate(pid, 2*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	stop("kube-scheduler", 5*time.Second)
	stop("kube-controller-manager", 5*time.Second)
	stop("kube-apiserver", 10*time.Second)
	stop("etcd", 10*time.Second)
	errs = append(errs, cleanIptables(cfg))
	errs = append(errs, removeNetworkPolicyTable())
	errs = append(errs, unmountUnder(cfg.StateDir))
	errs = append(errs, unmountUnder(cfg.DataDir))
	errs = append(errs, removeCgroups(cgroupParent))
	errs = append(errs, tearDownNetwork(cfg))
	if err := os.RemoveAll(cfg.StateDir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", cfg.StateDir, err))
	}
	return errors.Join(errs...)
}

// cgroupHierarchies returns the mount points of the cgroup v1 hierarchies
// (cpu, memory, pids, ...) and of a cgroup v2 hierarchy if one is mounted.
func cgroupHierarchies() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		m, ok := parseMountInfo(s.Text())
		if !ok || (m.fsType != "cgroup" && m.fsType != "cgroup2") || seen[m.point] {
			continue
		}
		seen[m.point] = true
		out = append(out, m.point)
	}
	return out
}

// killCgroup sends SIGKILL to every process in the cgroup subtree name of
// every hierarchy, until none is left or ten seconds have passed.
func killCgroup(name string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := cgroupProcs(name)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in cgroup %s survived SIGKILL", pids, name)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cgroupProcs lists the live processes in the subtree name of any hierarchy.
func cgroupProcs(name string) []int {
	set := map[int]bool{}
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, name)
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && alive(pid) {
					set[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(set))
	for pid := range set {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out
}

// removeCgroups removes the subtree name of every hierarchy, deepest first
// (a cgroup directory is removed with rmdir once it is empty).
func removeCgroups(name string) error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, name)
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	point  string
	fsType string
}

// parseMountInfo reads the mount point (field 5) and the file system type
// (the first field after " - ") of a mountinfo line.
func parseMountInfo(line string) (mountEntry, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return mountEntry{}, false
	}
	f := strings.Fields(pre)
	p := strings.Fields(post)
	if len(f) < 5 || len(p) < 1 {
		return mountEntry{}, false
	}
	return mountEntry{point: unescapeMount(f[4]), fsType: p[0]}, true
}

// unescapeMount undoes the octal escapes (\040 for a space, ...) of
// mountinfo paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsUnder returns the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		m, ok := parseMountInfo(line)
		if ok && (m.point == dir || strings.HasPrefix(m.point, prefix)) {
			out = append(out, m.point)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unmountUnder detaches every mount at or below dir (container root file
// systems, volumes, network namespaces, shm).
func unmountUnder(dir string) error {
	if dir == "" {
		return nil
	}
	var errs []error
	// A mount can be stacked on another at the same point: repeat until
	// none is left, a bounded number of times.
	for round := 0; round < 5; round++ {
		points, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, p := range points {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// cleanIptables removes kube-proxy's rules (with its own --cleanup) and the
// kubelet's chains.
func cleanIptables(cfg Config) error {
	var errs []error
	if bin, err := cfg.binary("kube-proxy"); err == nil {
		if out, err := exec.Command(bin, "--cleanup").CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kube-proxy --cleanup: %w: %s", err, tail2(string(out))))
		}
	}
	for table, chains := range kubeletChains {
		for _, chain := range chains {
			errs = append(errs, removeChain(table, chain))
		}
	}
	return errors.Join(errs...)
}

// removeChain deletes every rule of table that jumps to chain, then the
// chain itself. A chain that does not exist is not an error.
func removeChain(table, chain string) error {
	if exec.Command("iptables", "-w", "-t", table, "-L", chain, "-n").Run() != nil {
		return nil
	}
	out, err := exec.Command("iptables", "-w", "-t", table, "-S").Output()
	if err != nil {
		return fmt.Errorf("iptables -t %s -S: %w", table, err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "-A" || f[1] == chain || !jumpsTo(f, chain) {
			continue
		}
		errs = append(errs, run(append([]string{"iptables", "-w", "-t", table, "-D"}, f[1:]...)...))
	}
	errs = append(errs, run("iptables", "-w", "-t", table, "-F", chain))
	errs = append(errs, run("iptables", "-w", "-t", table, "-X", chain))
	return errors.Join(errs...)
}

// jumpsTo reports whether the fields of an iptables -S rule jump to chain.
func jumpsTo(fields []string, chain string) bool {
	for i := 0; i+1 < len(fields); i++ {
		if (fields[i] == "-j" || fields[i] == "-g") && fields[i+1] == chain {
			return true
		}
	}
	return false
}

// tail2 keeps the last lines of a command's output for an error message.
func tail2(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n")
}
