package kfndev_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The soak runs by hand, never in CI (README "Soak"):
//
//	KFN_SOAK=10m go test ./e2e/kfndev -run TestSoak -timeout 30m -v
//
// KFN_SOAK_RATE sets the events per second (default 500).
const (
	soakEnv     = "KFN_SOAK"
	soakRateEnv = "KFN_SOAK_RATE"
	// soakWarmup is when the memory baseline is taken: the publisher's
	// de-duplication window (2 minutes of message ids in JetStream) is
	// full, and buffers, caches and the Node.js heaps have reached their
	// working size.
	soakWarmup = 3 * time.Minute
	// soakMaxGrowth is the documented bound: the resident memory of kfn dev
	// and its function processes together may not grow by more than this
	// from the end of the warm-up to the end of the run.
	soakMaxGrowth = 64 << 20
)

// soakFirst relays each soak.started.v1 as soak.relayed.v1.
const soakFirst = `module.exports = {
  main: async function (event) {
    await event.emitCloudEvent('soak.relayed.v1', 'soak', event.data, { id: 'relayed-' + event.data.id });
    return '';
  },
};
`

// soakSecond records the id of each soak.relayed.v1 in the file RECORD
// names (written into the handler: kfn dev passes no extra environment).
const soakSecond = `const fs = require('fs');
module.exports = {
  main: async function (event) {
    fs.appendFileSync(%q, event.data.id + '\n');
    return '';
  },
};
`

const soakConfig = `name: %s
namespace: default
runtime: nodejs22
source:
  sourceType: inline
subscriptions:
  - name: %s
    source: soak
    types:
      - %s
schemaVersion: v1
`

// TestSoak publishes a steady flow through two chained functions in kfn dev
// for KFN_SOAK and checks that every acknowledged event reached the end of
// the chain, none of them twice (no fault touches delivery in a soak, so
// the documented bound of duplicates is zero: a retried publish or a
// repeated relay is de-duplicated by source and id), and that memory
// stayed within soakMaxGrowth after the warm-up.
func TestSoak(t *testing.T) {
	length, err := time.ParseDuration(os.Getenv(soakEnv))
	if err != nil || length <= 0 {
		t.Skipf("a soak runs by hand: %s=10m go test ./e2e/kfndev -run TestSoak -timeout 30m -v", soakEnv)
	}
	rate := 500
	if v := os.Getenv(soakRateEnv); v != "" {
		rate, err = strconv.Atoi(v)
		require.NoError(t, err, soakRateEnv)
	}
	dir := t.TempDir()
	record := filepath.Join(dir, "delivered")
	require.NoError(t, os.WriteFile(record, nil, 0o644))
	for name, fn := range map[string]struct{ handler, typ string }{
		"first":  {soakFirst, "soak.started.v1"},
		"second": {fmt.Sprintf(soakSecond, record), "soak.relayed.v1"},
	} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, "handler.js"), []byte(fn.handler), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, "config.yaml"), []byte(fmt.Sprintf(soakConfig, name, name, fn.typ)), 0o644))
	}
	dev := startDev(t, dir)

	var acked atomic.Int64
	var failures atomic.Int64
	start := time.Now()
	stop := make(chan struct{})
	ids := make(chan int, rate)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				for !soakPublish(client, dev.addr, id) {
					failures.Add(1) // retried: the publisher's dedup by source+id makes that safe
					time.Sleep(50 * time.Millisecond)
				}
				acked.Add(1)
			}
		}()
	}
	go func() {
		// Paced by the clock, not by a ticker (which drops ticks under
		// load): by time d, rate*d events have been handed out.
		defer close(ids)
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for i := 0; ; {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			for due := int(time.Since(start).Seconds() * float64(rate)); i < due; i++ {
				select {
				case ids <- i:
				case <-stop:
					return
				}
			}
		}
	}()

	type sample struct {
		at        time.Duration
		rss       int64 // kfn dev and its children
		devRSS    int64 // kfn dev alone
		acked     int64
		delivered int
	}
	var samples []sample
	var baseline int64
	tk := time.NewTicker(10 * time.Second)
	for time.Since(start) < length {
		<-tk.C
		s := sample{at: time.Since(start).Round(time.Second), devRSS: rssOf(dev.cmd.Process.Pid), acked: acked.Load(), delivered: len(soakDelivered(t, record))}
		s.rss = s.devRSS
		for _, pid := range children(dev.cmd.Process.Pid) {
			s.rss += rssOf(pid)
		}
		samples = append(samples, s)
		if baseline == 0 && s.at >= soakWarmup {
			baseline = s.rss
		}
		t.Logf("%6s acked %7d delivered %7d  rss %4d MiB (kfn dev %4d MiB)", s.at, s.acked, s.delivered, s.rss>>20, s.devRSS>>20)
	}
	tk.Stop()
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	total := int(acked.Load())

	require.Eventually(t, func() bool {
		got, err := readDelivered(record)
		if err != nil {
			return false
		}
		for i := range total {
			if got[strconv.Itoa(i)] == 0 {
				return false
			}
		}
		return true
	}, 5*time.Minute, time.Second, "every acknowledged event reaches the end of the chain")
	got := soakDelivered(t, record)
	dups := 0
	for _, n := range got {
		dups += n - 1
	}
	end := samples[len(samples)-1].rss
	peak := slices.MaxFunc(samples, func(a, b sample) int { return int(a.rss - b.rss) }).rss
	t.Logf("soak: %d events in %s (%.0f/s) through two chained functions, all delivered, %d duplicates, %d publish retries",
		total, elapsed.Round(time.Second), float64(total)/elapsed.Seconds(), dups, failures.Load())
	t.Logf("soak: resident memory after warm-up %d MiB, at the end %d MiB, peak %d MiB (bound: +%d MiB)",
		baseline>>20, end>>20, peak>>20, soakMaxGrowth>>20)
	assert.Zero(t, dups, "events that reached the end of the chain more than once (bound: none)")
	if baseline > 0 {
		assert.LessOrEqual(t, end-baseline, int64(soakMaxGrowth), "memory grew beyond the bound after the warm-up")
	}
	dev.interrupt()
}

// soakPublish publishes event id as soak.started.v1; true on 204.
func soakPublish(client *http.Client, addr string, id int) bool {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/publish", strings.NewReader(`{"id":"`+strconv.Itoa(id)+`"}`))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Type", "soak.started.v1")
	req.Header.Set("Ce-Source", "soak")
	req.Header.Set("Ce-Id", strconv.Itoa(id))
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusNoContent
}

// soakDelivered counts the deliveries per id at the end of the chain.
func soakDelivered(t *testing.T, record string) map[string]int {
	t.Helper()
	got, err := readDelivered(record)
	require.NoError(t, err)
	return got
}

// readDelivered is soakDelivered for conditions, which run in Eventually's
// goroutine and must not stop the test: it returns the error.
func readDelivered(record string) (map[string]int, error) {
	f, err := os.Open(record)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	got := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if id := strings.TrimSpace(sc.Text()); id != "" {
			got[id]++
		}
	}
	return got, sc.Err()
}

// rssOf is a process's resident memory in bytes (0 once it is gone).
func rssOf(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}
