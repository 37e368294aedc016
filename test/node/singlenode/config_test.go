package singlenode

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func testConfig(t *testing.T) Config {
	t.Helper()
	return DefaultConfig(t.TempDir(), t.TempDir())
}

func TestDefaultConfigIsValid(t *testing.T) {
	require.NoError(t, testConfig(t).Validate())
}

func TestValidateRefusesWhatCannotWork(t *testing.T) {
	tests := map[string]struct {
		change  func(*Config)
		wantErr string
	}{
		"relative bin dir":       {func(c *Config) { c.BinDir = "bin" }, "BinDir must be an absolute path"},
		"no state dir":           {func(c *Config) { c.StateDir = "" }, "StateDir must be an absolute path"},
		"socket path too long":   {func(c *Config) { c.StateDir = "/" + strings.Repeat("x", 90) }, "too long for containerd's socket"},
		"node IP not IPv4":       {func(c *Config) { c.NodeIP = "fd00::1" }, "NodeIP"},
		"pod CIDR not a CIDR":    {func(c *Config) { c.PodCIDR = "10.0.0.0" }, "PodCIDR"},
		"pods outside cluster":   {func(c *Config) { c.PodCIDR = "10.99.0.0/24" }, "does not contain PodCIDR"},
		"services overlap pods":  {func(c *Config) { c.ServiceCIDR = "10.213.128.0/20" }, "overlaps"},
		"node IP in pod range":   {func(c *Config) { c.NodeIP = "10.213.5.5" }, "inside the pod or Service range"},
		"bridge name too long":   {func(c *Config) { c.Bridge = "a-very-long-bridge-name" }, "Bridge"},
		"no node name":           {func(c *Config) { c.NodeName = "" }, "NodeName"},
		"port out of range":      {func(c *Config) { c.EtcdPort = 70000 }, "EtcdPort"},
		"no pause image":         {func(c *Config) { c.PauseImage = "" }, "PauseImage"},
		"service CIDR malformed": {func(c *Config) { c.ServiceCIDR = "x" }, "ServiceCIDR"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := testConfig(t)
			tc.change(&c)
			err := c.Validate()
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestAddressesDerivedFromTheRanges(t *testing.T) {
	c := testConfig(t)
	assert.Equal(t, "10.213.0.1", c.gatewayIP().String())
	assert.Equal(t, "10.214.0.1", c.apiServiceIP().String())
	assert.Equal(t, "10.214.0.10", c.DNSServiceIP().String())
	assert.Equal(t, "https://10.215.0.1:6443", c.APIServerURL())
}

// TestPodsHaveNoRouteOutOfTheMachine: the CNI configuration gives pods
// routes to the pod range, the Service range and the node only, and no
// masquerading.
func TestPodsHaveNoRouteOutOfTheMachine(t *testing.T) {
	c := testConfig(t)
	data, err := cniConfig(c, c.firstNode())
	require.NoError(t, err)
	var conf struct {
		Plugins []struct {
			Type      string `json:"type"`
			Bridge    string `json:"bridge"`
			IPMasq    bool   `json:"ipMasq"`
			IsGateway bool   `json:"isGateway"`
			IsDefault bool   `json:"isDefaultGateway"`
			IPAM      struct {
				Routes []struct {
					Dst string `json:"dst"`
				} `json:"routes"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	require.NoError(t, json.Unmarshal(data, &conf))
	require.Len(t, conf.Plugins, 1)
	p := conf.Plugins[0]
	assert.Equal(t, "bridge", p.Type)
	assert.Equal(t, c.Bridge, p.Bridge)
	assert.False(t, p.IPMasq, "no masquerade")
	assert.False(t, p.IsDefault, "no default route")
	var dsts []string
	for _, r := range p.IPAM.Routes {
		dsts = append(dsts, r.Dst)
	}
	assert.ElementsMatch(t, []string{c.ClusterCIDR, c.ServiceCIDR, c.NodeIP + "/32"}, dsts)
	assert.NotContains(t, dsts, "0.0.0.0/0")
}

// TestGuardKeepsTrafficOnTheMachine: from the bridge only the cluster's
// own destinations pass, and nothing from outside reaches a pod or the node.
func TestGuardKeepsTrafficOnTheMachine(t *testing.T) {
	c := testConfig(t)
	rules := guardRules(c)
	joined := make([]string, len(rules))
	for i, r := range rules {
		joined[i] = strings.Join(r, " ")
	}
	assert.Equal(t, []string{
		"-i kfn0 -d 10.213.0.0/16 -j RETURN",
		"-i kfn0 -d 10.214.0.0/16 -j RETURN",
		"-i kfn0 -d 10.215.0.1/32 -j RETURN",
		"-i kfn0 -j DROP",
		"! -i kfn0 -d 10.213.0.0/16 -j DROP",
		"! -i lo -d 10.215.0.1/32 -j DROP",
	}, joined)
}

func TestKubeletConfiguration(t *testing.T) {
	c := testConfig(t)
	data, err := kubeletConfig(c, c.firstNode())
	require.NoError(t, err)
	var conf map[string]any
	require.NoError(t, json.Unmarshal(data, &conf))
	assert.Equal(t, false, conf["failCgroupV1"], "cgroup v1 hosts are accepted")
	assert.Equal(t, "cgroupfs", conf["cgroupDriver"])
	assert.Equal(t, "/"+cgroupParent, conf["cgroupRoot"], "Down finds every pod under it")
	assert.Equal(t, c.NodeIP, conf["address"])
	assert.Equal(t, []any{"10.214.0.10"}, conf["clusterDNS"])
	assert.Equal(t, "", conf["resolvConf"], "pods get no name server of the host")
	assert.EqualValues(t, 100, conf["imageGCHighThresholdPercent"], "imported images are never collected")
	assert.Equal(t, "unix://"+c.ContainerdSocket(), conf["containerRuntimeEndpoint"])
}

func TestKubeProxyOpensNodePortsOnTheNodeAddressOnly(t *testing.T) {
	c := testConfig(t)
	data, err := kubeProxyConfig(c, c.firstNode())
	require.NoError(t, err)
	var conf map[string]any
	require.NoError(t, json.Unmarshal(data, &conf))
	assert.Equal(t, []any{c.NodeIP + "/32"}, conf["nodePortAddresses"])
	assert.Equal(t, "iptables", conf["mode"])
	assert.Equal(t, c.ClusterCIDR, conf["clusterCIDR"])
	for _, k := range []string{"healthzBindAddress", "metricsBindAddress"} {
		assert.True(t, strings.HasPrefix(conf[k].(string), c.NodeIP+":"), "%s on the node address", k)
	}
}

// TestNetworkPolicyEnforcerRunsAsItsOwnUser: kube-network-policies reads
// the API server with its own certificate (list and watch of pods,
// namespaces and NetworkPolicies, addons.yaml), names the node as the
// kubelet does, serves metrics on the node address only, and does not
// look for NRI, which Debian's containerd 1.6 lacks.
func TestNetworkPolicyEnforcerRunsAsItsOwnUser(t *testing.T) {
	c := testConfig(t)
	bin := filepath.Join(c.BinDir, "kube-network-policies")
	require.NoError(t, os.MkdirAll(c.BinDir, 0o755))
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
	p, err := networkPolicyProcess(c, c.firstNode())
	require.NoError(t, err)
	assert.Equal(t, bin, p.path)
	assert.Equal(t, []string{
		"--kubeconfig=" + c.path("network-policies.kubeconfig"),
		"--hostname-override=" + c.NodeName,
		"--metrics-bind-address=" + c.NodeIP + ":9080",
		"--disable-nri",
		"--nfqueue-id=100",
		"--strict-mode=false",
	}, p.args)

	var buf bytes.Buffer
	require.NoError(t, template.Must(template.New("addons").Parse(addonsTemplate)).Execute(&buf, addonValues{}))
	objs, err := DecodeObjects(buf.Bytes())
	require.NoError(t, err)
	var bound, granted bool
	for _, o := range objs {
		if o.GetName() != NetworkPolicyUser {
			continue
		}
		switch o.GetKind() {
		case "ClusterRole":
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			granted = len(rules) == 2
			for _, r := range rules {
				verbs, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "verbs")
				assert.Equal(t, []string{"list", "watch"}, verbs, "it reads, never writes")
			}
		case "ClusterRoleBinding":
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			require.Len(t, subjects, 1)
			bound = subjects[0].(map[string]any)["name"] == NetworkPolicyUser
		}
	}
	assert.True(t, granted && bound, "addons.yaml grants the enforcer's user its reads")
}

// TestPolicyChainQueuesNewPodConnectionsOnly: the first packet of every
// new connection from or to a pod goes to the enforcer's queue, bypassed
// while nothing listens; nothing else does.
func TestPolicyChainQueuesNewPodConnectionsOnly(t *testing.T) {
	c := testConfig(t)
	rules := policyRules(c)
	require.Len(t, rules, 2)
	assert.Equal(t, []string{"-s", c.ClusterCIDR}, rules[0][:2])
	assert.Equal(t, []string{"-d", c.ClusterCIDR}, rules[1][:2])
	for _, r := range rules {
		line := strings.Join(r, " ")
		assert.Contains(t, line, "--ctstate NEW -j NFQUEUE --queue-num 100 --queue-bypass")
	}
	assert.Equal(t, []string{"FORWARD", "INPUT"}, policyHooks, "the node's own connections (OUTPUT) are not judged")
}

func TestContainerdConfiguration(t *testing.T) {
	c := testConfig(t)
	conf := containerdConfig(c, c.firstNode())
	for _, want := range []string{
		`address = "` + c.ContainerdSocket() + `"`,
		`sandbox_image = "` + c.PauseImage + `"`,
		"netns_mounts_under_state_dir = true",
		"restrict_oom_score_adj = true",
		"SystemdCgroup = false",
		`conf_dir = "` + c.path("cni") + `"`,
	} {
		assert.Contains(t, conf, want)
	}
}

func TestSaveAndLoadConfig(t *testing.T) {
	c := testConfig(t)
	c.StateDir = t.TempDir()
	require.NoError(t, SaveConfig(c))
	got, err := LoadConfig(c.StateDir)
	require.NoError(t, err)
	assert.Equal(t, c, got)
	_, err = LoadConfig(t.TempDir())
	assert.ErrorContains(t, err, "read cluster configuration")
}

func TestComponentVersion(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeFile(dir+"/VERSIONS", []byte("kubernetes v1.36.4\ncoredns v1.15.0\n")))
	v, err := ComponentVersion(dir, "coredns")
	require.NoError(t, err)
	assert.Equal(t, "v1.15.0", v)
	img, err := CoreDNSImage(dir)
	require.NoError(t, err)
	assert.Equal(t, "localhost/kfn-cluster/coredns:v1.15.0", img)
	_, err = ComponentVersion(dir, "keda")
	assert.ErrorContains(t, err, "names no version of keda")
	_, err = ComponentVersion(t.TempDir(), "keda")
	assert.ErrorContains(t, err, "read versions")
}
