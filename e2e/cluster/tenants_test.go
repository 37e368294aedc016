package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/test/node/install"
)

// proberFunction is a Node.js Function that tries, from its own pod and
// with its pod's identity (the projected token of audience kfn every
// Function host sends), each door of kfn's that another namespace's
// events and Functions sit behind, and answers what each did: a status
// code, "refused: ..." (the listener turned it away: a TLS alert, a NATS
// error) or "unreachable: ..." (nothing answered: a NetworkPolicy dropped
// it, or nothing listens).
func proberFunction(name string) string {
	return inlineFunction(name, "nodejs22", nil, `
const fs = require("node:fs"), https = require("node:https"), http2 = require("node:http2"), net = require("node:net");
const token = () => fs.readFileSync(process.env.KFN_IDENTITY_TOKEN_FILE, "utf8").trim();
function httpsStatus(url, method) {
  return new Promise((resolve) => {
    const req = https.request(url, { method, rejectUnauthorized: false, timeout: 5000, headers: { Authorization: "Bearer " + token() } }, (res) => { res.resume(); resolve(String(res.statusCode)); });
    req.on("timeout", () => { req.destroy(); resolve("unreachable: timeout"); });
    req.on("error", (e) => resolve("unreachable: " + (e.code || e.message)));
    req.end();
  });
}
async function httpStatus(url, init) {
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(5000) });
    return String(res.status);
  } catch (e) { return "unreachable: " + ((e.cause && e.cause.code) || e.name); }
}
function grpc(host, port) {
  return new Promise((resolve) => {
    let settled = false;
    const c = http2.connect("https://" + host + ":" + port, { rejectUnauthorized: false });
    const done = (v) => { if (!settled) { settled = true; clearTimeout(timer); c.destroy(); resolve(v); } };
    const timer = setTimeout(() => done("unreachable: timeout"), 5000);
    c.on("error", (e) => done("refused: " + (e.code || e.message)));
    const req = c.request({ ":method": "POST", ":path": "/externalscaler.ExternalScaler/GetMetricSpec", "content-type": "application/grpc", te: "trailers" });
    req.on("response", (h) => done("answered: " + (h["grpc-status"] || h[":status"])));
    req.on("error", (e) => done("refused: " + (e.code || e.message)));
    req.end(Buffer.from([0, 0, 0, 0, 0]));
  });
}
function nats(host, port) {
  return new Promise((resolve) => {
    let settled = false, buf = "", sent = false;
    const s = net.connect({ host, port });
    const done = (v) => { if (!settled) { settled = true; clearTimeout(timer); s.destroy(); resolve(v); } };
    const timer = setTimeout(() => done("unreachable: timeout"), 5000);
    s.on("error", (e) => done("unreachable: " + e.code));
    s.on("data", (d) => {
      buf += d.toString();
      const err = buf.indexOf("-ERR");
      if (err >= 0) return done("refused: " + buf.slice(err).split("\r\n")[0]);
      if (buf.includes("PONG")) return done("connected");
      if (buf.startsWith("INFO") && !sent) { sent = true; s.write('CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n'); }
    });
    s.on("close", () => done("refused: closed after " + JSON.stringify(buf.slice(0, 60))));
  });
}
module.exports = {
  main: async function (event) {
    const t = event.data, auth = { Authorization: "Bearer " + token() };
    const [list, replay, invoke, scaler, natsClient, publishReserved] = await Promise.all([
      httpsStatus(t.admin + "/deadletters?namespace=" + t.victim, "GET"),
      httpsStatus(t.admin + "/deadletters/replay?namespace=" + t.victim + "&subscription=ledger", "POST"),
      httpStatus(t.gateway + "/" + t.victim + "/" + t.victimFunction + "/", { headers: auth }),
      grpc(t.scalerHost, t.scalerPort),
      nats(t.natsHost, t.natsPort),
      httpStatus(t.publisher + "/publish", { method: "POST", body: "{}", headers: { ...auth, "content-type": "application/json",
        "ce-specversion": "1.0", "ce-id": "probe-1", "ce-source": t.reservedSource, "ce-type": "account.opened.v1" } }),
    ]);
    return JSON.stringify({ list, replay, invoke, scaler, nats: natsClient, publishReserved });
  }
}
`)
}

// TestAnotherNamespaceGetsNothingOfA is the tenant boundary on the real
// node, with the chart's defaults: a pod of namespace B, with its own
// identity and no rights in A, tries every door to A's events and
// Functions (A's dead letters, listed and replayed through the admin
// API; A's Function through the gateway; the scaler's gRPC; NATS; a
// publish under a source reserved for another namespace) and each is
// refused, by the listener's identity check or by a NetworkPolicy; A's
// own identities are served. Reserved sources and the scaler's
// ScaledObject rule are proven in TestSendersOnTheRealNode and
// scaler/server's tests.
func TestAnotherNamespaceGetsNothingOfA(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	start := time.Now()
	a, b := namespace(t, "tenant-a"), namespace(t, "tenant-b")
	apply(t, a, answerFunction("ledger", "ledger of A"))
	apply(t, b, proberFunction("prober"))
	waitRunning(t, a, "ledger", 3*time.Minute)
	waitRunning(t, b, "prober", 3*time.Minute)

	scaler := podsOf(t, "app.kubernetes.io/component=scaler")[0]
	natsPod := podsOf(t, "app.kubernetes.io/component=nats")[0]
	targets := map[string]any{
		"victim": a, "victimFunction": "ledger",
		"admin":      fmt.Sprintf("https://%s:8081", eventBridgePod(t).Status.PodIP),
		"gateway":    platform.gateway,
		"publisher":  platform.publisher,
		"scalerHost": scaler.Status.PodIP, "scalerPort": 9090,
		"natsHost": natsPod.Status.PodIP, "natsPort": 4222,
		"reservedSource": bankSource,
	}
	body, err := json.Marshal(targets)
	require.NoError(t, err)
	var got map[string]string
	eventually(t, time.Minute, "the prober in B answers", func() error {
		resp, err := httpClient.Post(functionURL(t, b, "prober"), "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var raw bytes.Buffer
		_, _ = raw.ReadFrom(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%d %s", resp.StatusCode, raw.String())
		}
		s := raw.String()
		if unquoted := ""; json.Unmarshal(raw.Bytes(), &unquoted) == nil {
			s = unquoted
		}
		return json.Unmarshal([]byte(s), &got)
	})
	t.Logf("from namespace %s, with its pod's identity: %v", b, got)
	refused := func(row, outcome string, identity ...string) {
		for _, want := range identity {
			if outcome == want {
				return
			}
		}
		assert.True(t, strings.HasPrefix(outcome, "refused") || strings.HasPrefix(outcome, "unreachable"),
			"%s: %q is neither %v nor a refusal", row, outcome, identity)
	}
	refused("list A's dead letters", got["list"], "403")
	refused("replay A's dead letters", got["replay"], "403")
	refused("call A's Function through the gateway", got["invoke"], "403")
	refused("ask the scaler", got["scaler"])
	refused("connect to NATS", got["nats"])
	refused("publish under a source reserved for "+bankNamespace, got["publishReserved"], "403")

	// A's own identities are served: its ServiceAccount bound to edit in A
	// calls its Function, and its user lists its dead letters with kfn dlq
	// (a port-forward, as users reach the admin API); B's user is refused
	// with the missing permission named.
	code, answer, err := getAs(fmt.Sprintf("%s/%s/ledger/", platform.gateway, a), invoker(t, a))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code, answer)
	assert.Contains(t, answer, "ledger of A")
	userA, userB := kubeconfigOf(t, a, "edit"), kubeconfigOf(t, b, "edit")
	out, err := kfnAs(t, userA, "dlq", "list", "-n", a)
	require.NoError(t, err, "A's user lists A's dead letters: %s", out)
	out, err = kfnAs(t, userB, "dlq", "list", "-n", a)
	require.Error(t, err, "B's user lists A's dead letters: %s", out)
	assert.Contains(t, out, "may not list subscriptions/deadletters")
	// Events' paths likewise: A's user may read A's (none of this id: not
	// found), B's user is refused.
	out, err = kfnAs(t, userA, "trace", "never-published", "-n", a)
	require.Error(t, err, out)
	assert.Contains(t, out, "404", "A's user reads A's paths: %s", out)
	out, err = kfnAs(t, userB, "trace", "never-published", "-n", a)
	require.Error(t, err, "B's user reads A's paths: %s", out)
	assert.Contains(t, out, "may not get subscriptions/events")
	// And kfn view: A's user sees A's Function; B's user, viewing A, sees
	// nothing of it, and the page says what was refused.
	st := viewState(t, startView(t, userA, a))
	require.NotEmpty(t, st.Functions, "A's user sees A's Functions: %v", st.Problems)
	assert.Equal(t, a, st.Functions[0].Namespace)
	st = viewState(t, startView(t, userB, a))
	assert.Empty(t, st.Functions, "B's user sees none of A's Functions")
	assert.Empty(t, st.Subscriptions, "nor Subscriptions")
	assert.Empty(t, st.DeadLetters, "nor dead letters")
	assert.Empty(t, st.Chains, "nor events")
	problems := strings.Join(st.Problems, "\n")
	assert.Contains(t, problems, "forbidden", "the page says what was refused")
	assert.Contains(t, problems, "may not get subscriptions/events")
	t.Logf("tenant boundary checked in %s", time.Since(start).Round(time.Second))
}

// kubeconfigOf writes a kubeconfig for a ServiceAccount of ns bound to
// the cluster role there (a user of that namespace), who may use kfn's
// CLI (the chart's Role <release>-cli), and returns its path.
func kubeconfigOf(t *testing.T, ns, role string) string {
	t.Helper()
	cs := platform.cluster.Clientset
	ctx := t.Context()
	name := "user-" + role
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// kfn's CLI reaches the event bridge through a port-forward: the
	// chart's Role for it, bound as cli.subjects would.
	_, err = cs.RbacV1().RoleBindings(install.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cli-" + ns + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: install.Release + "-cli"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg, err := clientcmd.LoadFromFile(platform.cluster.Config.KubeconfigPath())
	require.NoError(t, err)
	for _, ai := range cfg.AuthInfos {
		ai.ClientCertificate, ai.ClientCertificateData, ai.ClientKey, ai.ClientKeyData = "", nil, "", nil
		ai.Token = tr.Status.Token
	}
	path := filepath.Join(t.TempDir(), ns+"-"+name+".kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}
