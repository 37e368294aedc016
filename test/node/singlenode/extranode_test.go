package singlenode

import (
	"crypto/x509"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExtraNodesTakeTheNextAddresses: node i is NodeName<i> at the i-th
// address from NodeIP, with the i-th range of PodCIDR's size, its own
// namespace, link, directories and a cgroup inside the first node's.
func TestExtraNodesTakeTheNextAddresses(t *testing.T) {
	c := testConfig(t)
	n, err := c.extraNode(2)
	require.NoError(t, err)
	assert.Equal(t, nodeSpec{
		Index:      2,
		Name:       "kfn2",
		IP:         "10.215.0.2",
		PodCIDR:    "10.213.1.0/24",
		Dir:        filepath.Join(c.StateDir, "nodes", "kfn2"),
		DataDir:    filepath.Join(c.DataDir, "nodes", "kfn2"),
		NetNS:      "kfn0-kfn2",
		HostLink:   "kfn0n2",
		CgroupRoot: "kfn-cluster/kfn2",
	}, n)
	assert.Equal(t, "10.213.1.1", n.gatewayIP().String())
	assert.True(t, n.extra())
	assert.Equal(t, "/run/netns/kfn0-kfn2", n.netnsPath())

	n3, err := c.extraNode(3)
	require.NoError(t, err)
	assert.Equal(t, "10.215.0.3", n3.IP)
	assert.Equal(t, "10.213.2.0/24", n3.PodCIDR)

	first := c.firstNode()
	assert.False(t, first.extra(), "the first node lives in the machine's namespace")
	assert.Equal(t, c.StateDir, first.Dir)
	assert.Equal(t, c.ContainerdSocket(), first.socket())
	assert.Equal(t, cgroupParent, first.CgroupRoot)
}

func TestExtraNodeRefusesWhatCannotWork(t *testing.T) {
	tests := map[string]struct {
		change  func(*Config)
		index   int
		wantErr string
	}{
		"the first node's index": {func(*Config) {}, 1, "not in 2..250"},
		"no pod range left":      {func(c *Config) { c.ClusterCIDR = "10.213.0.0/23" }, 3, "no room for the pod range"},
		"link name too long":     {func(c *Config) { c.Bridge = "kfn-bridge-abc" }, 2, "too long to name node 2's link"},
		"address in pod range":   {func(c *Config) { c.NodeIP = "10.212.255.255" }, 2, "inside the pod or Service range"},
		"invalid cluster":        {func(c *Config) { c.NodeName = "" }, 2, "NodeName"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := testConfig(t)
			tc.change(&c)
			_, err := c.extraNode(tc.index)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// TestFirstNodeConfigurationIsUnchanged: the first node's kubelet keeps
// its pods' logs where it always did and its pods route to the node only.
func TestFirstNodeConfigurationIsUnchanged(t *testing.T) {
	c := testConfig(t)
	data, err := kubeletConfig(c, c.firstNode())
	require.NoError(t, err)
	var conf map[string]any
	require.NoError(t, json.Unmarshal(data, &conf))
	assert.NotContains(t, conf, "podLogsDir")
	assert.Equal(t, filepath.Join(c.StateDir, "pki", "kubelet.crt"), conf["tlsCertFile"])
	p := c.firstNode().wrap(process{name: "kubelet", path: "/bin/kubelet", args: []string{"-v"}})
	assert.Equal(t, process{name: "kubelet", path: "/bin/kubelet", args: []string{"-v"}}, p, "no namespace to enter")
}

// TestExtraNodeConfiguration: an extra node's kubelet, kube-proxy,
// enforcer, containerd and CNI use its own address, directory, cgroup and
// pod range, and the cluster's CA and API server.
func TestExtraNodeConfiguration(t *testing.T) {
	c := testConfig(t)
	n, err := c.extraNode(2)
	require.NoError(t, err)

	data, err := kubeletConfig(c, n)
	require.NoError(t, err)
	var kubelet map[string]any
	require.NoError(t, json.Unmarshal(data, &kubelet))
	assert.Equal(t, "10.215.0.2", kubelet["address"])
	assert.Equal(t, "/kfn-cluster/kfn2", kubelet["cgroupRoot"], "inside the first node's: Down stops its pods too")
	assert.Equal(t, "unix://"+n.socket(), kubelet["containerRuntimeEndpoint"])
	assert.Equal(t, n.path("pod-logs"), kubelet["podLogsDir"], "not the shared /var/log/pods, which the other kubelet cleans")
	assert.Equal(t, n.path("pki", "kubelet.crt"), kubelet["tlsCertFile"])
	assert.Equal(t, filepath.Join(c.StateDir, "pki", "ca.crt"), kubelet["authentication"].(map[string]any)["x509"].(map[string]any)["clientCAFile"])

	data, err = kubeProxyConfig(c, n)
	require.NoError(t, err)
	var proxy map[string]any
	require.NoError(t, json.Unmarshal(data, &proxy))
	assert.Equal(t, "kfn2", proxy["hostnameOverride"])
	assert.Equal(t, []any{"10.215.0.2/32"}, proxy["nodePortAddresses"])
	assert.Equal(t, "10.215.0.2:10256", proxy["healthzBindAddress"])

	require.NoError(t, os.MkdirAll(c.BinDir, 0o755))
	for _, b := range []string{"kubelet", "kube-network-policies"} {
		require.NoError(t, os.WriteFile(filepath.Join(c.BinDir, b), []byte("#!/bin/sh\n"), 0o755))
	}
	enforcer, err := networkPolicyProcess(c, n)
	require.NoError(t, err)
	assert.Contains(t, enforcer.args, "--hostname-override=kfn2")
	assert.Contains(t, enforcer.args, "--metrics-bind-address=10.215.0.2:9080")
	c.StateDir = t.TempDir()
	n, err = c.extraNode(2)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(n.Dir, 0o700))
	kp, err := kubeletProcess(c, n)
	require.NoError(t, err)
	wrapped := n.wrap(kp)
	assert.Equal(t, "kubelet", wrapped.name)
	assert.Equal(t, "nsenter", wrapped.path, "nsenter, not ip netns exec, which mounts a /sys without the machine's cgroups")
	assert.Equal(t, []string{"--net=/run/netns/kfn0-kfn2", "--", kp.path}, wrapped.args[:3])
	assert.Equal(t, kp.args, wrapped.args[3:])
	assert.Contains(t, kp.args, "--hostname-override=kfn2")
	assert.Contains(t, kp.args, "--root-dir="+n.path("kubelet"))

	conf := containerdConfig(c, n)
	for _, want := range []string{
		`root = "` + filepath.Join(c.DataDir, "nodes", "kfn2", "containerd") + `"`,
		`address = "` + n.socket() + `"`,
		`conf_dir = "` + n.path("cni") + `"`,
	} {
		assert.Contains(t, conf, want)
	}

	data, err = cniConfig(c, n)
	require.NoError(t, err)
	text := string(data)
	for _, want := range []string{`"subnet": "10.213.1.0/24"`, `"gateway": "10.213.1.1"`, `"dst": "10.215.0.1/32"`, `"dst": "10.215.0.2/32"`, `"dataDir": "` + n.path("cni-ipam")} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "0.0.0.0/0", "no default route")
}

// TestExtraNodeLinkKeepsTrafficOnTheMachine: from the node's link only the
// cluster's pods and the first node pass (inserted before the first
// node's rules, which drop anything to a pod that does not come from its
// bridge); the machine reaches the node's pods from the first node's
// address, and the node reaches the rest of the cluster through the
// machine.
func TestExtraNodeLinkKeepsTrafficOnTheMachine(t *testing.T) {
	c := testConfig(t)
	n, err := c.extraNode(2)
	require.NoError(t, err)
	var rules []string
	for _, r := range nodeGuardRules(c, n) {
		rules = append(rules, strings.Join(r, " "))
	}
	assert.Equal(t, []string{
		"-i kfn0n2 -d 10.213.0.0/16 -j RETURN",
		"-i kfn0n2 -d 10.215.0.1/32 -j RETURN",
		"-i kfn0n2 -j DROP",
	}, rules)

	var steps []string
	for _, s := range nodeLinkSteps(c, n) {
		steps = append(steps, strings.Join(s, " "))
	}
	for _, want := range []string{
		"ip link add kfn0n2 type veth peer name eth0 netns kfn0-kfn2",
		"ip addr add 10.215.0.1 peer 10.215.0.2/32 dev kfn0n2",
		"ip route add 10.213.1.0/24 via 10.215.0.2 dev kfn0n2 src 10.215.0.1",
		"ip -n kfn0-kfn2 addr add 10.213.1.1/24 dev kfn0",
		"ip -n kfn0-kfn2 route add 10.213.0.0/16 via 10.215.0.1 dev eth0 src 10.215.0.2",
		"ip -n kfn0-kfn2 route add 10.214.0.0/16 dev kfn0 src 10.215.0.2",
	} {
		assert.Contains(t, steps, want)
	}
	for _, s := range steps {
		assert.NotContains(t, s, "default", "no default route anywhere")
		assert.NotContains(t, s, "netns exec")
	}
	assert.Equal(t, "1", nodeSysctls(c)["/proc/sys/net/ipv4/ip_forward"])
}

// TestNodePKIChainsToTheClusterCA: an extra node's certificates are
// signed by the CA the API server trusts, its kubelet serves its own
// address and calls the API server as system:node:<name>.
func TestNodePKIChainsToTheClusterCA(t *testing.T) {
	c := testConfig(t)
	caDir := t.TempDir()
	require.NoError(t, writePKI(caDir, c))
	n, err := c.extraNode(2)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, writeNodePKI(caDir, dir, n))

	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, filepath.Join(caDir, "ca.crt")))
	serving := readCert(t, filepath.Join(dir, "kubelet.crt"))
	_, err = serving.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSName: "10.215.0.2"})
	require.NoError(t, err)
	client := readCert(t, filepath.Join(dir, "kubelet-client.crt"))
	_, err = client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	assert.Equal(t, "system:node:kfn2", client.Subject.CommonName)
	assert.Equal(t, []string{"system:nodes"}, client.Subject.Organization)

	assert.ErrorContains(t, writeNodePKI(t.TempDir(), dir, n), "read the cluster CA")
}

// TestExtraNodesAreFoundAgain: Down finds every extra node by the record
// AddNode writes first, in index order, and none where none was added.
func TestExtraNodesAreFoundAgain(t *testing.T) {
	c := testConfig(t)
	c.StateDir = t.TempDir()
	none, err := extraNodes(c)
	require.NoError(t, err)
	assert.Empty(t, none)
	for _, i := range []int{3, 2} {
		n, err := c.extraNode(i)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(n.Dir, 0o700))
		require.NoError(t, saveNodeSpec(n))
	}
	got, err := extraNodes(c)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "kfn2", got[0].Name)
	assert.Equal(t, "kfn3", got[1].Name)

	require.NoError(t, os.MkdirAll(c.path("nodes", "broken"), 0o700))
	got, err = extraNodes(c)
	assert.ErrorContains(t, err, "read node broken")
	assert.Len(t, got, 2, "the others are still found")
}

// TestKillNodeStopsItsProcessesOnly: killNode sends SIGKILL to the node's
// recorded programs and to whatever names its directory (containerd's
// shims do), and leaves a process of another node alone.
func TestKillNodeStopsItsProcessesOnly(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	tailBin, err := exec.LookPath("tail")
	require.NoError(t, err)
	c := testConfig(t)
	c.StateDir = t.TempDir()
	n, err := c.extraNode(2)
	require.NoError(t, err)
	other, err := c.extraNode(3)
	require.NoError(t, err)
	// Cgroups that do not exist: the test must never touch a real node's.
	n.CgroupRoot = "kfn-unit-test-" + filepath.Base(c.StateDir)
	for _, d := range []string{n.Dir, other.Dir} {
		require.NoError(t, os.MkdirAll(d, 0o700))
		require.NoError(t, writeFile(filepath.Join(d, "watched"), nil))
	}
	require.NoError(t, n.procs(c).start(process{name: "kubelet", path: sleep, args: []string{"60"}}))
	require.NoError(t, n.procs(c).start(process{name: "shim", path: tailBin, args: []string{"-f", filepath.Join(n.Dir, "watched")}}))
	require.NoError(t, other.procs(c).start(process{name: "kubelet", path: tailBin, args: []string{"-f", filepath.Join(other.Dir, "watched")}}))
	kubelet, ok := n.procs(c).recorded("kubelet")
	require.True(t, ok)
	shim, ok := n.procs(c).recorded("shim")
	require.True(t, ok)
	survivor, ok := other.procs(c).recorded("kubelet")
	require.True(t, ok)
	t.Cleanup(func() { _ = terminate(survivor, time.Second) })

	require.NoError(t, killNode(c, n))
	assert.False(t, alive(kubelet), "its kubelet is gone")
	assert.False(t, alive(shim), "what names its directory is gone")
	assert.True(t, alive(survivor), "another node's process lives")
}
