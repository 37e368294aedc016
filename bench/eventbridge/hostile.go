package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/bench/figures"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/test/hostile"
)

// The attacker's load while it runs: refused publishes (every kind of
// test/hostile's, in turn), and events for its own Subscriptions, per
// second. It is a rate, not a flood: what is measured is whether the kinds
// of attack reach the victim through the shared parts, not how much CPU a
// client can take from a 2-core machine.
const (
	attackRefusedPerSecond = 100
	attackSlowPerSecond    = 50 // 100 KiB each, to a sink that never answers
	attackDeadPerSecond    = 100
	attackRedirectPerSec   = 20
)

// victimTiming is what the victim measured: each publish's answer time
// and each delivery's publish-to-delivery time.
type victimTiming struct {
	publish, delivery []time.Duration
	failed            int
}

func (v victimTiming) add(w victimTiming) victimTiming {
	return victimTiming{publish: append(v.publish, w.publish...), delivery: append(v.delivery, w.delivery...), failed: v.failed + w.failed}
}

func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*99/100]
}

// hostileTenant measures what a hostile tenant on the same event bridge
// costs another's events: two kfn pipelines, each on a NATS server of its
// own, one serving the victim alone, the other the victim beside the
// attacker's Subscriptions (a sink that never answers, with 100 KiB events
// and 1,000 in flight; one that always fails; one that redirects
// elsewhere). They are measured in turns, the order rotating, o.rounds
// times: the victim publishes at o.rate for o.duration, and on the
// attacked pipeline the attacker publishes meanwhile (its refused
// requests and its own events, at the rates above). The figures are the
// victim's publish and delivery p99 with the attacker beside them over
// those without (goal: within 2x).
func hostileTenant(natsURL string, s *sink, sinkURL string, o options) error {
	attackedNATS, stopNATS, err := startNATS()
	if err != nil {
		return err
	}
	defer stopNATS()
	var alone, attacked *hostilePipeline
	as(partKfn, func() { alone, err = newHostilePipeline(natsURL, sinkURL, o, false) })
	if err != nil {
		return err
	}
	defer alone.cleanup()
	as(partKfn, func() { attacked, err = newHostilePipeline(attackedNATS.ClientURL(), sinkURL, o, true) })
	if err != nil {
		return err
	}
	defer attacked.cleanup()
	for _, p := range []*hostilePipeline{alone, attacked} {
		if _, err := p.victim(s, o, time.Second); err != nil { // warm-up
			return err
		}
	}
	fmt.Printf("a hostile tenant beside the victim: victim %d events/s of %d B, attacker %d refused publishes/s, %d/s of 100 KiB to a sink that never answers, %d/s to a failing one, %d/s to a redirecting one\n\n",
		o.rate, o.size, attackRefusedPerSecond, attackSlowPerSecond, attackDeadPerSecond, attackRedirectPerSec)
	timings := map[string]victimTiming{}
	for round := 1; round <= o.rounds; round++ {
		order := []*hostilePipeline{alone, attacked}
		if round%2 == 0 {
			order = []*hostilePipeline{attacked, alone}
		}
		for _, p := range order {
			var t victimTiming
			var err error
			as(partLoad, func() { t, err = p.victim(s, o, o.duration) })
			if err != nil {
				return err
			}
			fmt.Printf("round %d  %-8s victim publish p99 %6.2f ms  delivery p99 %6.2f ms  (%d delivered, %d publishes failed)\n",
				round, p.name, ms(p99(t.publish)), ms(p99(t.delivery)), len(t.delivery), t.failed)
			timings[p.name] = timings[p.name].add(t)
		}
	}
	a, b := timings[alone.name], timings[attacked.name]
	fmt.Printf("\nvictim with/without the attacker: publish p99 %.2f ms / %.2f ms = %.2f, delivery p99 %.2f ms / %.2f ms = %.2f (target <= 2); attacker: %d refused publishes answered as they must, %d otherwise\n",
		ms(p99(b.publish)), ms(p99(a.publish)), ms(p99(b.publish))/ms(p99(a.publish)),
		ms(p99(b.delivery)), ms(p99(a.delivery)), ms(p99(b.delivery))/ms(p99(a.delivery)), attacked.refused.Load(), attacked.wrong.Load())
	if n := attacked.wrong.Load(); n > 0 {
		return fmt.Errorf("%d hostile publishes were not answered as they must be (first: %v)", n, attacked.firstWrong.Load())
	}
	if a.failed+b.failed > 0 {
		return fmt.Errorf("%d of the victim's publishes failed", a.failed+b.failed)
	}
	const group = "event bridge"
	target := figures.Target{MaxRatio: 2, Text: "<= 2x without the attacker"}
	return figures.Append(o.figures,
		figures.Figure{Group: group, Name: fmt.Sprintf("victim's publish p99 at %d events/s beside a hostile tenant", o.rate), Unit: "ms", Value: ms(p99(b.publish)),
			Anchor: "the same victim without the attacker", AnchorValue: ms(p99(a.publish)), Target: target},
		figures.Figure{Group: group, Name: fmt.Sprintf("victim's delivery p99 at %d events/s beside a hostile tenant", o.rate), Unit: "ms", Value: ms(p99(b.delivery)),
			Anchor: "the same victim without the attacker", AnchorValue: ms(p99(a.delivery)), Target: target},
	)
}

// hostilePipeline is kfn serving the victim's Subscription, and with an
// attacker, the attacker's too, which its load drives in the victim's
// turns.
type hostilePipeline struct {
	*pipeline
	attackerSinks  map[string]string // service -> URL
	refused, wrong atomic.Int64
	firstWrong     atomic.Value
}

func newHostilePipeline(natsURL, sinkURL string, o options, attacker bool) (*hostilePipeline, error) {
	hp := &hostilePipeline{attackerSinks: map[string]string{}}
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	subs := subscriptions(o)
	if attacker {
		never := make(chan struct{})
		for name, h := range map[string]http.HandlerFunc{
			"slow": func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body); <-never },
			"dead": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) },
			"redirect": func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, sinkURL, http.StatusTemporaryRedirect)
			},
		} {
			srv, url, err := serve(h)
			if err != nil {
				closeAll()
				return nil, err
			}
			closers = append(closers, func() { srv.Close() })
			hp.attackerSinks[name] = url
		}
		closers = append(closers, func() { close(never) })
		for name, config := range map[string]map[string]v1alpha2.ConfigValue{
			"slow":     {v1alpha2.ConfigMaxInFlightMessages: "1000", v1alpha2.ConfigMaxBacklog: "2000"},
			"dead":     {v1alpha2.ConfigMaxDeliver: "1", v1alpha2.ConfigMaxBacklog: "100"},
			"redirect": {v1alpha2.ConfigMaxDeliver: "1"},
		} {
			subs = append(subs, &v1alpha2.Subscription{
				ObjectMeta: metav1.ObjectMeta{Namespace: "mallory", Name: name},
				Spec: v1alpha2.SubscriptionSpec{Sink: "http://" + name + ".mallory.svc.cluster.local/", Source: hostile.AttackerSource,
					Types: []string{"spam." + name + ".v1"}, Config: config},
			})
		}
	}
	resolve := dispatcher.ResolverFunc(func(s v1alpha2.Sink) (string, error) {
		if u, ok := hp.attackerSinks[s.Service]; ok {
			return u, nil
		}
		return sinkURL, nil
	})
	rb, err := startBridge(natsURL, []string{eventbridge.ComponentPublisher, eventbridge.ComponentDispatcher}, resolve, subs, nil, 0)
	if err != nil {
		closeAll()
		return nil, err
	}
	p, err := publish(rb, o, func() { rb.stop(); closeAll() })
	if err != nil {
		return nil, err
	}
	p.name = "alone"
	if attacker {
		p.name = "attacked"
	}
	hp.pipeline = p
	return hp, nil
}

// victim publishes the victim's events at o.rate for d, with the
// attacker's load meanwhile when the pipeline has one, and returns what
// the victim measured.
func (hp *hostilePipeline) victim(s *sink, o options, d time.Duration) (victimTiming, error) {
	ctx, cancel := context.WithCancel(context.Background())
	var attack sync.WaitGroup
	if len(hp.attackerSinks) > 0 {
		hp.attack(ctx, &attack)
	}
	defer func() { cancel(); attack.Wait() }()
	s.mu.Lock()
	s.record, s.latencies = true, nil
	s.mu.Unlock()
	start := s.delivered.Load()
	n := int(d.Seconds() * float64(o.rate))
	interval := time.Second / time.Duration(o.rate)
	var mu sync.Mutex
	var t victimTiming
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * interval)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := time.Now()
			err := post(hp.pipeline, o.size)
			took := time.Since(sent)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.failed++
				return
			}
			t.publish = append(t.publish, took)
		}()
	}
	wg.Wait()
	for limit := time.Now().Add(10 * time.Second); s.delivered.Load()-start < int64(n-t.failed) && time.Now().Before(limit); time.Sleep(time.Millisecond) {
	}
	s.mu.Lock()
	t.delivery = slices.Clone(s.latencies)
	s.record = false
	s.mu.Unlock()
	if len(t.delivery) < n-t.failed {
		return t, fmt.Errorf("%s: %d of the victim's %d events delivered within 10s", hp.name, len(t.delivery), n-t.failed)
	}
	return t, nil
}

// attack runs the attacker's load until ctx ends.
func (hp *hostilePipeline) attack(ctx context.Context, wg *sync.WaitGroup) {
	base := strings.TrimSuffix(hp.url, "/publish")
	every := func(perSecond int, f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second / time.Duration(perSecond))
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				f(i)
			}
		}()
	}
	var round atomic.Int64
	requests := hostile.Publishes(hostile.AttackerSource, 0)
	every(attackRefusedPerSecond, func(i int) {
		if i%len(requests) == 0 {
			requests = hostile.Publishes(hostile.AttackerSource, int(round.Add(1)))
		}
		r := requests[i%len(requests)]
		code, body, err := r.Send(ctx, client, base, nil)
		if err == nil {
			err = r.Check(code, body)
		}
		switch {
		case err == nil:
			hp.refused.Add(1)
		case ctx.Err() == nil && !errors.Is(err, context.Canceled):
			hp.wrong.Add(1)
			hp.firstWrong.CompareAndSwap(nil, err)
		}
	})
	own := func(name string, size int) func(int) {
		data := strings.Repeat("x", size)
		return func(i int) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/publish", strings.NewReader(data))
			for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": name + "-" + strconv.FormatInt(ids.Add(1), 10),
				"Ce-Source": hostile.AttackerSource, "Ce-Type": "spam." + name + ".v1", "Content-Type": "application/octet-stream"} {
				req.Header.Set(k, v)
			}
			if resp, err := client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
	every(attackSlowPerSecond, own("slow", 100<<10))
	every(attackDeadPerSecond, own("dead", 64))
	every(attackRedirectPerSec, own("redirect", 64))
}
