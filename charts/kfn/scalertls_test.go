package chart_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// scalerDNSName is the name KEDA dials (the controller's scalerAddress).
const scalerDNSName = "kfn-scaler.kfn-system.svc.cluster.local"

// renderForKEDA renders the chart as helm does where KEDA is installed.
func renderForKEDA(t testing.TB, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	manifest, err := renderWithAPIs(t, releaseNamespace, vals, kedaAPI)
	require.NoError(t, err, "render the chart")
	objs, err := decode(manifest)
	require.NoError(t, err)
	return objs
}

// findIn returns the object of kind in namespace named name, or nil.
func findIn(objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

// tlsSecretData decodes a rendered Secret's data.
func tlsSecretData(t testing.TB, o *unstructured.Unstructured) map[string][]byte {
	t.Helper()
	require.NotNil(t, o, "the Secret is rendered")
	s := &corev1.Secret{}
	data, err := yaml.Marshal(o.Object)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, s))
	assert.Equal(t, corev1.SecretTypeTLS, s.Type)
	return s.Data
}

func parseCert(t testing.TB, data []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data)
	require.NotNil(t, b, "a PEM certificate")
	c, err := x509.ParseCertificate(b.Bytes)
	require.NoError(t, err)
	return c
}

// TestScalerMutualTLSByDefault: the default install serves the scaler's
// gRPC only to KEDA. The chart makes a CA, the scaler's certificate (valid
// for the name KEDA dials, for serving) and KEDA's client certificate (for
// clients), puts KEDA's half with the CA in KEDA's namespace and names it
// from the ClusterTriggerAuthentication the controller writes into every
// ScaledObject; the scaler requires client certificates of that CA.
func TestScalerMutualTLSByDefault(t *testing.T) {
	r := typed(t, renderForKEDA(t, nil))
	server := tlsSecretData(t, findIn(r.objs, "Secret", releaseNamespace, "kfn-scaler-tls"))
	keda := tlsSecretData(t, findIn(r.objs, "Secret", "keda", "kfn-scaler-keda-client"))
	assert.Equal(t, server["ca.crt"], keda["ca.crt"], "KEDA trusts the scaler's CA")
	assert.NotContains(t, server, "ca.key", "the CA's key is kept nowhere")

	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(server["ca.crt"]))
	_, err := parseCert(t, server["tls.crt"]).Verify(x509.VerifyOptions{DNSName: scalerDNSName, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.NoError(t, err, "the scaler's certificate serves the name KEDA dials")
	_, err = parseCert(t, keda["tls.crt"]).Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err, "KEDA's certificate is a client certificate of the CA")

	cta := findIn(r.objs, "ClusterTriggerAuthentication", "", "kfn-scaler")
	require.NotNil(t, cta, "KEDA's authentication is made where KEDA is installed")
	refs, _, _ := unstructured.NestedSlice(cta.Object, "spec", "secretTargetRef")
	got := map[string]string{}
	for _, ref := range refs {
		m := ref.(map[string]any)
		assert.Equal(t, "kfn-scaler-keda-client", m["name"])
		assert.Contains(t, keda, m["key"], "every parameter names a key of the Secret")
		got[m["parameter"].(string)] = m["key"].(string)
	}
	assert.Equal(t, map[string]string{"caCert": "ca.crt", "tlsClientCert": "tls.crt", "tlsClientKey": "tls.key"}, got, "the parameters KEDA's external scaler reads")
	assert.Contains(t, r.configMaps["kfn-controller"].Data["controller.yaml"], `scalerAuthentication: "ClusterTriggerAuthentication/kfn-scaler"`)

	scaler := container(t, r.deployments["kfn-scaler"])
	for _, want := range []string{"-tls-cert-file=/etc/kfn/tls/tls.crt", "-tls-key-file=/etc/kfn/tls/tls.key", "-tls-client-ca-file=/etc/kfn/tls/ca.crt"} {
		assert.Contains(t, scaler.Args, want)
	}
	assert.Equal(t, "kfn-scaler-tls", volume(t, r.deployments["kfn-scaler"], "tls").Secret.SecretName)

	t.Run("without KEDA's API, KEDA's half waits for an upgrade", func(t *testing.T) {
		objs := render(t, nil)
		assert.NotNil(t, findIn(objs, "Secret", releaseNamespace, "kfn-scaler-tls"))
		assert.Nil(t, findIn(objs, "Secret", "keda", "kfn-scaler-keda-client"))
		assert.Nil(t, findIn(objs, "ClusterTriggerAuthentication", "", "kfn-scaler"))
		forced := render(t, map[string]any{"scaler": map[string]any{"tls": map[string]any{"kedaAuthentication": map[string]any{"create": true, "kedaNamespace": "autoscaling"}}}})
		assert.NotNil(t, findIn(forced, "Secret", "autoscaling", "kfn-scaler-keda-client"), "create: true, in kedaNamespace")
		assert.NotNil(t, findIn(forced, "ClusterTriggerAuthentication", "", "kfn-scaler"))
		never := renderForKEDA(t, map[string]any{"scaler": map[string]any{"tls": map[string]any{"kedaAuthentication": map[string]any{"create": false}}}})
		assert.Nil(t, findIn(never, "ClusterTriggerAuthentication", "", "kfn-scaler"), "create: false")
	})
	t.Run("a Secret of the user's: nothing generated", func(t *testing.T) {
		objs := renderForKEDA(t, map[string]any{"scaler": map[string]any{"tls": map[string]any{"existingSecret": "mine"}}})
		for _, o := range objs {
			assert.False(t, o.GetKind() == "Secret" && strings.Contains(o.GetName(), "scaler"), "%s/%s", o.GetNamespace(), o.GetName())
			assert.NotEqual(t, "ClusterTriggerAuthentication", o.GetKind())
		}
		assert.Equal(t, "mine", volume(t, typed(t, objs).deployments["kfn-scaler"], "tls").Secret.SecretName)
	})
	t.Run("plain gRPC, one value away", func(t *testing.T) {
		r := typed(t, renderForKEDA(t, map[string]any{"scaler": map[string]any{"tls": map[string]any{"enabled": false, "requireClientCert": false}}}))
		assert.Nil(t, findIn(r.objs, "Secret", releaseNamespace, "kfn-scaler-tls"))
		assert.NotContains(t, r.configMaps["kfn-controller"].Data["controller.yaml"], "scalerAuthentication")
		assert.NotContains(t, strings.Join(container(t, r.deployments["kfn-scaler"]).Args, " "), "-tls-")
		assert.NotNil(t, container(t, r.deployments["kfn-scaler"]).ReadinessProbe.GRPC, "the kubelet's gRPC probe without TLS")
	})
}

// TestScalerCertificatesKeptAcrossUpgrades installs (server dry-run, with
// lookups) where both Secrets exist: their certificates are kept, so that
// an upgrade never cuts KEDA off. Where KEDA's half is missing, the whole
// set is made anew (a CA whose client certificate is lost is of no use).
func TestScalerCertificatesKeptAcrossUpgrades(t *testing.T) {
	if testing.Short() {
		t.Skip("installs against an API server")
	}
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kedaDir := goOutput(t, "list", "-m", "-f", "{{.Dir}}", "github.com/kedacore/keda/v2")
	data, err := os.ReadFile(filepath.Join(kedaDir, "config", "crd", "bases", "keda.sh_clustertriggerauthentications.yaml"))
	require.NoError(t, err, "KEDA's ClusterTriggerAuthentication CRD from the module cache")
	crd := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(data, &crd.Object))
	installCRDs(t, ctx, c, []*unstructured.Unstructured{crd})

	aliasRuns++
	ns, kedaNS := fmt.Sprintf("scaler-tls-%d", aliasRuns), fmt.Sprintf("keda-%d", aliasRuns)
	for _, n := range []string{ns, kedaNS} {
		require.NoError(t, c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	vals := map[string]any{"scaler": map[string]any{"tls": map[string]any{"kedaAuthentication": map[string]any{"create": true, "kedaNamespace": kedaNS}}}}
	rel := helmInstall(t, ns, vals)
	assert.Contains(t, rel.Info.Notes, "Scaler TLS:          mutual (KEDA's client certificate only); KEDA's ClusterTriggerAuthentication kfn-scaler made in this release")
	first := manifestObjects(t, rel.Manifest)
	server := findIn(first, "Secret", ns, "kfnalias-scaler-tls")
	client := findIn(first, "Secret", kedaNS, "kfnalias-scaler-keda-client")
	require.NotNil(t, server)
	require.NotNil(t, client)

	// What the first install made is in the cluster now, as Helm leaves it
	// (owned by the release); the upgrade keeps it.
	for _, o := range []*unstructured.Unstructured{server, client} {
		o = o.DeepCopy()
		o.SetAnnotations(map[string]string{"meta.helm.sh/release-name": aliasRelease, "meta.helm.sh/release-namespace": ns})
		require.NoError(t, c.Client.Create(ctx, o))
	}
	again := manifestObjects(t, helmInstall(t, ns, vals).Manifest)
	assert.Equal(t, tlsSecretData(t, server), tlsSecretData(t, findIn(again, "Secret", ns, "kfnalias-scaler-tls")), "the scaler's certificates are kept")
	assert.Equal(t, tlsSecretData(t, client), tlsSecretData(t, findIn(again, "Secret", kedaNS, "kfnalias-scaler-keda-client")), "KEDA's certificate is kept")

	require.NoError(t, c.Client.Delete(ctx, client.DeepCopy()))
	renewed := manifestObjects(t, helmInstall(t, ns, vals).Manifest)
	newServer := tlsSecretData(t, findIn(renewed, "Secret", ns, "kfnalias-scaler-tls"))
	assert.NotEqual(t, tlsSecretData(t, server)["ca.crt"], newServer["ca.crt"], "KEDA's half lost: a new CA")
	assert.Equal(t, newServer["ca.crt"], tlsSecretData(t, findIn(renewed, "Secret", kedaNS, "kfnalias-scaler-keda-client"))["ca.crt"], "both halves of the same new CA")
}

func manifestObjects(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := decode(manifest)
	require.NoError(t, err)
	return objs
}

// writeScalerTLS writes the rendered scaler Secret's files into a directory
// and returns it, with KEDA's client certificate and key.
func writeScalerTLS(t testing.TB, objs []*unstructured.Unstructured) (dir string, keda map[string][]byte) {
	t.Helper()
	dir = t.TempDir()
	for name, data := range tlsSecretData(t, findIn(objs, "Secret", releaseNamespace, "kfn-scaler-tls")) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	return dir, tlsSecretData(t, findIn(objs, "Secret", "keda", "kfn-scaler-keda-client"))
}

func volume(t testing.TB, d *appsv1.Deployment, name string) corev1.Volume {
	t.Helper()
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("deployment %s has no volume %s", d.Name, name)
	return corev1.Volume{}
}

// scalerCall asks the scaler at addr for its health over TLS as KEDA
// would, dialing the Service's name, with client as its certificate and key
// (nil: none).
func scalerCall(t testing.TB, addr string, ca []byte, client map[string][]byte) error {
	t.Helper()
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca))
	cfg := &tls.Config{RootCAs: roots, ServerName: scalerDNSName, MinVersion: tls.VersionTLS12}
	if client != nil {
		cert, err := tls.X509KeyPair(client["tls.crt"], client["tls.key"])
		require.NoError(t, err)
		cfg.Certificates = []tls.Certificate{cert}
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health: %s", resp.GetStatus())
	}
	return nil
}

// TestCLIRole: kfn's CLI needs to find the event bridge's pods and
// port-forward to them; the Role allows that in the release's namespace
// only, and cli.subjects binds it.
func TestCLIRole(t *testing.T) {
	r := typed(t, render(t, nil))
	role := r.roles["kfn-cli"]
	require.NotNil(t, role)
	assert.Equal(t, releaseNamespace, role.Namespace)
	assert.ElementsMatch(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"get", "create"}},
	}, role.Rules)
	assert.Nil(t, findIn(r.objs, "RoleBinding", releaseNamespace, "kfn-cli"), "bound to no one by default")

	subject := map[string]any{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "developers"}
	binding := findIn(render(t, map[string]any{"cli": map[string]any{"subjects": []any{subject}}}), "RoleBinding", releaseNamespace, "kfn-cli")
	require.NotNil(t, binding)
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	assert.Equal(t, []any{subject}, subjects)
}
