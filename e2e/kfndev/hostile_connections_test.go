package kfndev_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/test/hostile"
)

// fileLimit is the RLIMIT_NOFILE, soft and hard, kfn dev runs under in
// TestHostileConnections: the attacker opens twice as many connections.
const fileLimit = 1024

// slowLedger is the victim: a ledger that books one payment at a time, 50
// ms each, so that the payments it was sent wait in its consumer while
// the attack runs.
const slowLedger = `apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata: {name: ledger, namespace: bank}
spec:
  runtime: nodejs24
  source:
    inline:
      source: |
        module.exports = {
          main: async function (event, context) {
            await new Promise((r) => setTimeout(r, 50));
            console.log("ledger got " + event["ce-id"]);
            return "";
          },
        };
---
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata: {name: ledger, namespace: bank}
spec:
  sink: http://ledger.bank.svc.cluster.local
  source: bank
  types: [payment.booked.v1]
  config: {maxInFlightMessages: "1"}
`

// slowSinks are the attacker's: two Functions that answer after two
// minutes, each with 1,000 events in flight (maxInFlightMessages 1000),
// which would hold 2,000 of kfn dev's descriptors.
var slowSinks = func() string {
	var docs []string
	for _, name := range []string{"slow1", "slow2"} {
		docs = append(docs, fmt.Sprintf(`apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata: {name: %[1]s, namespace: mallory}
spec:
  runtime: nodejs24
  env: [{name: FUNC_TIMEOUT, value: "180"}]
  source:
    inline:
      source: |
        module.exports = {
          main: function (event, context) {
            return new Promise((resolve) => setTimeout(() => resolve(""), 120000));
          },
        };
---
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata: {name: %[1]s, namespace: mallory}
spec:
  sink: http://%[1]s.mallory.svc.cluster.local
  source: mallory
  types: [spam.%[1]s.v1]
  config: {maxInFlightMessages: "1000", maxBacklog: "2000"}
`, name))
	}
	return strings.Join(docs, "---\n")
}()

// TestHostileConnections runs kfn dev with a file limit of 1,024 and a
// victim whose acknowledged payments wait for its slow ledger, while an
// attacker has 2,000 events in flight to its sinks that answer after two
// minutes, and holds 2,048 idle keep-alive connections to kfn dev's port
// and 64 requests whose bodies never end. kfn dev never runs out of file
// descriptors (its connections, in and out, are bounded below the limit,
// idle ones are closed for new ones, bodies have a deadline), so its
// project watcher never reads an empty project: the victim's consumer is
// never deleted, the victim can still publish, and every payment the
// publisher acknowledged reaches the ledger.
func TestHostileConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds and runs kfn dev")
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bank.yaml"), []byte(slowLedger), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mallory.yaml"), []byte(slowSinks), 0o644))
	bin, err := kfnBinary()
	require.NoError(t, err)
	// sh's ulimit sets the soft and the hard limit: kfn dev cannot raise it.
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, fileLimit), bin, "dev", "--addr", "127.0.0.1:0", "--plain", dir)
	p := runDev(t, cmd)
	base := "http://" + p.addr
	t0 := time.Now()
	phase := func(what string) { t.Logf("%6.2fs %s", time.Since(t0).Seconds(), what) }

	client := &http.Client{Timeout: 20 * time.Second}
	var mu sync.Mutex
	acked := map[string]bool{}
	send := func(source, eventType, id string) bool {
		req, err := http.NewRequest(http.MethodPost, base+"/publish", strings.NewReader(`{"amount":1}`))
		require.NoError(t, err)
		for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": id, "Ce-Source": source,
			"Ce-Type": eventType, "Content-Type": "application/json"} {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Logf("publish %s: %v", id, err)
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusNoContent
	}
	publish := func(id string) {
		if send(hostile.VictimSource, hostile.VictimType, id) {
			mu.Lock()
			acked[id] = true
			mu.Unlock()
		}
	}
	// The attacker's slow sinks take 2,000 events in flight.
	for i := range 1000 {
		for _, name := range []string{"slow1", "slow2"} {
			require.True(t, send("mallory", "spam."+name+".v1", fmt.Sprintf("%s-%d", name, i)), "the attacker's event is stored")
		}
	}
	phase("2,000 events for the slow sinks")
	// 300 payments: six seconds of the ledger's work wait in its consumer.
	for i := range 300 {
		publish(fmt.Sprintf("before-%d", i))
	}
	require.Len(t, acked, 300, "the victim's payments are acknowledged before the attack")
	phase("300 payments acknowledged")

	stop := make(chan struct{})
	var attack sync.WaitGroup
	var opened, answered atomic.Int64
	hold := func(request string, trickle bool) {
		defer attack.Done()
		c, err := net.DialTimeout("tcp", p.addr, 10*time.Second)
		if err != nil {
			return
		}
		defer c.Close()
		opened.Add(1)
		if _, err := c.Write([]byte(request)); err != nil {
			return
		}
		go func() { // read the answer, if any, and keep the connection
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				resp.Body.Close()
				answered.Add(1)
			}
		}()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if trickle {
					_, _ = c.Write([]byte("1\r\nx\r\n")) // one more byte of a body that never ends
				}
			}
		}
	}
	idle := "GET /bank/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	never := "POST /publish HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n" +
		"Ce-Specversion: 1.0\r\nCe-Id: never\r\nCe-Source: mallory\r\nCe-Type: spam.never.v1\r\n\r\n"
	for i := range 2 * fileLimit {
		attack.Add(1)
		go hold(idle, false)
		if i < 64 {
			attack.Add(1)
			go hold(never, true)
		}
	}
	require.Eventually(t, func() bool { return opened.Load() >= 2*fileLimit }, 60*time.Second, 50*time.Millisecond,
		"the attacker's connections are open (the kernel accepts them, whether kfn dev does or not)")
	phase(fmt.Sprintf("attack: %d connections open", opened.Load()))

	// The victim publishes while the attack holds its connections, and
	// the project watcher has had many polls to read the project.
	for i := range 20 {
		publish(fmt.Sprintf("during-%d", i))
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	during := len(acked) - 300
	mu.Unlock()
	phase(fmt.Sprintf("%d of 20 payments acknowledged during the attack; %d idle connections answered", during, answered.Load()))
	close(stop)
	attack.Wait()
	phase("attack stopped")

	require.Eventually(t, func() bool {
		got := hostile.LedgerIDs(p.out.String())
		mu.Lock()
		defer mu.Unlock()
		for id := range acked {
			if !got[id] {
				return false
			}
		}
		return true
	}, 90*time.Second, 200*time.Millisecond, "every acknowledged payment reaches the ledger; the end of kfn dev's output:\n%s", lastLines(p.out.String(), 40))
	phase("every acknowledged payment delivered")
	assert.Equal(t, 20, during, "the victim can publish while the attacker holds its connections")
	out := p.out.String()
	assert.NotContains(t, out, "too many open files", "kfn dev never ran out of file descriptors")
	assert.NotContains(t, out, "starting kfn dev again")
	p.interrupt()
}
