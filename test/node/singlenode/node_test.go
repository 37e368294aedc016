package singlenode

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	block, _ := pem.Decode(data)
	require.NotNil(t, block, path)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

func TestPKIChainsToTheClusterCA(t *testing.T) {
	c := testConfig(t)
	dir := t.TempDir()
	require.NoError(t, writePKI(dir, c))

	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, filepath.Join(dir, "ca.crt")))
	tests := map[string]struct {
		usage x509.ExtKeyUsage
		host  string
		orgs  []string
	}{
		"apiserver":                {x509.ExtKeyUsageServerAuth, "10.215.0.1", nil},
		"kubelet":                  {x509.ExtKeyUsageServerAuth, "10.215.0.1", nil},
		"admin":                    {x509.ExtKeyUsageClientAuth, "", []string{"system:masters"}},
		"kubelet-client":           {x509.ExtKeyUsageClientAuth, "", []string{"system:nodes"}},
		"apiserver-kubelet-client": {x509.ExtKeyUsageClientAuth, "", []string{"system:masters"}},
		"kube-proxy":               {x509.ExtKeyUsageClientAuth, "", nil},
		"network-policies":         {x509.ExtKeyUsageClientAuth, "", nil}, // its own user, not system:masters
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cert := readCert(t, filepath.Join(dir, name+".crt"))
			_, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{tc.usage}, DNSName: tc.host})
			require.NoError(t, err)
			assert.Equal(t, tc.orgs, cert.Subject.Organization)
			info, err := os.Stat(filepath.Join(dir, name+".key"))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "keys are root's only")
		})
	}
	api := readCert(t, filepath.Join(dir, "apiserver.crt"))
	assert.Contains(t, api.DNSNames, "kubernetes.default.svc.cluster.local")
	var ips []string
	for _, ip := range api.IPAddresses {
		ips = append(ips, ip.String())
	}
	assert.Contains(t, ips, "10.214.0.1", "pods reach it through the kubernetes Service")

	front := x509.NewCertPool()
	front.AddCert(readCert(t, filepath.Join(dir, "front-proxy-ca.crt")))
	_, err := readCert(t, filepath.Join(dir, "front-proxy-client.crt")).Verify(x509.VerifyOptions{Roots: front, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err, "aggregated API servers trust the front proxy's own CA")
	assert.FileExists(t, filepath.Join(dir, "sa.key"))
	assert.FileExists(t, filepath.Join(dir, "sa.pub"))
}

// TestProcessStartsDetachedAndStops runs a real process the way the node's
// programs run: recorded, logged, stopped with SIGTERM.
func TestProcessStartsDetachedAndStops(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	c := testConfig(t)
	c.StateDir = t.TempDir()
	require.NoError(t, c.start(process{name: "sleeper", path: sleep, args: []string{"60"}}))
	assert.True(t, c.running("sleeper"))
	pid, ok := c.recorded("sleeper")
	require.True(t, ok)
	assert.FileExists(t, c.logPath("sleeper"))

	require.NoError(t, c.stop("sleeper", 5*time.Second))
	assert.False(t, c.running("sleeper"))
	assert.False(t, alive(pid))
	require.NoError(t, c.stop("sleeper", time.Second), "stopping a stopped process is not an error")
	require.NoError(t, c.stop("never-started", time.Second))
}

func TestRecordOfAnotherProcessIsIgnored(t *testing.T) {
	c := testConfig(t)
	c.StateDir = t.TempDir()
	require.NoError(t, os.MkdirAll(c.path("pids"), 0o700))
	// Our own id with a start time that is not ours: a reused id.
	require.NoError(t, writeFile(c.path("pids", "ghost.pid"), []byte("1 1\n")))
	_, ok := c.recorded("ghost")
	assert.False(t, ok, "a process id whose start time differs is someone else's")
	require.NoError(t, writeFile(c.path("pids", "garbage.pid"), []byte("x\n")))
	_, ok = c.recorded("garbage")
	assert.False(t, ok)
}

func TestParseMountInfo(t *testing.T) {
	tests := map[string]struct {
		line string
		want mountEntry
		ok   bool
	}{
		"overlay rootfs": {
			line: `611 540 0:62 / /run/kfn-cluster/containerd/state/x/rootfs rw,relatime - overlay overlay rw,lowerdir=/a`,
			want: mountEntry{point: "/run/kfn-cluster/containerd/state/x/rootfs", fsType: "overlay"}, ok: true,
		},
		"escaped space": {
			line: `30 25 0:26 / /sys/fs/cgroup/a\040b rw shared:9 - cgroup cgroup rw,cpu`,
			want: mountEntry{point: "/sys/fs/cgroup/a b", fsType: "cgroup"}, ok: true,
		},
		"no separator": {line: `30 25 0:26 / /x rw`},
		"too short":    {line: `30 25 - tmpfs`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := parseMountInfo(tc.line)
			assert.Equal(t, tc.ok, ok)
			if tc.ok {
				assert.Equal(t, tc.want, got)
			}
		})
	}
}

func TestJumpsTo(t *testing.T) {
	assert.True(t, jumpsTo([]string{"-A", "INPUT", "-j", "KUBE-FIREWALL"}, "KUBE-FIREWALL"))
	assert.True(t, jumpsTo([]string{"-A", "INPUT", "-g", "KUBE-FIREWALL"}, "KUBE-FIREWALL"))
	assert.False(t, jumpsTo([]string{"-A", "INPUT", "-j", "KUBE-FIREWALL-2"}, "KUBE-FIREWALL"))
	assert.False(t, jumpsTo([]string{"-A", "INPUT", "-m", "comment", "--comment", "KUBE-FIREWALL"}, "KUBE-FIREWALL"))
}

func TestStatFieldsSurviveOddCommandNames(t *testing.T) {
	f := statFields([]byte("42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 12345 100"))
	require.GreaterOrEqual(t, len(f), 20)
	assert.Equal(t, "S", f[0])
	assert.Equal(t, "12345", f[19])
	assert.Nil(t, statFields([]byte("garbage")))
}

func TestAddonsRender(t *testing.T) {
	var buf bytes.Buffer
	vals := addonValues{CoreDNSImage: "localhost/kfn-cluster/coredns:v1", DNSServiceIP: "10.214.0.10", Volumes: []string{"/v/0", "/v/1"}}
	require.NoError(t, template.Must(template.New("addons").Parse(addonsTemplate)).Execute(&buf, vals))
	objs, err := DecodeObjects(buf.Bytes())
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetKind() == "ConfigMap" {
			corefile, _, _ := unstructured.NestedString(o.Object, "data", "Corefile")
			assert.Contains(t, corefile, "kubernetes cluster.local")
			assert.NotContains(t, corefile, "forward", "CoreDNS forwards nothing out of the machine")
		}
		if o.GetKind() == "Service" {
			ip, _, _ := unstructured.NestedString(o.Object, "spec", "clusterIP")
			assert.Equal(t, "10.214.0.10", ip)
		}
	}
	assert.Equal(t, map[string]int{"ServiceAccount": 1, "ClusterRole": 2, "ClusterRoleBinding": 2, "ConfigMap": 1,
		"Deployment": 1, "Service": 1, "StorageClass": 1, "PersistentVolume": 2}, kinds)
	assert.Contains(t, buf.String(), "image: localhost/kfn-cluster/coredns:v1")
}

func TestDecodeObjectsRefusesBadYAML(t *testing.T) {
	_, err := DecodeObjects([]byte("kind: [unclosed"))
	assert.ErrorContains(t, err, "decode manifest")
	objs, err := DecodeObjects([]byte("---\n---\nkind: A\n"))
	require.NoError(t, err)
	assert.Len(t, objs, 1, "empty documents are skipped")
}

func TestPreflightNamesWhatIsMissing(t *testing.T) {
	c := testConfig(t) // BinDir is empty
	err := Preflight(c)
	require.ErrorIs(t, err, ErrCannotRun)
	if os.Geteuid() != 0 {
		assert.ErrorContains(t, err, "must run as root")
		return
	}
	assert.ErrorContains(t, err, filepath.Join(c.BinDir, "kubelet"))
	assert.ErrorContains(t, err, "test/node/assets.sh builds them")
}
