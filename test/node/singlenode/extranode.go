package singlenode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Node is an extra node of a running cluster, started by
// [Cluster.AddNode]: its own kubelet, kube-proxy, NetworkPolicy enforcer
// and containerd, in its own network namespace, with its own pod range,
// cgroup root, run-time state and image store. It shares the machine's
// file system (hostPath volumes are the same directories on every node)
// and the first node's control plane.
type Node struct {
	// Name is the Node's name (the first node's name and its index:
	// kfn2, kfn3, ...).
	Name string
	// IP is the node's address.
	IP string
	// PodCIDR is the range its pods get addresses from.
	PodCIDR string

	cluster *Cluster
	spec    nodeSpec
}

// nodeProcesses are an extra node's own programs, in the order Kill stops
// them: the kubelet first, so that it restarts nothing.
var nodeProcesses = []string{"kubelet", "kube-proxy", "kube-network-policies", "containerd"}

// AddNode starts one more node and returns when it is Ready: its network
// namespace joined to the machine by a veth pair (routes to and from the
// other nodes' pods, guard rules as for the first node's bridge), its
// certificates from the cluster's CA, its containerd (with the image
// archives imported; a pod whose image is not among them cannot start
// there), its kubelet, kube-proxy and NetworkPolicy enforcer. logf reports
// each step (nil: quiet).
//
// The node runs until [Node.Remove] or [Down], which removes every extra
// node with the cluster. On error, what it started is removed again.
func (c *Cluster) AddNode(ctx context.Context, images []string, logf func(format string, args ...any)) (*Node, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	known, err := extraNodes(c.Config)
	if err != nil {
		return nil, err
	}
	index := 2
	for _, n := range known {
		index = max(index, n.Index+1)
	}
	spec, err := c.Config.extraNode(index)
	if err != nil {
		return nil, err
	}
	if err := c.addNode(ctx, spec, images, logf); err != nil {
		return nil, errors.Join(err, removeNode(c.Config, spec))
	}
	return &Node{Name: spec.Name, IP: spec.IP, PodCIDR: spec.PodCIDR, cluster: c, spec: spec}, nil
}

func (c *Cluster) addNode(ctx context.Context, n nodeSpec, images []string, logf func(string, ...any)) error {
	start := time.Now()
	cfg := c.Config
	for _, d := range []string{n.Dir, n.DataDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	// First of all: from here on, Down finds the node.
	if err := saveNodeSpec(n); err != nil {
		return err
	}
	if err := writeNodePKI(cfg.path("pki"), n.path("pki"), n); err != nil {
		return err
	}
	if err := writeKubeconfig(cfg, n.path("kubelet-client.kubeconfig"), "kubelet-client", n.path("pki", "kubelet-client")); err != nil {
		return err
	}
	if err := writeCNIConfig(cfg, n); err != nil {
		return err
	}
	logf("node %s: network namespace %s, link %s, pods %s", n.Name, n.NetNS, n.HostLink, n.PodCIDR)
	if err := setUpNodeNetwork(cfg, n); err != nil {
		return err
	}
	if err := makeCgroupParent(n.CgroupRoot); err != nil {
		return err
	}
	procs := n.procs(cfg)
	if err := startNode(cfg, n, containerdProcess); err != nil {
		return err
	}
	if err := waitFor(ctx, procs, "containerd", time.Minute, containerdReady(n)); err != nil {
		return err
	}
	if len(images) > 0 {
		logf("node %s: importing %d image archives into its containerd", n.Name, len(images))
		if err := importImages(ctx, cfg, n, images); err != nil {
			return err
		}
	}
	logf("node %s: starting its kubelet and kube-proxy", n.Name)
	if err := startNode(cfg, n, kubeletProcess, kubeProxyProcess); err != nil {
		return err
	}
	if err := waitFor(ctx, procs, "kubelet", 2*time.Minute, c.nodeReady(n.Name)); err != nil {
		return err
	}
	if err := startNode(cfg, n, networkPolicyProcess); err != nil {
		return err
	}
	if err := waitFor(ctx, procs, "kube-network-policies", time.Minute, networkPolicyServing(n)); err != nil {
		return err
	}
	logf("node %s is Ready (%s)", n.Name, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// Kill stops every process of the node at once with SIGKILL, as the loss
// of its machine would: its kubelet, kube-proxy, NetworkPolicy enforcer and
// containerd, the containers' shims, and every process of its pods. No
// process gets a signal it could handle, so none of them says goodbye (the
// kernel still closes their connections). Its network namespace, link and
// pods' addresses stay, with nothing behind them. It returns once every
// process is gone.
func (n *Node) Kill() error {
	return killNode(n.cluster.Config, n.spec)
}

// silenceRules are the rules (raw table of the node's namespace) with
// which Disconnect drops every packet: what arrives from the machine or
// from the node's pods (PREROUTING), and what the node's own processes
// send (OUTPUT).
var silenceRules = [][]string{
	{"-t", "raw", "-I", "PREROUTING", "1", "-j", "DROP"},
	{"-t", "raw", "-I", "OUTPUT", "1", "-j", "DROP"},
}

// Disconnect makes the node silent, as a machine that loses its power or
// its network is: its network namespace drops every packet, so that
// nothing of the node answers any more, not even with an error (no
// reset, no ICMP), and what its processes do when they die (closing
// their connections) reaches no one. The rest of the cluster learns of
// the loss only by its own timeouts. Kill afterwards stops the processes
// without anyone seeing it.
func (n *Node) Disconnect() error {
	for _, r := range silenceRules {
		if err := runIn(n.spec, append([]string{"iptables", "-w"}, r...)...); err != nil {
			return fmt.Errorf("disconnect node %s: %w", n.Name, err)
		}
	}
	return nil
}

// Running reports whether the node's kubelet runs.
func (n *Node) Running() bool {
	return n.spec.procs(n.cluster.Config).running("kubelet")
}

// Remove stops the node (as Kill does), removes what it made on the
// machine (network namespace, link, guard rules, mounts, cgroups, its
// directory; its images stay in DataDir for the next node of that index)
// and deletes its Node object, with which the API server forgets its pods.
// It can run more than once.
func (n *Node) Remove(ctx context.Context) error {
	err := removeNode(n.cluster.Config, n.spec)
	if derr := n.cluster.Clientset.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
		err = errors.Join(err, fmt.Errorf("delete node %s: %w", n.Name, derr))
	}
	return err
}

// killNode sends SIGKILL to every process of node n (its programs, then
// whatever mentions its directory: the containerd shims; then its pods'
// cgroups) and waits until they are gone.
func killNode(cfg Config, n nodeSpec) error {
	procs := n.procs(cfg)
	var pids []int
	for _, name := range nodeProcesses {
		if pid, ok := procs.recorded(name); ok {
			pids = append(pids, pid)
		}
	}
	pids = append(pids, processesMentioning(n.Dir+string(os.PathSeparator))...)
	var errs []error
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill process %d of node %s: %w", pid, n.Name, err))
		}
	}
	errs = append(errs, killCgroup(n.CgroupRoot))
	var left []string
	for _, pid := range pids {
		if !waitGone(pid, 10*time.Second) {
			left = append(left, fmt.Sprint(pid))
		}
	}
	if len(left) > 0 {
		errs = append(errs, fmt.Errorf("processes %s of node %s survived SIGKILL", strings.Join(left, ", "), n.Name))
	}
	return errors.Join(errs...)
}

// removeNode stops node n and removes every trace of it on the machine,
// each step even if an earlier one failed. Its DataDir (images) stays.
func removeNode(cfg Config, n nodeSpec) error {
	errs := []error{killNode(cfg, n)}
	errs = append(errs, unmountUnder(n.Dir))
	errs = append(errs, removeCgroups(n.CgroupRoot))
	errs = append(errs, tearDownNodeNetwork(cfg, n))
	if err := os.RemoveAll(n.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", n.Dir, err))
	}
	return errors.Join(errs...)
}

// downExtraNodes removes every extra node recorded in StateDir.
func downExtraNodes(cfg Config) error {
	nodes, err := extraNodes(cfg)
	errs := []error{err}
	for _, n := range nodes {
		errs = append(errs, removeNode(cfg, n))
	}
	return errors.Join(errs...)
}
