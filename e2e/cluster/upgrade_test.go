package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/node/install"
	"github.com/kfn-dev/kfn/test/node/singlenode"
)

// previousRelease reads the commit of main the upgrade scenario installs
// first from test/node/previous-release (which says why that one), the
// file test/node/prepare.sh builds its images from beside the package
// tests.
func previousRelease(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "test", "node", "previous-release"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			return line
		}
	}
	t.Fatal("test/node/previous-release names no commit")
	return ""
}

// upgradeRestarts is how many pods that hold deliveries or lead the event
// stream's consumers the upgrade from the previous release restarts under
// the load: the event bridge and the NATS server. Each may leave up to
// faultInFlight deliveries unacknowledged, delivered again: the duplicate
// bound.
const upgradeRestarts = 2

// TestUpgradeUnderLoad upgrades kfn on the real node as a user would.
//
// From the previous release (chart 0.1.0, built from previousRelease's
// sources: its images, its chart, its CRDs) to this checkout's chart with
// profile small, under a steady publish load (helm upgrade
// --reset-then-reuse-values --take-ownership --force-conflicts, as the
// chart's README says): every acknowledged event is delivered, at most
// faultInFlight duplicates per restarted pod (upgradeRestarts), a Function
// answers HTTP on its Service throughout, the event stream is the same
// stream (its creation time) with its sequence going on and this
// checkout's configuration, and the CRDs are this checkout's.
//
// Then from small to ha (1 to 3 NATS servers, R1 to R3) as the README's
// "From small to ha" says: publishing stopped and every event delivered,
// helm upgrade --set profile=ha, the first NATS server restarted by hand
// into the new cluster (the StatefulSet would not: the two new servers
// wait for it to make a quorum, and it is not restarted while they are
// not ready), then publishing again: three servers, the streams and the
// lock bucket R3, every event published after it delivered, the Function
// answering throughout. NATS does not carry a single server's streams
// into a new cluster: the event stream is made anew, empty, which the test
// logs (and the README says); publishing again at once loses nothing (the
// event bridge refuses publishes until the consumers exist in it). It logs each step's publish p99, longest
// publish outage and the Function's longest time without an answer.
//
// Then the count of the event stream's partitions changed under load
// (eventbridge.streams.partitions, 1 in profile ha, to 3 and back to 1,
// the load's events each with a partition key of its own, so in every
// partition): every acknowledged event delivered, those of the partitions
// taken away included, and NATS left with exactly the partitions of the
// new count (those taken away deleted once drained).
//
// The shared install is this checkout's, and the CRDs and the controller
// are cluster-wide, so the scenario cannot run beside it: it uninstalls
// it (deleting every Subscription and Function first, and NATS's
// volumes), installs the previous release in its place, and leaves
// this checkout's install with the shared install's values behind (its
// last upgrade is to exactly those, and a cleanup restores them if it
// stopped before): it is the package's last file so that it runs after
// every other scenario, and any scenario after it still finds this
// checkout's install (the Services' addresses are read again).
func TestUpgradeUnderLoad(t *testing.T) {
	start := time.Now()
	ctx := t.Context()
	kubeconfig := platform.cluster.Config.KubeconfigPath()
	chartDir := filepath.Join(platform.root, "charts", "kfn")
	natsVersion, err := singlenode.ComponentVersion(platform.cluster.Config.BinDir, "nats-server")
	require.NoError(t, err)

	// The previous release: its images (built from its sources, cached by
	// commit, by test/node/prepare.sh when make test ran it) and its chart.
	previousRelease := previousRelease(t, platform.root)
	if out, err := exec.Command("git", "-C", platform.root, "cat-file", "-e", previousRelease+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("the previous release %s is not in this clone of the repository (a shallow clone? fetch the full history): %v %s", previousRelease, err, out)
	}
	images, err := script(ctx, platform.root, "test/node/release-images.sh", previousRelease, platform.cluster.Config.BinDir)
	require.NoError(t, err)
	tag, err := os.ReadFile(filepath.Join(images, "tag"))
	require.NoError(t, err)
	// The images the scenario's pods run: the server and its Functions'
	// runtimes (the others would only cost their import).
	var archives []string
	for _, name := range []string{"kfn", "runtime-nodejs22", "runtime-python312"} {
		archives = append(archives, filepath.Join(images, name+".tar"))
	}
	require.NoError(t, platform.cluster.ImportImages(ctx, archives...))
	oldChart := t.TempDir()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %s charts/kfn | tar -x -C %q", platform.root, previousRelease, oldChart))
	out, err := archive.CombinedOutput()
	require.NoError(t, err, "git archive of the previous release's chart: %s", out)
	oldVersion := chartVersion(t, filepath.Join(oldChart, "charts", "kfn"))
	oldTag := strings.TrimSpace(string(tag))
	t.Logf("previous release %s: images %s (tag %s), chart %s (%s)", previousRelease[:12], images, oldTag, oldVersion, time.Since(start).Round(time.Second))

	// Whatever happens, leave this checkout's install behind.
	headValues := func(profile string) map[string]any {
		v := install.LocalValues(install.NodeImages("dev", natsVersion), profile)
		reserveBankSource(v)
		return v
	}
	t.Cleanup(func() { restoreHead(t, kubeconfig, chartDir, headValues(install.DefaultProfile)) })

	removeSharedInstall(t, kubeconfig)
	oldValues := install.LocalValues(install.NodeImages(oldTag, natsVersion), "")
	delete(oldValues, "profile")       // no profiles then: one of each
	delete(oldValues, "networkPolicy") // off by default then
	if fns, ok := oldValues["functions"].(map[string]any); ok {
		delete(fns, "warmPool") // no warm pool then: its schema refuses the key
	}
	phase := time.Now()
	require.NoError(t, install.Kfn(ctx, kubeconfig, filepath.Join(oldChart, "charts", "kfn"), oldValues, 5*time.Minute), "install the previous release")
	t.Logf("previous release installed (%s)", time.Since(phase).Round(time.Second))
	refreshAddresses(ctx, t)

	ns, fn := faultSink(t, "upgrade")
	apply(t, ns, inlineFunction("greeter", "python312", nil, `
def main(event, context):
    return "hello"
`))
	waitRunning(t, ns, "greeter", 3*time.Minute)
	probe := startServingProbe(t, functionURL(t, ns, "greeter"))
	rollout := recordRollout(t, ns, "greeter")
	settled := func(what string, from time.Time, l *load) {
		t.Helper()
		for _, name := range []string{"sink", "greeter"} {
			waitRunning(t, ns, name, 3*time.Minute)
		}
		l.waitAcked(t, l.count()+100)
		to := time.Now()
		outage, p99, n := l.window(from, to)
		gaps, longest := probe.failuresBetween(from, to)
		t.Logf("%s: took %s; %d publishes acknowledged, publish p99 %s, longest publish outage %s; the Function's Service: %d calls failed, longest without an answer %s",
			what, to.Sub(from).Round(time.Second), n, p99.Round(time.Millisecond), outage.Round(time.Millisecond), len(gaps), longest.Round(time.Millisecond))
		// A call refused by a pod of the previous release whose host had
		// stopped is that release's (its preStop is shorter than this
		// node's kube-proxy may take to drop it); any other failure is
		// this checkout's.
		var ours, previous []attempt
		for _, a := range gaps {
			pod := ""
			if a.code == 0 {
				pod = rollout.previousReleaseStopped(a.at, oldTag)
			}
			if pod != "" {
				previous = append(previous, a)
				t.Logf("a call of the Function at %s failed after %s, while the previous release's pod %s had stopped and kube-proxy may still have sent new connections to it: %v", a.at.Format("15:04:05.000"), a.took.Round(time.Millisecond), pod, a.err)
				continue
			}
			ours = append(ours, a)
			t.Logf("a call of the Function at %s failed after %s: %v", a.at.Format("15:04:05.000"), a.took.Round(time.Millisecond), a.err)
		}
		if len(gaps) > 0 {
			t.Logf("the Function's pods and endpoints meanwhile:\n%s", strings.Join(rollout.between(from, to), "\n"))
		}
		require.Empty(t, ours, "the Function answered every call but those refused by the previous release's stopped pods")
		require.LessOrEqual(t, len(previous), 3, "calls refused by the previous release's stopped pods")
	}

	// The previous release to this checkout, profile small, under load.
	load := startLoad(t, ns)
	load.waitAcked(t, 100)
	before := streamDetail(t, stream.DefaultEventStream)
	require.Equal(t, 1, before.Config.Replicas)
	from := time.Now()
	// (The publisher's Service stays, with its address, across an upgrade.)
	require.NoError(t, install.Upgrade(ctx, kubeconfig, chartDir, headValues("small"), 10*time.Minute), "helm upgrade to this checkout, profile small")
	settled(fmt.Sprintf("upgrade from %s (chart %s) to this checkout, profile small, under load", previousRelease[:12], oldVersion), from, load)
	afterSmall := streamDetail(t, stream.DefaultEventStream)
	sameStream(t, before, afterSmall, 1)
	crdsAreHead(t)
	load.finish(t, fn, upgradeRestarts*faultInFlight, "upgrade from the previous release to small", start)

	// small to ha as the README says: publishing stopped, every event
	// delivered (finish), the upgrade, the first server restarted into the
	// cluster; then publishing again at once. NATS makes the event stream
	// anew in the cluster; the event bridge makes it closed (publishes
	// answered 503) until its leader made every Subscription's consumer in
	// it, so that nothing published after the move is acknowledged before
	// a consumer keeps it.
	from = time.Now()
	require.NoError(t, upgradeToHA(ctx, t.Logf, kubeconfig, chartDir, headValues(install.DefaultProfile)), "helm upgrade to profile ha")
	haLoad := startLoad(t, ns+"-ha")
	settled("small to ha, publishing stopped during the move", from, haLoad)
	afterHA := streamDetail(t, stream.DefaultEventStream)
	for _, name := range []string{stream.DefaultEventStream, stream.DefaultDeadLetterStream, "KV_" + stream.DefaultConfig().LockBucket()} {
		assert.Equal(t, 3, streamDetail(t, name).Config.Replicas, "%s on 3 servers", name)
	}
	t.Logf("event stream after small to ha: created %s (before: %s), last sequence %d (before: %d); a new stream unless NATS carried the single server's into the cluster",
		afterHA.Created.Format(time.RFC3339), afterSmall.Created.Format(time.RFC3339), afterHA.State.LastSeq, afterSmall.State.LastSeq)
	sub := &eventingv1alpha2.Subscription{}
	require.NoError(t, platform.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sink"}, sub))
	kept := "absent (no loss seen)"
	for _, c := range sub.Status.Conditions {
		if c.Type == eventingv1alpha2.ConditionEventsKept {
			kept = fmt.Sprintf("%s (%s: %s)", c.Status, c.Reason, c.Message)
		}
	}
	t.Logf("the sink Subscription's condition %q after small to ha: %s", eventingv1alpha2.ConditionEventsKept, kept)
	haLoad.finish(t, fn, upgradeRestarts*faultInFlight, "publishing after small to ha (duplicates counted since the first upgrade)", start)
	require.Equal(t, partitionStreams(1), eventStreams(t), "profile ha: one partition")

	// The count of partitions changed under load, 1 to 3 and back: every
	// acknowledged event delivered (those of the partitions taken away
	// too), the partitions taken away deleted once drained.
	dups := upgradeRestarts * faultInFlight
	for _, partitions := range []int{3, 1} {
		v := headValues(install.DefaultProfile)
		v["eventbridge"].(map[string]any)["streams"] = map[string]any{"partitions": partitions}
		l := startLoad(t, fmt.Sprintf("%s-p%d", ns, partitions))
		l.waitAcked(t, 100)
		from := time.Now()
		require.NoError(t, install.Upgrade(ctx, kubeconfig, chartDir, v, 10*time.Minute), "helm upgrade to %d partitions", partitions)
		what := fmt.Sprintf("%d partitions to %d, under load", 4-partitions, partitions)
		settled(what, from, l)
		dups += 2 * faultInFlight // the two event bridges restarted
		l.finish(t, fn, dups, what, start)
		eventually(t, 3*time.Minute, fmt.Sprintf("the event stream in %d partitions", partitions), func() error {
			if got, want := eventStreams(t), partitionStreams(partitions); !slices.Equal(got, want) {
				return fmt.Errorf("streams %v, want %v", got, want)
			}
			return nil
		})
		t.Logf("%s: the partitions taken away drained and deleted, or the new ones made, %s after the upgrade began", what, time.Since(from).Round(time.Second))
	}
	probe.stop()
	code, body, err := get(functionURL(t, ns, "greeter"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "the Function answers after the upgrades: %s", body)
}

// partitionStreams names the streams of n partitions of the default
// event stream.
func partitionStreams(n int) []string {
	return stream.Config{EventStream: stream.DefaultEventStream, Partitions: n}.PartitionStreams()
}

// eventStreams are the streams of the event stream's partitions NATS
// reports, in partition order.
func eventStreams(t *testing.T) []string {
	t.Helper()
	c := stream.DefaultConfig()
	var names []string
	for _, s := range jszStreams(t) {
		if _, ok := c.PartitionNumber(s.Name); ok {
			names = append(names, s.Name)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		pa, _ := c.PartitionNumber(a)
		pb, _ := c.PartitionNumber(b)
		return pa - pb
	})
	return names
}

// upgradeToHA upgrades release kfn to the chart in chartDir with vals
// (profile ha) from an install of profile small, as the chart's README
// says: helm upgrade, and once the two new NATS servers run, the first
// one deleted so that the StatefulSet makes it anew with the cluster's
// configuration (the StatefulSet's rolling update would wait for the new
// servers to be ready first, and they wait for it). It returns once
// Helm's wait for every object ready has. On an install that is ha
// already it is a plain upgrade.
func upgradeToHA(ctx context.Context, logf func(string, ...any), kubeconfig, chartDir string, vals map[string]any) error {
	done := make(chan error, 1)
	go func() { done <- install.Upgrade(ctx, kubeconfig, chartDir, vals, 10*time.Minute) }()
	cs := platform.cluster.Clientset
	pods := cs.CoreV1().Pods(install.Namespace)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
		sts, err := cs.AppsV1().StatefulSets(install.Namespace).Get(ctx, "kfn-nats", metav1.GetOptions{})
		if err != nil || sts.Status.UpdateRevision == "" {
			continue
		}
		first, err := pods.Get(ctx, "kfn-nats-0", metav1.GetOptions{})
		if err != nil || first.DeletionTimestamp != nil || first.Labels["controller-revision-hash"] == sts.Status.UpdateRevision {
			continue // going, or it runs the new configuration
		}
		running := 0
		for _, name := range []string{"kfn-nats-1", "kfn-nats-2"} {
			if p, err := pods.Get(ctx, name, metav1.GetOptions{}); err == nil && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running < 2 {
			continue
		}
		logf("kfn-nats-1 and kfn-nats-2 run: deleting kfn-nats-0, which the StatefulSet makes anew in the cluster")
		if err := pods.Delete(ctx, "kfn-nats-0", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &first.UID}}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete kfn-nats-0: %w", err)
		}
	}
}

// chartVersion is the version in a chart directory's Chart.yaml.
func chartVersion(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	require.NoError(t, err)
	var c struct {
		Version string `json:"version"`
	}
	require.NoError(t, yaml.Unmarshal(data, &c))
	return c.Version
}

// removeSharedInstall takes the shared install away as a user who
// uninstalls kfn would, and more: every Subscription (while the event
// bridge still runs to remove their finalizers) and Function of the
// cluster, the release, NATS's volumes and the CRDs, so that the previous
// release installs on a cluster as its own first install found it.
func removeSharedInstall(t *testing.T, kubeconfig string) {
	t.Helper()
	ctx := t.Context()
	phase := time.Now()
	subs := &eventingv1alpha2.SubscriptionList{}
	require.NoError(t, platform.client.List(ctx, subs))
	for i := range subs.Items {
		require.NoError(t, client.IgnoreNotFound(platform.client.Delete(ctx, &subs.Items[i])))
	}
	eventually(t, 3*time.Minute, "every Subscription gone", func() error {
		list := &eventingv1alpha2.SubscriptionList{}
		if err := platform.client.List(ctx, list); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d left", len(list.Items))
		}
		return nil
	})
	fns := &serverlessv1alpha2.FunctionList{}
	require.NoError(t, platform.client.List(ctx, fns))
	for i := range fns.Items {
		require.NoError(t, client.IgnoreNotFound(platform.client.Delete(ctx, &fns.Items[i])))
	}
	eventually(t, 3*time.Minute, "every Function gone", func() error {
		list := &serverlessv1alpha2.FunctionList{}
		if err := platform.client.List(ctx, list); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d left", len(list.Items))
		}
		return nil
	})
	require.NoError(t, install.Uninstall(kubeconfig, 5*time.Minute))
	pvcs := platform.cluster.Clientset.CoreV1().PersistentVolumeClaims(install.Namespace)
	require.NoError(t, pvcs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=nats"}))
	eventually(t, 3*time.Minute, "NATS's volumes gone", func() error {
		list, err := pvcs.List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=nats"})
		if err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d left", len(list.Items))
		}
		return nil
	})
	crds := crdClient(t)
	for _, name := range kfnCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		require.NoError(t, client.IgnoreNotFound(crds.Delete(ctx, crd)))
		eventually(t, 3*time.Minute, "CRD "+name+" gone", func() error {
			err := crds.Get(ctx, client.ObjectKeyFromObject(crd), crd)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return errors.Join(err, errors.New("still there"))
		})
	}
	t.Logf("shared install removed (%s)", time.Since(phase).Round(time.Second))
}

// crdClient is a client of the node's API server that knows CRDs.
func crdClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(platform.cluster.REST, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return c
}

// kfnCRDs names kfn's CRDs.
var kfnCRDs = []string{"functions.serverless.kyma-project.io", "subscriptions.eventing.kyma-project.io", "apirules.gateway.kyma-project.io"}

// crdsAreHead requires that the served CRDs are this checkout's (the
// chart's files/crds) and the release's.
func crdsAreHead(t *testing.T) {
	t.Helper()
	for _, name := range kfnCRDs {
		file := filepath.Join(platform.root, "charts", "kfn", "files", "crds", strings.SplitN(name, ".", 2)[1]+"_"+strings.SplitN(name, ".", 2)[0]+".yaml")
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		want := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, yaml.Unmarshal(data, want))
		got := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, crdClient(t).Get(t.Context(), client.ObjectKey{Name: name}, got))
		assert.Equal(t, install.Release, got.Annotations["meta.helm.sh/release-name"], "%s is the release's", name)
		gotJSON, err := json.Marshal(got.Spec.Versions)
		require.NoError(t, err)
		wantJSON, err := json.Marshal(want.Spec.Versions)
		require.NoError(t, err)
		assert.JSONEq(t, string(wantJSON), string(gotJSON), "CRD %s is this checkout's", name)
	}
}

// restoreHead leaves this checkout's install with vals behind, whatever
// the scenario left: upgraded to it if the release is there (from small
// as the README says), installed anew if not; and reads the Services'
// addresses again. It runs as a cleanup, after the test's context ended.
func restoreHead(t *testing.T, kubeconfig, chartDir string, vals map[string]any) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := upgradeToHA(ctx, t.Logf, kubeconfig, chartDir, vals); err != nil {
		t.Logf("restore by upgrade: %v; installing anew", err)
		_ = install.Uninstall(kubeconfig, 5*time.Minute)
		require.NoError(t, install.Kfn(ctx, kubeconfig, chartDir, vals, 5*time.Minute), "this checkout's install restored")
	}
	refreshAddresses(ctx, t)
}

// refreshAddresses reads the publisher's and the gateway's Service
// addresses again (a new install makes new Services).
func refreshAddresses(ctx context.Context, t *testing.T) {
	t.Helper()
	var err error
	platform.publisher, err = serviceURL(ctx, platform.cluster, "kfn-publisher")
	require.NoError(t, err)
	if gw, err := serviceURL(ctx, platform.cluster, "kfn-gateway"); err == nil {
		platform.gateway = gw
	}
}

// streamInfo is what NATS's monitoring port says of a stream.
type streamInfo struct {
	Name    string                 `json:"name"`
	Created time.Time              `json:"created"`
	Config  jetstream.StreamConfig `json:"config"`
	State   struct {
		Msgs     uint64 `json:"messages"`
		FirstSeq uint64 `json:"first_seq"`
		LastSeq  uint64 `json:"last_seq"`
	} `json:"state"`
}

// streamDetail asks the NATS servers' monitoring port for a stream,
// waiting until one reports it.
func streamDetail(t *testing.T, name string) streamInfo {
	t.Helper()
	var found streamInfo
	eventually(t, 2*time.Minute, "NATS reports stream "+name, func() error {
		for _, s := range jszStreams(t) {
			if s.Name == name {
				found = s
				return nil
			}
		}
		return errors.New("no server reports it")
	})
	return found
}

// jszStreams returns the streams the NATS servers that answer on their
// monitoring port report, each once (the first server's report of it),
// waiting until one answers.
func jszStreams(t *testing.T) []streamInfo {
	t.Helper()
	var found []streamInfo
	eventually(t, 2*time.Minute, "a NATS server reports its streams", func() error {
		found = nil
		answered := false
		for _, p := range podsOf(t, "app.kubernetes.io/component=nats") {
			if p.Status.PodIP == "" {
				continue
			}
			resp, err := httpClient.Get("http://" + p.Status.PodIP + ":8222/jsz?streams=true&config=true")
			if err != nil {
				continue
			}
			var jsz struct {
				AccountDetails []struct {
					StreamDetail []streamInfo `json:"stream_detail"`
				} `json:"account_details"`
			}
			err = json.NewDecoder(resp.Body).Decode(&jsz)
			resp.Body.Close()
			if err != nil {
				continue
			}
			answered = true
			for _, a := range jsz.AccountDetails {
				for _, s := range a.StreamDetail {
					if !slices.ContainsFunc(found, func(f streamInfo) bool { return f.Name == s.Name }) {
						found = append(found, s)
					}
				}
			}
		}
		if !answered {
			return errors.New("no server answers")
		}
		return nil
	})
	return found
}

// sameStream requires that after is before's stream (created at the same
// time, its sequence gone on) with the configuration this checkout's event
// bridge gives it with replicas.
func sameStream(t *testing.T, before, after streamInfo, replicas int) {
	t.Helper()
	assert.True(t, before.Created.Equal(after.Created), "the same stream, not a new one: created %s, now %s", before.Created, after.Created)
	assert.Greater(t, after.State.LastSeq, before.State.LastSeq, "its sequence goes on")
	c := stream.DefaultConfig()
	c.Replicas = replicas
	want := jsstream.EventStreamConfig(c)
	got := after.Config
	assert.Equal(t, want.Replicas, got.Replicas, "replicas")
	assert.ElementsMatch(t, want.Subjects, got.Subjects, "subjects")
	assert.Equal(t, want.Retention, got.Retention, "retention")
	assert.Equal(t, want.Discard, got.Discard, "discard")
	assert.Equal(t, want.Storage, got.Storage, "storage")
	assert.Equal(t, want.MaxBytes, got.MaxBytes, "max bytes")
	assert.Equal(t, want.MaxMsgSize, got.MaxMsgSize, "max message size")
	assert.Equal(t, want.MaxConsumers, got.MaxConsumers, "max consumers")
	assert.Equal(t, want.Duplicates, got.Duplicates, "de-duplication window")
	t.Logf("event stream: created %s, sequence %d -> %d, %d replicas", after.Created.Format(time.RFC3339), before.State.LastSeq, after.State.LastSeq, got.Replicas)
}

// window is the load's longest time between two acknowledgements that
// ends in (from, to), the p99 of the publishes acknowledged then, and
// their number.
func (l *load) window(from, to time.Time) (outage, p99 time.Duration, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var lat []time.Duration
	for i, at := range l.ackedAt {
		if !at.After(from) || !at.Before(to) {
			continue
		}
		n++
		lat = append(lat, l.latencies[i])
		if i > 0 {
			outage = max(outage, at.Sub(l.ackedAt[i-1]))
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return outage, p99, n
}

// servingProbe calls a Function's Service every 100 ms and keeps when each call
// was answered 200, and each call that was not with its answer or error.
type servingProbe struct {
	cancel func()
	wg     sync.WaitGroup

	mu     sync.Mutex
	ok     []time.Time
	failed []attempt
}

func startServingProbe(t *testing.T, url string) *servingProbe {
	ctx, cancel := context.WithCancel(t.Context())
	p := &servingProbe{cancel: cancel}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for ctx.Err() == nil {
			began := time.Now()
			code, body, err := get(url)
			now := time.Now()
			p.mu.Lock()
			if err == nil && code == http.StatusOK {
				p.ok = append(p.ok, now)
			} else if ctx.Err() == nil {
				if err == nil {
					err = fmt.Errorf("answered %d: %.200s", code, body)
				}
				p.failed = append(p.failed, attempt{code: code, err: err, at: began, took: now.Sub(began)})
			}
			p.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *servingProbe) stop() {
	p.cancel()
	p.wg.Wait()
}

// answered is how many calls were answered 200 so far.
func (p *servingProbe) answered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ok)
}

// failuresBetween returns the calls not answered 200 that began in (from,
// to) and the longest time between two answered calls that ends then.
func (p *servingProbe) failuresBetween(from, to time.Time) (failed []attempt, longest time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.failed {
		if a.at.After(from) && a.at.Before(to) {
			failed = append(failed, a)
		}
	}
	for i, at := range p.ok {
		if i > 0 && at.After(from) && at.Before(to) {
			longest = max(longest, at.Sub(p.ok[i-1]))
		}
	}
	return failed, longest
}

// rolloutRecorder keeps, every 50 ms, what a Function's pods (ready,
// deleting) and its Service's EndpointSlices (ready, serving, terminating
// addresses) are when that changed, so that a failed call can be set
// beside them; and, for each pod, its image and when its deletion began.
type rolloutRecorder struct {
	mu    sync.Mutex
	lines []timedLine
	pods  map[string]podSeen
}

type timedLine struct {
	at   time.Time
	text string
}

// podSeen is a pod of the Function as the recorder saw it.
type podSeen struct {
	image string
	// stopping is when its deletion began (zero: not seen deleting).
	stopping time.Time
}

func recordRollout(t *testing.T, ns, name string) *rolloutRecorder {
	ctx, cancel := context.WithCancel(t.Context())
	r := &rolloutRecorder{pods: map[string]podSeen{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := ""
		for ctx.Err() == nil {
			now, pods := rolloutState(ctx, ns, name)
			r.mu.Lock()
			if now != last {
				r.lines = append(r.lines, timedLine{at: time.Now(), text: now})
				last = now
			}
			for _, p := range pods {
				seen := podSeen{image: p.Spec.Containers[0].Image, stopping: r.pods[p.Name].stopping}
				if p.DeletionTimestamp != nil && seen.stopping.IsZero() {
					// The deletion's deadline less its grace period.
					seen.stopping = p.DeletionTimestamp.Time
					if g := p.DeletionGracePeriodSeconds; g != nil {
						seen.stopping = seen.stopping.Add(-time.Duration(*g) * time.Second)
					}
				}
				r.pods[p.Name] = seen
			}
			r.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return r
}

// rolloutState is one line: each pod's name, address, readiness and
// whether it is being deleted; each endpoint's address and conditions;
// and the pods.
func rolloutState(ctx context.Context, ns, name string) (string, []corev1.Pod) {
	var b strings.Builder
	pods := &corev1.PodList{}
	if err := platform.client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{serverlessv1alpha2.LabelFunctionName: name}); err != nil {
		return "pods: " + err.Error(), nil
	}
	for _, p := range pods.Items {
		ready := "unready"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = "ready"
			}
		}
		deleting := ""
		if p.DeletionTimestamp != nil {
			deleting = " deleting"
		}
		fmt.Fprintf(&b, "pod %s %s %s %s%s; ", p.Name, p.Spec.Containers[0].Image, p.Status.PodIP, ready, deleting)
	}
	eps := &discoveryv1.EndpointSliceList{}
	if err := platform.client.List(ctx, eps, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		return b.String() + "endpoints: " + err.Error(), pods.Items
	}
	for _, s := range eps.Items {
		for _, e := range s.Endpoints {
			fmt.Fprintf(&b, "endpoint %v ready=%v serving=%v terminating=%v; ", e.Addresses,
				deref(e.Conditions.Ready), deref(e.Conditions.Serving), deref(e.Conditions.Terminating))
		}
	}
	return b.String(), pods.Items
}

func deref(b *bool) string {
	if b == nil {
		return "-"
	}
	return fmt.Sprint(*b)
}

// between returns the states seen from a little before from until to,
// each with its time.
func (r *rolloutRecorder) between(from, to time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for i, l := range r.lines {
		next := to
		if i+1 < len(r.lines) {
			next = r.lines[i+1].at
		}
		if next.After(from) && l.at.Before(to) {
			out = append(out, l.at.Format("15:04:05.000")+" "+l.text)
		}
	}
	return out
}

// previousReleaseStopped names the pod of the previous release (its
// image tagged tag) whose host had stopped when a call began at at: its
// deletion began more than the previous release's preStop sleep before
// (after which its host closes its listener), at most proxyLag before
// that. A new connection the node's kube-proxy still sends to that pod is
// refused: the previous release's pods wait 2 s before they stop, and this
// node's kube-proxy takes up to 4 s to drop an endpoint on a loaded
// machine (kubeproxy_network_programming_duration_seconds); a pod of this
// checkout waits runtimes' longer preStop. "" when there is none.
func (r *rolloutRecorder) previousReleaseStopped(at time.Time, tag string) string {
	const previousPreStop, proxyLag = 2 * time.Second, 10 * time.Second
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, p := range r.pods {
		if !strings.HasSuffix(p.image, ":"+tag) || p.stopping.IsZero() {
			continue
		}
		if stopped := p.stopping.Add(previousPreStop); !at.Before(stopped) && at.Before(stopped.Add(proxyLag)) {
			return name
		}
	}
	return ""
}
