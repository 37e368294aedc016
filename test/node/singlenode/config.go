package singlenode

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrInvalidConfig is wrapped by every error that [Config.Validate] returns.
var ErrInvalidConfig = errors.New("invalid cluster configuration")

// Default addresses of the cluster. They are private ranges that few
// machines use; pods get addresses in PodCIDR on the bridge, Services in
// ServiceCIDR, and the node (API server, kubelet) has NodeIP on the bridge.
// Nothing routes them out of the machine.
const (
	DefaultNodeIP      = "10.215.0.1"
	DefaultPodCIDR     = "10.213.0.0/24"
	DefaultClusterCIDR = "10.213.0.0/16"
	DefaultServiceCIDR = "10.214.0.0/16"
	DefaultBridge      = "kfn0"
	DefaultNodeName    = "kfn"
	DefaultStateDir    = "/run/kfn-cluster"
)

// Config says where the cluster's binaries are, where it keeps its files
// and which addresses it uses. [DefaultConfig] fills every field.
type Config struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kubelet and kube-proxy (test/node/assets.sh).
	BinDir string
	// StateDir holds everything of one run: certificates, configuration,
	// logs, process ids, etcd's data, the kubelet's and containerd's
	// run-time state. Down removes it.
	StateDir string
	// DataDir keeps containerd's images and snapshots between runs, so
	// that a second Up does not import the images again. Down keeps it.
	DataDir string
	// NodeName is the Node's name.
	NodeName string
	// NodeIP is the node's address, on the bridge: the API server and the
	// kubelet listen on it, and pods reach them there.
	NodeIP string
	// PodCIDR is the range the node's pods get addresses from; its first
	// address is the bridge's.
	PodCIDR string
	// ClusterCIDR contains PodCIDR: kube-proxy's view of "pod traffic".
	ClusterCIDR string
	// ServiceCIDR is the range of Service cluster IPs; its first address
	// is the kubernetes Service's and its tenth CoreDNS's.
	ServiceCIDR string
	// Bridge is the Linux bridge the pods are attached to.
	Bridge string
	// APIServerPort and EtcdPort are the ports of the API server (on
	// NodeIP) and of etcd (on 127.0.0.1; the peer port is the next one).
	APIServerPort int
	EtcdPort      int
	// ContainerdBin, RuncBin and CNIBinDir name the container runtime's
	// programs (Debian's packages by default).
	ContainerdBin string
	RuncBin       string
	CNIBinDir     string
	// PauseImage is the image of the pods' sandbox containers; it must be
	// imported before pods start (see [Cluster.ImportImages]).
	PauseImage string
}

// DefaultConfig returns the configuration of the cluster for binaries in
// binDir, with images kept under dataDir.
func DefaultConfig(binDir, dataDir string) Config {
	return Config{
		BinDir:        binDir,
		StateDir:      DefaultStateDir,
		DataDir:       dataDir,
		NodeName:      DefaultNodeName,
		NodeIP:        DefaultNodeIP,
		PodCIDR:       DefaultPodCIDR,
		ClusterCIDR:   DefaultClusterCIDR,
		ServiceCIDR:   DefaultServiceCIDR,
		Bridge:        DefaultBridge,
		APIServerPort: 6443,
		EtcdPort:      2479,
		ContainerdBin: "/usr/bin/containerd",
		RuncBin:       "/usr/sbin/runc",
		CNIBinDir:     "/usr/lib/cni",
		PauseImage:    "localhost/kfn-cluster/pause:kfn",
	}
}

// Validate reports the first field that cannot work, wrapping
// [ErrInvalidConfig].
func (c Config) Validate() error {
	for name, dir := range map[string]string{"BinDir": c.BinDir, "StateDir": c.StateDir, "DataDir": c.DataDir} {
		if dir == "" || !filepath.IsAbs(dir) {
			return fmt.Errorf("%w: %s must be an absolute path, got %q", ErrInvalidConfig, name, dir)
		}
	}
	// containerd's socket lives in StateDir; a Unix socket path has at
	// most 107 bytes.
	if len(c.socket()) > 100 {
		return fmt.Errorf("%w: StateDir %q is too long for containerd's socket path", ErrInvalidConfig, c.StateDir)
	}
	if net.ParseIP(c.NodeIP).To4() == nil {
		return fmt.Errorf("%w: NodeIP %q is not an IPv4 address", ErrInvalidConfig, c.NodeIP)
	}
	nets := map[string]*net.IPNet{}
	for name, cidr := range map[string]string{"PodCIDR": c.PodCIDR, "ClusterCIDR": c.ClusterCIDR, "ServiceCIDR": c.ServiceCIDR} {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil || n.IP.To4() == nil {
			return fmt.Errorf("%w: %s %q is not an IPv4 CIDR", ErrInvalidConfig, name, cidr)
		}
		nets[name] = n
	}
	if !nets["ClusterCIDR"].Contains(nets["PodCIDR"].IP) {
		return fmt.Errorf("%w: ClusterCIDR %s does not contain PodCIDR %s", ErrInvalidConfig, c.ClusterCIDR, c.PodCIDR)
	}
	if nets["ClusterCIDR"].Contains(nets["ServiceCIDR"].IP) || nets["ServiceCIDR"].Contains(nets["ClusterCIDR"].IP) {
		return fmt.Errorf("%w: ServiceCIDR %s overlaps ClusterCIDR %s", ErrInvalidConfig, c.ServiceCIDR, c.ClusterCIDR)
	}
	ip := net.ParseIP(c.NodeIP)
	if nets["ClusterCIDR"].Contains(ip) || nets["ServiceCIDR"].Contains(ip) {
		return fmt.Errorf("%w: NodeIP %s is inside the pod or Service range", ErrInvalidConfig, c.NodeIP)
	}
	if c.Bridge == "" || len(c.Bridge) > 15 || strings.ContainsAny(c.Bridge, "/ \t") {
		return fmt.Errorf("%w: Bridge %q is not a valid interface name", ErrInvalidConfig, c.Bridge)
	}
	if c.NodeName == "" {
		return fmt.Errorf("%w: NodeName is empty", ErrInvalidConfig)
	}
	for name, port := range map[string]int{"APIServerPort": c.APIServerPort, "EtcdPort": c.EtcdPort} {
		if port <= 0 || port >= 65535 {
			return fmt.Errorf("%w: %s %d is not a port", ErrInvalidConfig, name, port)
		}
	}
	if c.PauseImage == "" {
		return fmt.Errorf("%w: PauseImage is empty", ErrInvalidConfig)
	}
	return nil
}

// APIServerURL is the address of the API server.
func (c Config) APIServerURL() string {
	return "https://" + net.JoinHostPort(c.NodeIP, strconv.Itoa(c.APIServerPort))
}

// KubeconfigPath is the administrator's kubeconfig (system:masters) that
// Up writes.
func (c Config) KubeconfigPath() string { return filepath.Join(c.StateDir, "admin.kubeconfig") }

// ContainerdSocket is the address of the node's containerd.
func (c Config) ContainerdSocket() string { return c.socket() }

func (c Config) socket() string { return filepath.Join(c.StateDir, "containerd", "containerd.sock") }

// gatewayIP is the bridge's address in PodCIDR, the pods' next hop.
func (c Config) gatewayIP() net.IP {
	_, n, _ := net.ParseCIDR(c.PodCIDR)
	return nthIP(n, 1)
}

// apiServiceIP is the cluster IP of the kubernetes Service.
func (c Config) apiServiceIP() net.IP {
	_, n, _ := net.ParseCIDR(c.ServiceCIDR)
	return nthIP(n, 1)
}

// DNSServiceIP is the cluster IP of the kube-dns Service (CoreDNS).
func (c Config) DNSServiceIP() net.IP {
	_, n, _ := net.ParseCIDR(c.ServiceCIDR)
	return nthIP(n, 10)
}

func nthIP(n *net.IPNet, i byte) net.IP {
	ip := make(net.IP, 4)
	copy(ip, n.IP.To4())
	ip[3] += i
	return ip
}

// path returns a path inside StateDir.
func (c Config) path(elem ...string) string {
	return filepath.Join(append([]string{c.StateDir}, elem...)...)
}

// binary returns the path of a binary in BinDir, or an error naming the
// script that builds it.
func (c Config) binary(name string) (string, error) {
	p := filepath.Join(c.BinDir, name)
	info, err := os.Stat(p)
	if err != nil || info.IsDir() || info.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("no executable %s in %s (test/node/assets.sh builds it)", name, c.BinDir)
	}
	return p, nil
}
