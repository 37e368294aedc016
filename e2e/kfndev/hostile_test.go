package kfndev_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/local/dev"
	"github.com/kfn-dev/kfn/test/hostile"
	"github.com/kfn-dev/kfn/test/testport"
)

// TestHostileTenant runs two tenants in kfn dev: a victim publishing a
// steady stream of payments to its ledger, and an attacker who at the
// same time sends every publish that once stopped or flooded the event
// bridge, and whose Functions redirect the event bridge to kfn's own
// dead-letter API (to replay the victim's dead letters), never answer
// with large events in flight, fail everything, reply with events NATS
// would close the connection for or forged as the victim's, emit every
// event they get (a loop, which ends at the hop limit), and answer with a
// megabyte of headers; its Subscriptions that ask for too much are
// refused, the one whose sink is the victim's is never served, and those
// on one type past the namespace's limit are not served and say why. Every attack gets its clear answer or bound, kfn dev stays up
// (no restart), the victim's dead letter stays, and every payment the
// publisher acknowledged reaches the ledger.
func TestHostileTenant(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds and runs kfn dev")
	}
	addr := testport.Addr(t)
	tenants := hostile.Tenants{Victim: "bank", Attacker: "mallory",
		Redirect: "http://" + addr + dev.AdminPrefix + "/deadletters/replay?namespace=bank&subscription=audit"}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tenants.yaml"), []byte(tenants.Manifests()), 0o644))
	refused := tenants.Refused()
	for name, m := range refused {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "refused-"+name+".yaml"), []byte(m.YAML), 0o644))
	}
	t0 := time.Now()
	phase := func(what string) { t.Logf("%6.2fs %s", time.Since(t0).Seconds(), what) }
	p := startDev(t, dir, "--addr", addr)
	phase("up")
	base := "http://" + p.addr
	client := &http.Client{Timeout: 30 * time.Second}
	st := func() dev.Status {
		var s dev.Status
		resp, err := client.Get(base + dev.AdminPrefix + "/status")
		if err != nil {
			return s
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&s)
		return s
	}
	errs := strings.Join(st().Errors, "\n")
	for name, m := range refused {
		assert.Contains(t, errs, m.Says, "refused-%s.yaml is refused with the reason", name)
	}
	assert.Contains(t, errs, "mallory/trespass", "a Subscription whose sink is another namespace's is not served")
	assert.Equal(t, hostile.FanoutSubscriptions-subscription.DefaultMaxSubscriptionsPerType, strings.Count(errs, "per event type"),
		"the attacker's Subscriptions on one type past its namespace's limit are not served, each says why:\n%s", errs)

	publish := func(source, eventType, id, data string) int {
		req, err := http.NewRequest(http.MethodPost, base+"/publish", strings.NewReader(data))
		require.NoError(t, err)
		for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": id, "Ce-Source": source, "Ce-Type": eventType, "Content-Type": "application/json"} {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	letters := func(namespace string) []deadletter.Letter {
		var out []deadletter.Letter
		resp, err := client.Get(base + dev.AdminPrefix + "/deadletters?namespace=" + namespace)
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out
	}

	// The victim's dead letter, which the redirect tries to have replayed.
	require.Equal(t, http.StatusNoContent, publish(hostile.VictimSource, hostile.AuditType, "audit-1", `{}`))
	require.Eventually(t, func() bool { return len(letters("bank")) == 1 }, 60*time.Second, 50*time.Millisecond, "the victim's dead letter\n%s", p.out)

	phase("dead letter")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]bool{}
	var wrong []string
	wg.Add(1)
	go func() { // the victim: 20 payments a second for 8 seconds
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := range 160 {
			<-tick.C
			id := fmt.Sprintf("pay-%d", i)
			if publish(hostile.VictimSource, hostile.VictimType, id, `{"amount":1}`) == http.StatusNoContent {
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			}
		}
	}()
	wg.Add(1)
	go func() { // the attacker's publishes, each checked
		defer wg.Done()
		w := hostile.Attack(ctx, client, base, 8)
		mu.Lock()
		wrong = append(wrong, w...)
		mu.Unlock()
	}()
	wg.Add(1)
	go func() { // the attacker's events for its Functions
		defer wg.Done()
		big := `{"pad":"` + strings.Repeat("x", 100<<10) + `"}`
		for i := range 200 {
			publish(hostile.AttackerSource, hostile.SlowType, fmt.Sprintf("slow-%d", i), big)
			if i < 100 {
				publish(hostile.AttackerSource, hostile.DeadType, fmt.Sprintf("dead-%d", i), `{}`)
			}
			if i < 5 {
				publish(hostile.AttackerSource, hostile.RedirectType, fmt.Sprintf("redirect-%d", i), `{}`)
				publish(hostile.AttackerSource, hostile.ReplyType, fmt.Sprintf("reply-%d", i), `{}`)
				publish(hostile.AttackerSource, hostile.SpoofType, fmt.Sprintf("pay-%d", i), `{}`)
				publish(hostile.AttackerSource, hostile.HeaderType, fmt.Sprintf("headers-%d", i), `{}`)
			}
		}
		publish(hostile.AttackerSource, hostile.LoopType, "loop", `{}`)
	}()
	wg.Wait()
	phase("attack sent")

	mu.Lock()
	assert.Empty(t, wrong, "every hostile publish gets its answer")
	sent := len(acked)
	mu.Unlock()
	assert.Equal(t, 160, sent, "the victim's publishes are all acknowledged while the attack runs")
	require.Eventually(t, func() bool {
		got := hostile.LedgerIDs(p.out.String())
		for id := range acked {
			if !got[id] {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "every acknowledged payment reaches the ledger")
	phase("payments delivered")

	require.Eventually(t, func() bool {
		n := 0
		for _, l := range letters("mallory") {
			if l.Subscription == "redirector" {
				assert.Contains(t, l.Error, "not followed")
				n++
			}
		}
		return n == 5
	}, 60*time.Second, 100*time.Millisecond, "the redirects are not followed: dead letters with the reason")
	phase("redirects dead-lettered")
	bank := letters("bank")
	require.Len(t, bank, 1, "the victim's dead letter was not replayed by the attacker's redirect")
	assert.Equal(t, "audit-1", bank[0].ID)
	require.Eventually(t, func() bool { return strings.Contains(p.out.String(), "emit refused") }, 60*time.Second, 100*time.Millisecond,
		"a Function's emitted event with a type over the bound is refused to the Function")
	phase("emit refused")
	var loops []string
	require.Eventually(t, func() bool {
		now := hostile.LoopIDs(p.out.String())
		ended := len(now) > 1 && len(now) == len(loops) && strings.Contains(p.out.String(), "loop ended")
		loops = now
		return ended
	}, 60*time.Second, time.Second, "the emitting loop ends")
	assert.Len(t, loops, admission.DefaultMaxHops+1, "the loop ends at the hop limit: %v", loops)
	for id := range hostile.LedgerIDs(p.out.String()) {
		assert.False(t, strings.HasPrefix(id, hostile.SpoofPrefix), "a reply forged as the victim's never reaches its ledger: %s", id)
	}
	require.Eventually(t, func() bool {
		n := 0
		for _, l := range letters("mallory") {
			if l.Subscription == "headers" && strings.Contains(l.Error, "header") {
				n++
			}
		}
		return n == 5
	}, 60*time.Second, 100*time.Millisecond, "a sink's megabyte of headers fails its delivery with the reason")
	phase("loop, spoofed replies and header bomb held")
	assert.Equal(t, 1, strings.Count(p.out.String(), "is up on http://"), "kfn dev never restarted: its NATS connection held")
	assert.NotContains(t, p.out.String(), "starting kfn dev again")
	for _, s := range st().Subscriptions {
		if s.Namespace == "bank" && s.Name == "ledger" {
			assert.Zero(t, s.Failed, "the victim's deliveries never failed")
		}
	}
	p.interrupt()
	phase("stopped")
}
