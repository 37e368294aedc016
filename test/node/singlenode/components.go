package singlenode

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfigs writes a kubeconfig per client certificate of the PKI:
// the administrator's and one per component.
func writeKubeconfigs(cfg Config) error {
	pki := cfg.path("pki")
	for _, name := range []string{"admin", "controller-manager", "scheduler", "kubelet-client", "kube-proxy", "network-policies"} {
		if err := writeKubeconfig(cfg, cfg.path(name+".kubeconfig"), name, filepath.Join(pki, name)); err != nil {
			return err
		}
	}
	return nil
}

// writeKubeconfig writes a kubeconfig at path that reaches the API server
// as user with the certificate and key cert.crt and cert.key.
func writeKubeconfig(cfg Config, path, user, cert string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kfn"] = &clientcmdapi.Cluster{
		Server:               cfg.APIServerURL(),
		CertificateAuthority: cfg.path("pki", "ca.crt"),
	}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificate: cert + ".crt",
		ClientKey:         cert + ".key",
	}
	kc.Contexts["kfn"] = &clientcmdapi.Context{Cluster: "kfn", AuthInfo: user}
	kc.CurrentContext = "kfn"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// etcd keeps the cluster's data in StateDir, without fsync: a lost run is
// started again from nothing.
func etcdProcess(cfg Config) (process, error) {
	bin, err := cfg.binary("etcd")
	if err != nil {
		return process{}, err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(cfg.EtcdPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(cfg.EtcdPort+1)
	return process{name: "etcd", path: bin, args: []string{
		"--name=kfn",
		"--data-dir=" + cfg.path("etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=kfn=" + peer,
		"--listen-metrics-urls=",
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}}, nil
}

func apiServerProcess(cfg Config) (process, error) {
	bin, err := cfg.binary("kube-apiserver")
	if err != nil {
		return process{}, err
	}
	pki := cfg.path("pki")
	f := func(name string) string { return filepath.Join(pki, name) }
	return process{name: "kube-apiserver", path: bin, args: []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(cfg.EtcdPort),
		"--bind-address=" + cfg.NodeIP,
		"--advertise-address=" + cfg.NodeIP,
		"--secure-port=" + strconv.Itoa(cfg.APIServerPort),
		"--service-cluster-ip-range=" + cfg.ServiceCIDR,
		"--tls-cert-file=" + f("apiserver.crt"),
		"--tls-private-key-file=" + f("apiserver.key"),
		"--client-ca-file=" + f("ca.crt"),
		"--kubelet-client-certificate=" + f("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + f("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-key-file=" + f("sa.pub"),
		"--service-account-signing-key-file=" + f("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		// As kubeadm does: privileged pods are a matter of Pod Security
		// admission per namespace, not of the whole cluster.
		"--allow-privileged=true",
		// Aggregated API servers (KEDA's metrics server) authenticate the
		// API server's proxied requests with the front proxy's CA.
		"--requestheader-client-ca-file=" + f("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + f("front-proxy-client.crt"),
		"--proxy-client-key-file=" + f("front-proxy-client.key"),
		"--enable-aggregator-routing=true",
		"--profiling=false",
	}}, nil
}

func controllerManagerProcess(cfg Config) (process, error) {
	bin, err := cfg.binary("kube-controller-manager")
	if err != nil {
		return process{}, err
	}
	kc := cfg.path("controller-manager.kubeconfig")
	pki := cfg.path("pki")
	return process{name: "kube-controller-manager", path: bin, args: []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--secure-port=0",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--root-ca-file=" + filepath.Join(pki, "ca.crt"),
		"--service-account-private-key-file=" + filepath.Join(pki, "sa.key"),
		"--cluster-signing-cert-file=" + filepath.Join(pki, "ca.crt"),
		"--cluster-signing-key-file=" + filepath.Join(pki, "ca.key"),
		"--service-cluster-ip-range=" + cfg.ServiceCIDR,
		"--cluster-cidr=" + cfg.ClusterCIDR,
		"--allocate-node-cidrs=false",
		// A test cluster scales back within a minute, not five.
		"--horizontal-pod-autoscaler-downscale-stabilization=30s",
		"--horizontal-pod-autoscaler-sync-period=5s",
		// A lost node is found NotReady 20 s after its last lease
		// renewal, not 50 s (the default): the node-loss scenarios wait
		// for it. The kubelet renews every 2.5 s (nodeLeaseDurationSeconds
		// 10), so eight renewals in a row must fail, which a loaded
		// machine's API server does not make happen.
		"--node-monitor-grace-period=20s",
		"--node-monitor-period=2s",
	}}, nil
}

func schedulerProcess(cfg Config) (process, error) {
	bin, err := cfg.binary("kube-scheduler")
	if err != nil {
		return process{}, err
	}
	kc := cfg.path("scheduler.kubeconfig")
	return process{name: "kube-scheduler", path: bin, args: []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--secure-port=0",
		"--leader-elect=false",
	}}, nil
}

// containerdConfig is node n's containerd's configuration (format version
// 2, which Debian's containerd 1.6 reads): state and sockets in the node's
// directory, images in its DataDir, runc through the v2 shim with cgroupfs,
// and the node's CNI configuration.
func containerdConfig(cfg Config, n nodeSpec) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  netns_mounts_under_state_dir = true
  enable_selinux = false
  max_container_log_line_size = 16384
  # Without CAP_SYS_RESOURCE (some sandboxes drop it) no process may lower
  # its oom_score_adj, which the kubelet asks for its pause containers
  # (-998) and Guaranteed pods (-997): clamp to containerd's own instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = %q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`,
		filepath.Join(n.DataDir, "containerd"),
		n.path("containerd", "state"),
		n.socket(),
		n.path("containerd", "ttrpc.sock"),
		cfg.PauseImage,
		cfg.RuncBin,
		cfg.CNIBinDir,
		n.path("cni"),
	)
}

func containerdProcess(cfg Config, n nodeSpec) (process, error) {
	path := n.path("containerd.toml")
	if err := writeFile(path, []byte(containerdConfig(cfg, n))); err != nil {
		return process{}, err
	}
	return process{name: "containerd", path: cfg.ContainerdBin, args: []string{"--config=" + path, "--log-level=warn"}}, nil
}

// cniConfig attaches node n's pods to its bridge with addresses from its
// pod range and routes only to the cluster's own ranges and the nodes (the
// first, where the API server is, and its own): a pod has no default
// route, so nothing it sends can leave the machine.
func cniConfig(cfg Config, n nodeSpec) ([]byte, error) {
	gw := n.gatewayIP().String()
	routes := []map[string]string{
		{"dst": cfg.ClusterCIDR, "gw": gw},
		{"dst": cfg.ServiceCIDR, "gw": gw},
		{"dst": cfg.NodeIP + "/32", "gw": gw},
	}
	if n.extra() {
		routes = append(routes, map[string]string{"dst": n.IP + "/32", "gw": gw})
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "kfn",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      cfg.Bridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": n.path("cni-ipam"),
					"ranges":  [][]map[string]string{{{"subnet": n.PodCIDR, "gateway": gw}}},
					"routes":  routes,
				},
			},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

func writeCNIConfig(cfg Config, n nodeSpec) error {
	data, err := cniConfig(cfg, n)
	if err != nil {
		return fmt.Errorf("encode CNI configuration: %w", err)
	}
	if err := os.MkdirAll(n.path("cni"), 0o755); err != nil {
		return fmt.Errorf("create CNI configuration directory: %w", err)
	}
	return writeFile(n.path("cni", "10-kfn.conflist"), data)
}

// kubeletConfig is node n's KubeletConfiguration: cgroupfs on cgroup v1
// (which kubelet 1.35+ refuses unless failCgroupV1 is false), pods under
// the node's cgroup root (kfn-cluster for the first), serving on the
// node's address, no image garbage collection (the images were imported
// and cannot be pulled again) and no eviction on a busy shared disk. An
// extra node keeps its pods' logs in its own directory: a kubelet removes
// the log directories of the pods it does not know, which in the shared
// /var/log/pods are the other nodes'.
func kubeletConfig(cfg Config, n nodeSpec) ([]byte, error) {
	pki := cfg.path("pki")
	conf := map[string]any{
		"apiVersion":   "kubelet.config.k8s.io/v1beta1",
		"kind":         "KubeletConfiguration",
		"address":      n.IP,
		"port":         10250,
		"readOnlyPort": 0,
		"healthzPort":  0,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": filepath.Join(pki, "ca.crt")},
		},
		"authorization":               map[string]any{"mode": "Webhook"},
		"tlsCertFile":                 n.path("pki", "kubelet.crt"),
		"tlsPrivateKeyFile":           n.path("pki", "kubelet.key"),
		"cgroupDriver":                "cgroupfs",
		"cgroupRoot":                  "/" + n.CgroupRoot,
		"failCgroupV1":                false,
		"failSwapOn":                  false,
		"containerRuntimeEndpoint":    "unix://" + n.socket(),
		"clusterDNS":                  []string{cfg.DNSServiceIP().String()},
		"clusterDomain":               "cluster.local",
		"resolvConf":                  "",
		"serializeImagePulls":         false,
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
		},
		"rotateCertificates": false,
		"staticPodPath":      "",
		"syncFrequency":      "10s",
		// Its lease renewed every 2.5 s (a quarter of the duration), for
		// the controller manager's 20 s grace period.
		"nodeLeaseDurationSeconds":  10,
		"nodeStatusUpdateFrequency": "5s",
		"fileCheckFrequency":        "10s",
		"protectKernelDefaults":     false,
	}
	if n.extra() {
		conf["podLogsDir"] = n.path("pod-logs")
	}
	return json.MarshalIndent(conf, "", "  ")
}

func kubeletProcess(cfg Config, n nodeSpec) (process, error) {
	bin, err := cfg.binary("kubelet")
	if err != nil {
		return process{}, err
	}
	data, err := kubeletConfig(cfg, n)
	if err != nil {
		return process{}, fmt.Errorf("encode kubelet configuration: %w", err)
	}
	path := n.path("kubelet.json")
	if err := writeFile(path, data); err != nil {
		return process{}, err
	}
	return process{name: "kubelet", path: bin, args: []string{
		"--config=" + path,
		"--kubeconfig=" + n.path("kubelet-client.kubeconfig"),
		"--root-dir=" + n.path("kubelet"),
		"--cert-dir=" + n.path("kubelet", "pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP,
		"--v=1",
	}}, nil
}

// kubeProxyConfig runs node n's kube-proxy in iptables mode with NodePorts
// opened on the node's address only (never on the machine's other
// interfaces), and leaves the kernel's conntrack settings as they are.
func kubeProxyConfig(cfg Config, n nodeSpec) ([]byte, error) {
	conf := map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"clientConnection":   map[string]any{"kubeconfig": cfg.path("kube-proxy.kubeconfig")},
		"mode":               "iptables",
		"clusterCIDR":        cfg.ClusterCIDR,
		"hostnameOverride":   n.Name,
		"healthzBindAddress": net.JoinHostPort(n.IP, "10256"),
		"metricsBindAddress": net.JoinHostPort(n.IP, "10249"),
		"nodePortAddresses":  []string{n.IP + "/32"},
		"conntrack": map[string]any{
			"maxPerCore":            0,
			"min":                   0,
			"tcpEstablishedTimeout": "0s",
			"tcpCloseWaitTimeout":   "0s",
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

func kubeProxyProcess(cfg Config, n nodeSpec) (process, error) {
	bin, err := cfg.binary("kube-proxy")
	if err != nil {
		return process{}, err
	}
	data, err := kubeProxyConfig(cfg, n)
	if err != nil {
		return process{}, fmt.Errorf("encode kube-proxy configuration: %w", err)
	}
	path := n.path("kube-proxy.json")
	if err := writeFile(path, data); err != nil {
		return process{}, err
	}
	return process{name: "kube-proxy", path: bin, args: []string{"--config=" + path}}, nil
}

// NetworkPolicyUser is the user of the NetworkPolicy enforcer's client
// certificate: it may list and watch pods, namespaces and NetworkPolicies
// (addons.yaml), nothing more.
const NetworkPolicyUser = "system:kube-network-policies"

// networkPolicyMetricsPort is where the enforcer serves its metrics, on
// NodeIP; [Up] waits for it as the sign that the enforcer has started.
const networkPolicyMetricsPort = "9080"

// networkPolicyProcess runs kube-network-policies, the node's NetworkPolicy
// enforcer (what kind runs): it reads the first packet of each new
// connection of a pod from an NFQUEUE (policyChain puts them there) and
// accepts or drops it by the NetworkPolicies it watches. NRI is off:
// Debian's containerd 1.6 has none, so a pod's address comes from the API
// server (a pod's first packets, before the kubelet reports its address,
// are judged without its labels; TCP sends its SYN again). Strict mode is
// off: it re-judges established connections by clearing a conntrack label
// that only its own nftables rules read. It fails open, as kind runs it:
// while it is not running, packets pass.
func networkPolicyProcess(cfg Config, n nodeSpec) (process, error) {
	bin, err := cfg.binary("kube-network-policies")
	if err != nil {
		return process{}, err
	}
	return process{name: "kube-network-policies", path: bin, args: []string{
		"--kubeconfig=" + cfg.path("network-policies.kubeconfig"),
		"--hostname-override=" + n.Name,
		"--metrics-bind-address=" + net.JoinHostPort(n.IP, networkPolicyMetricsPort),
		"--disable-nri",
		"--nfqueue-id=" + networkPolicyQueue,
		"--strict-mode=false",
	}}, nil
}
