package cluster

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	subscriptions "github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/test/hostile"
	"github.com/kfn-dev/kfn/test/node/install"
	"github.com/kfn-dev/kfn/test/node/singlenode"
)

// TestHostileTenant is e2e/kfndev's TestHostileTenant on the real node:
// the victim's namespace publishes a steady stream of payments while the
// attacker's sends every publish that once stopped or flooded the event
// bridge, redirects the event bridge to its own dead-letter admin API (on
// the pod's address: no Service reaches it), never answers with a
// thousand large events in flight, fails everything, replies with events
// NATS would close the connection for or forged as the victim's, emits
// every event it gets (a loop), answers with a megabyte of headers, and
// asks for Subscriptions over their bounds, with the victim's sink or
// more on one type than a namespace may have, and publishes large events
// as its namespace past its bytes a second. Every attack gets its clear
// answer or bound (the loop ends at the hop limit, no forged reply reaches
// the ledger, the headers fail their delivery with the reason, the
// Subscriptions past the limit say why, the large events past the
// namespace's bytes get 429 while the victim, publishing as its own
// namespace, gets every payment in), the event bridge is never
// restarted, the victim's dead letter stays, and every payment
// acknowledged reaches its ledger.
func TestHostileTenant(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	victim, attacker := namespace(t, "bank"), namespace(t, "mallory")
	bridge := eventBridgePod(t)
	tenants := hostile.Tenants{Victim: victim, Attacker: attacker, Recorder: platform.recorder.URL,
		Redirect: fmt.Sprintf("http://%s:8081/deadletters/replay?namespace=%s&subscription=audit", bridge.Status.PodIP, victim)}
	applyAll(t, victim, tenants.VictimManifests())
	applyAll(t, attacker, tenants.AttackerManifests())
	for name, m := range tenants.Refused() {
		objs, err := singlenode.DecodeObjects([]byte(m.YAML))
		require.NoError(t, err)
		for _, o := range objs {
			o.SetNamespace(attacker)
			err := platform.client.Create(context.Background(), o)
			require.Error(t, err, "%s is refused by the API server", name)
			assert.Contains(t, err.Error(), m.Says, name)
		}
	}
	for ns, fns := range map[string][]string{victim: {"ledger", "audit"}, attacker: {"redirector", "dead", "slow", "replier", "spoofer", "looper", "headers"}} {
		for _, fn := range fns {
			waitRunning(t, ns, fn, 3*time.Minute)
			waitSubscriptionReady(t, ns, fn)
		}
	}

	// The victim's dead letter, which the redirect tries to have replayed.
	publish(t, hostile.AuditType, hostile.VictimSource, victim+"-audit-1", `{}`)
	eventually(t, 2*time.Minute, "the victim's dead letter", func() error {
		out, err := kfn(t, "dlq", "list", "-n", victim, "--subscription", "audit")
		if err != nil || !strings.Contains(out, victim+"-audit-1") {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})

	// Both namespaces publish as themselves (ServiceAccount tokens), so
	// that each is held to its own namespace's bounds.
	victimToken, attackerToken := senderToken(t, victim), senderToken(t, attacker)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked []string
	var wrong []string
	wg.Add(1)
	go func() { // the victim: 10 payments a second for 10 seconds
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := range 100 {
			<-tick.C
			id := fmt.Sprintf("%s-pay-%03d", victim, i)
			if code, _, _, err := publishEventAs(victimToken, hostile.VictimType, hostile.VictimSource, id, `{"amount":1}`); err == nil && code/100 == 2 {
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		}
	}()
	var large largeEvents
	wg.Add(1)
	go func() { // the attacker's large events, as its namespace
		defer wg.Done()
		large = publishLargeEvents(attackerToken, attacker)
	}()
	wg.Add(1)
	go func() { // the attacker's publishes, each checked
		defer wg.Done()
		w := hostile.Attack(ctx, httpClient, platform.publisher, 5)
		mu.Lock()
		wrong = append(wrong, w...)
		mu.Unlock()
	}()
	wg.Add(1)
	go func() { // the attacker's events for its Functions
		defer wg.Done()
		big := `{"pad":"` + strings.Repeat("x", 100<<10) + `"}`
		for i := range 200 {
			_, _, _ = publishEvent(hostile.SlowType, hostile.AttackerSource, fmt.Sprintf("%s-slow-%d", attacker, i), big)
			if i < 100 {
				_, _, _ = publishEvent(hostile.DeadType, hostile.AttackerSource, fmt.Sprintf("%s-dead-%d", attacker, i), `{}`)
			}
			if i < 5 {
				_, _, _ = publishEvent(hostile.RedirectType, hostile.AttackerSource, fmt.Sprintf("%s-redirect-%d", attacker, i), `{}`)
				_, _, _ = publishEvent(hostile.ReplyType, hostile.AttackerSource, fmt.Sprintf("%s-reply-%d", attacker, i), `{}`)
				_, _, _ = publishEvent(hostile.SpoofType, hostile.AttackerSource, fmt.Sprintf("%s-pay-%03d", victim, i), `{}`)
				_, _, _ = publishEvent(hostile.HeaderType, hostile.AttackerSource, fmt.Sprintf("%s-headers-%d", attacker, i), `{}`)
			}
		}
		_, _, _ = publishEvent(hostile.LoopType, hostile.AttackerSource, attacker+"-loop", `{}`)
	}()
	wg.Wait()

	mu.Lock()
	assert.Empty(t, wrong, "every hostile publish gets its answer")
	all := append([]string(nil), acked...)
	mu.Unlock()
	assert.Len(t, all, 100, "the victim's publishes are all acknowledged while the attack runs")
	large.check(t, len(eventBridgePods(t)))
	require.NoError(t, platform.recorder.waitAll(t.Context(), "ledger", all, 3*time.Minute), "every acknowledged payment reaches the ledger")

	eventually(t, 2*time.Minute, "the redirects are dead-lettered, not followed", func() error {
		out, err := kfn(t, "dlq", "list", "-n", attacker, "--subscription", "redirector", "-o", "json")
		if err != nil {
			return err
		}
		if n := strings.Count(out, "not followed"); n < 5 {
			return fmt.Errorf("%d of 5: %s", n, out)
		}
		return nil
	})
	eventually(t, 2*time.Minute, "a sink's megabyte of headers fails its delivery with the reason", func() error {
		out, err := kfn(t, "dlq", "list", "-n", attacker, "--subscription", "headers", "-o", "json")
		if err != nil {
			return err
		}
		if n := strings.Count(out, "header"); n < 5 {
			return fmt.Errorf("%d of 5: %s", n, out)
		}
		return nil
	})
	// The loop reaches the hop limit and ends there: awaited by its count,
	// not by a pause in it (a hop on a loaded node takes more than a poll's
	// 250 ms), then no event past the limit within 3 s, a dozen hops' time.
	loop, limit := "looper-"+attacker, admission.DefaultMaxHops+1
	eventually(t, 2*time.Minute, "the emitting loop reaches the hop limit", func() error {
		if n := len(platform.recorder.counts(loop)); n < limit {
			return fmt.Errorf("%d of %d events so far", n, limit)
		}
		return nil
	})
	assert.Never(t, func() bool { return len(platform.recorder.counts(loop)) > limit }, 3*time.Second, 100*time.Millisecond, "the loop ends at the hop limit")
	assert.Len(t, platform.recorder.counts(loop), limit, "the loop ends at the hop limit")
	for id := range platform.recorder.counts("ledger") {
		assert.False(t, strings.HasPrefix(id, hostile.SpoofPrefix), "a reply forged as the victim's never reaches its ledger: %s", id)
	}
	limited := 0
	for i := range hostile.FanoutSubscriptions {
		var sub eventingv1alpha2.Subscription
		require.NoError(t, platform.client.Get(t.Context(), client.ObjectKey{Namespace: attacker, Name: fmt.Sprintf("fanout-%02d", i)}, &sub))
		for _, c := range sub.Status.Conditions {
			if c.Reason == eventingv1alpha2.ReasonNamespaceLimit {
				limited++
			}
		}
	}
	assert.Equal(t, hostile.FanoutSubscriptions-subscriptions.DefaultMaxSubscriptionsPerType, limited,
		"the attacker's Subscriptions on one type past its namespace's limit are not active, and say why")
	out, err := kfn(t, "dlq", "list", "-n", victim, "--subscription", "audit")
	require.NoError(t, err, out)
	assert.Contains(t, out, victim+"-audit-1", "the victim's dead letter was not replayed by the attacker's redirect")
	after := eventBridgePod(t)
	assert.Equal(t, bridge.UID, after.UID, "the event bridge pod is the same")
	// Counted from the test's start: the fault scenarios before it kill
	// containers that the kubelet restarts in the same pod.
	assert.Equal(t, restarts(&bridge), restarts(&after), "the event bridge never restarted: its NATS connection held")
}

// applyAll applies every document of a manifest in namespace ns.
func applyAll(t *testing.T, ns, manifest string) {
	t.Helper()
	for _, doc := range strings.Split(manifest, "---\n") {
		if strings.TrimSpace(doc) != "" {
			apply(t, ns, doc)
		}
	}
}

// eventBridgePod returns a running event bridge pod of kfn's (the first listed).
func eventBridgePod(t *testing.T) corev1.Pod {
	t.Helper()
	pods := eventBridgePods(t)
	if len(pods) == 0 {
		t.Fatal("no running event bridge pod")
	}
	return pods[0]
}

// eventBridgePods returns kfn's running event bridge pods.
func eventBridgePods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := platform.cluster.Clientset.CoreV1().Pods(install.Namespace).List(t.Context(),
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=eventbridge"})
	require.NoError(t, err)
	var running []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			running = append(running, p)
		}
	}
	return running
}

// largeEvents is what publishLargeEvents saw: the bytes of the events the
// publisher took, the 429s (and how many told when to come back), other
// answers, and how long it published.
type largeEvents struct {
	size             int
	took, tookBytes  int
	refused, retryAt int
	other            []string
	elapsed          time.Duration
}

// The attacker's large events: 15 a second of 512 KiB for 8 seconds, 7.5
// MiB a second against its namespace's 2 MiB (the chart's
// eventbridge.publisher.bytesPerNamespace) on all publishers together.
// sharedRatesLag is how late, at most, a publisher hears what the others
// took (they tell it every 100 ms; a second under load).
const (
	sharedRatesLag      = time.Second
	largeEventBytes     = 512 << 10
	largeEventsCount    = 120
	largeEventsInterval = time.Second / 15
)

// publishLargeEvents publishes largeEventsCount events of largeEventBytes,
// one every largeEventsInterval, with token (a sender of namespace ns).
// Each publish goes out on its tick whatever the ones before it take, so
// that a slow answer under load does not lower the rate below the
// namespace's bound.
func publishLargeEvents(token, ns string) largeEvents {
	data := `{"pad":"` + strings.Repeat("x", largeEventBytes-10) + `"}`
	out := largeEvents{size: len(data)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	tick := time.NewTicker(largeEventsInterval)
	defer tick.Stop()
	start := time.Now()
	for i := range largeEventsCount {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, header, body, err := publishEventAs(token, "spam.large.v1", hostile.AttackerSource, fmt.Sprintf("%s-large-%d", ns, i), data)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				// A refused body the publisher does not read may end with
				// the connection before its answer is read: neither taken
				// nor refused as far as this count goes.
			case code/100 == 2:
				out.took++
				out.tookBytes += len(data)
			case code == http.StatusTooManyRequests:
				out.refused++
				if header.Get("Retry-After") != "" {
					out.retryAt++
				}
			default:
				out.other = append(out.other, fmt.Sprintf("%d %s", code, body))
			}
		}()
	}
	wg.Wait()
	out.elapsed = time.Since(start)
	return out
}

// check asserts that the publishers took at most the namespace's bytes a
// second over the time it published, all replicas together (they tell
// each other what it took, package sharedrates), give or take what each
// took before it heard of the others' (sharedRatesLag of the rate), and a
// burst (the larger of the rate and the largest request) and one event
// more on each replica, and refused the rest with 429 and Retry-After.
func (l largeEvents) check(t *testing.T, replicas int) {
	t.Helper()
	rate := float64(publisher.DefaultSenderBytesRate)
	allowed := rate*(l.elapsed+sharedRatesLag).Seconds() + float64(replicas)*(max(rate, float64(publisher.DefaultMaxRequestBytes))+float64(l.size))
	t.Logf("large events: %d of %d bytes taken (%d bytes, at most %.0f allowed), %d refused, on %d publishers in %s",
		l.took, l.size, l.tookBytes, allowed, l.refused, replicas, l.elapsed)
	assert.LessOrEqual(t, float64(l.tookBytes), allowed,
		"the attacker's namespace stored at most its bytes a second on its %d publishers together: %d events of %d bytes in %s", replicas, l.took, l.size, l.elapsed)
	assert.Positive(t, l.refused, "the attacker's events past its namespace's bytes are refused 429")
	assert.Equal(t, l.refused, l.retryAt, "each 429 says when to come back")
	assert.Empty(t, l.other, "no other answer to a large event within the request limit")
}
