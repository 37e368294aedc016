package singlenode

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fieldOwner is the field manager of everything the cluster applies itself.
const fieldOwner = "kfn-singlenode"

// volumes is how many PersistentVolumes the node offers (directories in
// StateDir, bound by the default StorageClass): enough for a NATS cluster
// of three and a few tests.
const volumes = 8

//go:embed addons.yaml
var addonsTemplate string

// addonValues fill addons.yaml.
type addonValues struct {
	CoreDNSImage string
	DNSServiceIP string
	Volumes      []string
}

// CoreDNSImage is the name of the CoreDNS image that test/node/images.sh
// makes for the binaries in binDir (the version is in binDir/VERSIONS).
func CoreDNSImage(binDir string) (string, error) {
	v, err := ComponentVersion(binDir, "coredns")
	if err != nil {
		return "", err
	}
	return "localhost/kfn-cluster/coredns:" + v, nil
}

// ComponentVersion reads a component's version from BinDir/VERSIONS, which
// test/node/assets.sh writes.
func ComponentVersion(binDir, component string) (string, error) {
	data, err := os.ReadFile(filepath.Join(binDir, "VERSIONS"))
	if err != nil {
		return "", fmt.Errorf("read versions of the cluster's binaries: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if name, v, ok := strings.Cut(line, " "); ok && name == component {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s names no version of %s", filepath.Join(binDir, "VERSIONS"), component)
}

// installAddons applies what every cluster has beside the node: CoreDNS
// (cluster.local only; it forwards nothing, since pods cannot reach the
// internet) and a default StorageClass with PersistentVolumes that are
// directories in StateDir, writable by any user (pods run as non-root).
func (c *Cluster) installAddons(ctx context.Context) error {
	image, err := CoreDNSImage(c.Config.BinDir)
	if err != nil {
		return err
	}
	vals := addonValues{CoreDNSImage: image, DNSServiceIP: c.Config.DNSServiceIP().String()}
	for i := range volumes {
		dir := c.Config.path("volumes", fmt.Sprintf("pv-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create volume %s: %w", dir, err)
		}
		// MkdirAll obeys the umask; the volume must be writable by the
		// pod's user, whoever it is.
		if err := os.Chmod(dir, 0o1777); err != nil {
			return fmt.Errorf("open volume %s: %w", dir, err)
		}
		vals.Volumes = append(vals.Volumes, dir)
	}
	var buf bytes.Buffer
	if err := template.Must(template.New("addons").Parse(addonsTemplate)).Execute(&buf, vals); err != nil {
		return fmt.Errorf("render addons: %w", err)
	}
	return c.Apply(ctx, buf.Bytes())
}

// Apply applies every object of a multi-document YAML stream with
// server-side apply, in order, as field manager kfn-singlenode.
func (c *Cluster) Apply(ctx context.Context, manifests []byte) error {
	objs, err := DecodeObjects(manifests)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// DecodeObjects reads the objects of a multi-document YAML stream, skipping
// empty documents.
func DecodeObjects(manifests []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	var out []*unstructured.Unstructured
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decode manifest: %w", err)
		}
		if len(o.Object) == 0 {
			continue
		}
		out = append(out, o)
	}
}

// coreDNSReady reports whether CoreDNS's Deployment has a ready replica.
func (c *Cluster) coreDNSReady(ctx context.Context) error {
	d := &appsv1.Deployment{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "coredns"}, d); err != nil {
		return err
	}
	if d.Status.ReadyReplicas < 1 {
		return errors.New("coredns has no ready replica yet")
	}
	return nil
}
