package singlenode

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// nodeSpec says where one node of the cluster keeps its files and which
// addresses it has. The first node's is derived from [Config] (its files
// are StateDir itself, it lives in the machine's network namespace); an
// extra node (see [Cluster.AddNode]) has its own directory, network
// namespace, pod range and cgroup root.
type nodeSpec struct {
	// Index is 1 for the first node, 2 for the first extra node, ...
	Index int `json:"index"`
	// Name is the Node's name.
	Name string `json:"name"`
	// IP is the node's address: its kubelet and kube-proxy listen on it.
	IP string `json:"ip"`
	// PodCIDR is the range its pods get addresses from.
	PodCIDR string `json:"podCIDR"`
	// Dir holds its files: certificates, configuration, logs, process
	// ids, the kubelet's and containerd's run-time state.
	Dir string `json:"dir"`
	// DataDir holds its containerd's images; it outlives the node.
	DataDir string `json:"dataDir"`
	// NetNS is its network namespace (under /run/netns), "" for the
	// machine's own.
	NetNS string `json:"netns,omitempty"`
	// HostLink is the machine's end of the veth pair that joins NetNS to
	// the machine, "" for the first node.
	HostLink string `json:"hostLink,omitempty"`
	// CgroupRoot is the cgroup (in every hierarchy) under which its
	// kubelet puts its pods.
	CgroupRoot string `json:"cgroupRoot"`
}

// nodesDir is the directory of StateDir that holds one directory per
// extra node, each with its nodeSpec in node.json.
const nodesDir = "nodes"

// firstNode is the node that [Up] starts.
func (c Config) firstNode() nodeSpec {
	return nodeSpec{
		Index:      1,
		Name:       c.NodeName,
		IP:         c.NodeIP,
		PodCIDR:    c.PodCIDR,
		Dir:        c.StateDir,
		DataDir:    c.DataDir,
		CgroupRoot: cgroupParent,
	}
}

// extraNode is the index-th node (2 or more) of the cluster: named
// NodeName<index>, with the index-th address from NodeIP on, the index-th
// range of PodCIDR's size in ClusterCIDR, its files under
// StateDir/nodes/<name>, its images under DataDir/nodes/<name>, and its pods
// under a cgroup inside the first node's, so that [Down] stops them with
// the first node's.
func (c Config) extraNode(index int) (nodeSpec, error) {
	if index < 2 || index > 250 {
		return nodeSpec{}, fmt.Errorf("%w: node index %d is not in 2..250", ErrInvalidConfig, index)
	}
	if err := c.Validate(); err != nil {
		return nodeSpec{}, err
	}
	name := c.NodeName + strconv.Itoa(index)
	ip := addIP(net.ParseIP(c.NodeIP).To4(), uint32(index-1))
	_, pods, _ := net.ParseCIDR(c.PodCIDR)
	_, cluster, _ := net.ParseCIDR(c.ClusterCIDR)
	_, services, _ := net.ParseCIDR(c.ServiceCIDR)
	ones, bits := pods.Mask.Size()
	podNet := &net.IPNet{IP: addIP(pods.IP.To4(), uint32(index-1)<<(bits-ones)), Mask: pods.Mask}
	if !cluster.Contains(podNet.IP) || !cluster.Contains(lastIP(podNet)) {
		return nodeSpec{}, fmt.Errorf("%w: ClusterCIDR %s has no room for the pod range of node %d", ErrInvalidConfig, c.ClusterCIDR, index)
	}
	if cluster.Contains(ip) || services.Contains(ip) {
		return nodeSpec{}, fmt.Errorf("%w: the address %s of node %d is inside the pod or Service range", ErrInvalidConfig, ip, index)
	}
	link := c.Bridge + "n" + strconv.Itoa(index)
	if len(link) > 15 {
		return nodeSpec{}, fmt.Errorf("%w: Bridge %q is too long to name node %d's link %q", ErrInvalidConfig, c.Bridge, index, link)
	}
	n := nodeSpec{
		Index:      index,
		Name:       name,
		IP:         ip.String(),
		PodCIDR:    podNet.String(),
		Dir:        c.path(nodesDir, name),
		DataDir:    filepath.Join(c.DataDir, nodesDir, name),
		NetNS:      c.Bridge + "-" + name,
		HostLink:   link,
		CgroupRoot: cgroupParent + "/" + name,
	}
	if len(n.socket()) > 100 {
		return nodeSpec{}, fmt.Errorf("%w: StateDir %q is too long for node %s's containerd socket path", ErrInvalidConfig, c.StateDir, name)
	}
	return n, nil
}

func addIP(ip net.IP, n uint32) net.IP {
	out := make(net.IP, 4)
	binary.BigEndian.PutUint32(out, binary.BigEndian.Uint32(ip.To4())+n)
	return out
}

func lastIP(n *net.IPNet) net.IP {
	ones, bits := n.Mask.Size()
	return addIP(n.IP, uint32(1)<<(bits-ones)-1)
}

// extra reports whether n is an extra node (its own network namespace).
func (n nodeSpec) extra() bool { return n.NetNS != "" }

// path returns a path inside the node's directory.
func (n nodeSpec) path(elem ...string) string {
	return filepath.Join(append([]string{n.Dir}, elem...)...)
}

// socket is the address of the node's containerd.
func (n nodeSpec) socket() string { return n.path("containerd", "containerd.sock") }

// gatewayIP is the address of the node's bridge in its pod range.
func (n nodeSpec) gatewayIP() net.IP {
	_, p, _ := net.ParseCIDR(n.PodCIDR)
	return nthIP(p, 1)
}

// netnsPath is the file of the node's network namespace.
func (n nodeSpec) netnsPath() string { return filepath.Join("/run/netns", n.NetNS) }

// procs is the configuration whose StateDir is the node's directory: the
// node's processes keep their logs and ids there (see [Config.start]).
func (n nodeSpec) procs(c Config) Config {
	c.StateDir = n.Dir
	return c
}

// wrap makes p run in the node's network namespace: nsenter joins it and
// executes p's program in the same process, so the recorded id is p's.
// Only the network namespace: `ip netns exec` would also mount a new /sys,
// in which the kubelet does not find the machine's cgroups.
func (n nodeSpec) wrap(p process) process {
	if !n.extra() {
		return p
	}
	return process{name: p.name, path: nsenterBinary, args: append([]string{"--net=" + n.netnsPath(), "--", p.path}, p.args...)}
}

// nsenterBinary runs a program in another network namespace.
const nsenterBinary = "nsenter"

// saveNodeSpec records n in its directory, where [Down] finds it.
func saveNodeSpec(n nodeSpec) error {
	data, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return fmt.Errorf("encode node %s: %w", n.Name, err)
	}
	return writeFile(n.path("node.json"), data)
}

// extraNodes returns the extra nodes recorded under StateDir, by index.
func extraNodes(c Config) ([]nodeSpec, error) {
	entries, err := os.ReadDir(c.path(nodesDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the extra nodes: %w", err)
	}
	var out []nodeSpec
	var errs []error
	for _, e := range entries {
		data, err := os.ReadFile(c.path(nodesDir, e.Name(), "node.json"))
		if err != nil {
			errs = append(errs, fmt.Errorf("read node %s: %w", e.Name(), err))
			continue
		}
		var n nodeSpec
		if err := json.Unmarshal(data, &n); err != nil {
			errs = append(errs, fmt.Errorf("read node %s: %w", e.Name(), err))
			continue
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, errors.Join(errs...)
}
