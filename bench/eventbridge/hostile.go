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

// attackClass is one kind of hostile tenant (DESIGN.md's attack classes on
// the shared event path): its sinks, Subscriptions and load, which arm
// adds to an attacker. Each is measured on a pipeline of its own beside the
// victim alone. The loads are rates, not floods: what is measured is
// whether the kind of attack reaches the victim through the shared parts,
// not how much CPU a client can take from a 2-core machine.
type attackClass struct {
	name, text string
	arm        func(a *attacker)
	// probe, when set, is a load run on the pipeline's NATS server itself
	// (natsURL), beside kfn: a measurement of where an attack's cost lies,
	// run only when -attacks names it, not a tenant's attack.
	probe func(natsURL string) (stop func(), err error)
	// probeOnly marks a class that measures where a cost lies, run only
	// when -attacks names it (as every class with a probe is).
	probeOnly bool
}

// attackClasses are the attack classes, in the order of the report.
var attackClasses = []attackClass{
	{name: "fan-out", text: "100 Subscriptions (a namespace's limit), 20 on each of 5 types (the limit per type), 15 publishes/s of each type (1,500 deliveries/s) to a sink that answers at once",
		arm: func(a *attacker) {
			a.sink("fast", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
			for i := range 100 {
				a.subscribe(fmt.Sprint("fan-", i), "fast", fmt.Sprintf("spam.fan%d.v1", i%5), nil)
			}
			for t := range 5 {
				a.publish(15, fmt.Sprintf("spam.fan%d.v1", t), 64)
			}
		}},
	{name: "many Subscriptions", text: "100 Subscriptions (a namespace's limit), each of a type of its own, 9 publishes/s of each type (900 deliveries/s, within the namespace's rate) to a sink that answers at once",
		arm: func(a *attacker) {
			a.sink("fast", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
			for i := range 100 {
				a.subscribe(fmt.Sprint("many-", i), "fast", fmt.Sprintf("spam.many%d.v1", i), nil)
				a.publish(9, fmt.Sprintf("spam.many%d.v1", i), 64)
			}
		}},
	{name: "slow sinks", text: "300 publishes/s of 10 KiB to a sink that never answers, 1,000 in flight",
		arm: func(a *attacker) {
			a.sink("slow", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body); <-a.done })
			a.subscribe("slow", "slow", "spam.slow.v1", map[string]v1alpha2.ConfigValue{v1alpha2.ConfigMaxInFlightMessages: "1000"})
			a.publish(300, "spam.slow.v1", 10<<10)
		}},
	{name: "failing sinks", text: "100 publishes/s to a sink that answers 500, 100 attempts 10 ms apart, 100 in flight",
		arm: func(a *attacker) {
			a.sink("dead", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
			a.subscribe("dead", "dead", "spam.dead.v1", map[string]v1alpha2.ConfigValue{v1alpha2.ConfigMaxInFlightMessages: "100",
				v1alpha2.ConfigMaxDeliver: "100", v1alpha2.ConfigBackoffInitial: "10ms", v1alpha2.ConfigBackoffMax: "10ms"})
			a.publish(100, "spam.dead.v1", 64)
		}},
	{name: "refused publishes", text: "300 refused publishes/s (every kind of test/hostile's in turn)",
		arm: func(a *attacker) { a.refused(300) }},
	{name: "large events", text: "20 publishes/s of 1,000 KiB to a sink that answers at once (past a namespace's -publish-bytes-per-namespace, 2 MiB a second: the rest refused)",
		arm: func(a *attacker) {
			a.sink("large", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
			a.subscribe("large", "large", "spam.large.v1", nil)
			a.publish(20, "spam.large.v1", 1000<<10)
		}},
	{name: "redirects", text: "100 publishes/s to a sink that redirects to the victim's",
		arm: func(a *attacker) {
			a.sink("redirect", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, a.victimSink, http.StatusTemporaryRedirect)
			})
			a.subscribe("redirect", "redirect", "spam.redirect.v1", map[string]v1alpha2.ConfigValue{v1alpha2.ConfigMaxDeliver: "1"})
			a.publish(100, "spam.redirect.v1", 64)
		}},
	{name: "reply storm", text: "50 publishes/s to a sink that answers each with an event of the type it subscribes to (to the hop limit)",
		arm: func(a *attacker) {
			var n atomic.Int64
			a.sink("echo", func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "echo-" + strconv.FormatInt(n.Add(1), 10),
					"Ce-Source": hostile.AttackerSource, "Ce-Type": "spam.echo.v1", "Content-Type": "application/json"} {
					w.Header().Set(k, v)
				}
				_, _ = io.WriteString(w, "{}")
			})
			a.subscribe("echo", "echo", "spam.echo.v1", nil)
			a.publish(50, "spam.echo.v1", 64)
		}},
	{name: "all at once", text: "the former row: 100 refused publishes/s, 50/s of 100 KiB to a sink that never answers (1,000 in flight), 100/s to a failing one, 20/s to a redirecting one",
		arm: func(a *attacker) {
			a.refused(100)
			a.sink("slow", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body); <-a.done })
			a.sink("dead", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
			a.sink("redirect", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, a.victimSink, http.StatusTemporaryRedirect)
			})
			a.subscribe("slow", "slow", "spam.slow.v1", map[string]v1alpha2.ConfigValue{v1alpha2.ConfigMaxInFlightMessages: "1000", v1alpha2.ConfigMaxBacklog: "2000"})
			a.subscribe("dead", "dead", "spam.dead.v1", map[string]v1alpha2.ConfigValue{v1alpha2.ConfigMaxDeliver: "1", v1alpha2.ConfigMaxBacklog: "100"})
			a.subscribe("redirect", "redirect", "spam.redirect.v1", map[string]v1alpha2.ConfigValue{v1alpha2.ConfigMaxDeliver: "1"})
			a.publish(50, "spam.slow.v1", 100<<10)
			a.publish(100, "spam.dead.v1", 64)
			a.publish(20, "spam.redirect.v1", 64)
		}},
	{name: "one busy Subscription", text: "probe (only with -attacks): what \"many Subscriptions\" sends, 900 publishes/s, to one Subscription",
		arm: func(a *attacker) {
			a.sink("fast", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
			a.subscribe("busy", "fast", "spam.busy.v1", nil)
			a.publish(900, "spam.busy.v1", 64)
		}, probeOnly: true},
	{name: "idle Subscriptions", text: "probe (only with -attacks): 100 Subscriptions, each of a type of its own, nothing published",
		arm: func(a *attacker) {
			a.sink("fast", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
			for i := range 100 {
				a.subscribe(fmt.Sprint("idle-", i), "fast", fmt.Sprintf("spam.idle%d.v1", i), nil)
			}
		}, probeOnly: true},
	{name: "100 types to one Subscription", text: "probe (only with -attacks): what \"many Subscriptions\" sends, 9 publishes/s of each of 100 types, to one Subscription of the 100",
		arm: func(a *attacker) {
			a.sink("fast", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
			a.subs = append(a.subs, &v1alpha2.Subscription{
				ObjectMeta: metav1.ObjectMeta{Namespace: attackerNamespace, Name: "one"},
				Spec:       v1alpha2.SubscriptionSpec{Sink: "http://fast.mallory.svc.cluster.local/", Source: hostile.AttackerSource},
			})
			for i := range 100 {
				a.subs[0].Spec.Types = append(a.subs[0].Spec.Types, fmt.Sprintf("spam.many%d.v1", i))
				a.publish(9, fmt.Sprintf("spam.many%d.v1", i), 64)
			}
		}, probeOnly: true},
	{name: "bare: 20 on one subject in bursts", text: "probe (only with -attacks): 20 bare consumers of one subject, handed 75 events a second in bursts of 5 at once (the fan-out's load without kfn: 1,500 deliveries a second)",
		arm: func(*attacker) {}, probe: bareProbe{Consumers: 20, OneSubject: true, Burst: 5, Rate: 75}.probe()},
	{name: "bare: 1 on one subject in bursts", text: "probe (only with -attacks): the same bursts to one bare consumer (75 deliveries a second)",
		arm: func(*attacker) {}, probe: bareProbe{Consumers: 1, OneSubject: true, Burst: 5, Rate: 75}.probe()},
	{name: "bare: 100 consumers", text: "probe (only with -attacks): 100 bare JetStream consumers of the event stream, one subject each, handed 1,000 events a second together (published to NATS, acknowledged at once, by a process of their own)",
		arm: func(*attacker) {}, probe: bareProbe{Consumers: 100}.probe()},
	{name: "bare: 100 on their stream", text: "probe (only with -attacks): the same 100 consumers on a stream of their own",
		arm: func(*attacker) {}, probe: bareProbe{Consumers: 100, OwnStream: true}.probe()},
	{name: "bare: 5 consumers", text: "probe (only with -attacks): the same 1,000 events a second to 5 bare consumers",
		arm: func(*attacker) {}, probe: bareProbe{Consumers: 5}.probe()},
	{name: "bare: 1 of 100 subjects", text: "probe (only with -attacks): the same 1,000 events a second on 100 subjects to one bare consumer whose filter is all of them",
		arm: func(*attacker) {}, probe: bareProbe{Consumers: 1, OneOfAll: true}.probe()},
}

// The namespaces of the hostile-tenant benchmark's sender identities.
const (
	victimNamespace   = "bank"
	attackerNamespace = "mallory"
)

// attacker is the hostile tenant of one pipeline: namespace mallory, its
// sinks (served on this machine) and Subscriptions, and the loads it runs
// while the victim publishes. The benchmark's process keeps its
// Subscriptions; its sinks and loads run in the attacker process
// (attackerproc.go).
type attacker struct {
	victimSink string
	// token is the attacker namespace's, which its publishes carry (the
	// refused publishes carry their own, or none).
	token string
	// done ends the sinks that never answer, before the pipeline stops.
	done  chan struct{}
	sinks map[string]http.HandlerFunc // service -> handler
	subs  []*v1alpha2.Subscription
	loads []attackLoad
	// refusedOK counts refused publishes answered as they must be, wrong
	// the others (firstWrong the first of them).
	refusedOK, wrong atomic.Int64
	firstWrong       atomic.Value
}

// attackLoad is f called perSecond times a second, with the publisher's
// base URL and the call's number.
type attackLoad struct {
	perSecond int
	f         func(ctx context.Context, base string, i int)
}

func newAttacker(victimSink string) *attacker {
	return &attacker{victimSink: victimSink, done: make(chan struct{}), sinks: map[string]http.HandlerFunc{}}
}

func (a *attacker) sink(service string, h http.HandlerFunc) { a.sinks[service] = h }

func (a *attacker) subscribe(name, service, eventType string, config map[string]v1alpha2.ConfigValue) {
	a.subs = append(a.subs, &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mallory", Name: name},
		Spec: v1alpha2.SubscriptionSpec{Sink: "http://" + service + ".mallory.svc.cluster.local/", Source: hostile.AttackerSource,
			Types: []string{eventType}, Config: config},
	})
}

// publish publishes perSecond events of eventType with size bytes of data.
func (a *attacker) publish(perSecond int, eventType string, size int) {
	data := strings.Repeat("x", size)
	a.loads = append(a.loads, attackLoad{perSecond: perSecond, f: func(ctx context.Context, base string, i int) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/publish", strings.NewReader(data))
		for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": eventType + "-" + strconv.FormatInt(ids.Add(1), 10),
			"Ce-Source": hostile.AttackerSource, "Ce-Type": eventType, "Content-Type": "application/octet-stream"} {
			req.Header.Set(k, v)
		}
		if a.token != "" {
			req.Header.Set("Authorization", "Bearer "+a.token)
		}
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}})
}

// refused sends perSecond of test/hostile's publishes, each of which must
// be refused, checking that each is.
func (a *attacker) refused(perSecond int) {
	var round atomic.Int64
	var mu sync.Mutex
	requests := hostile.Publishes(hostile.AttackerSource, 0)
	a.loads = append(a.loads, attackLoad{perSecond: perSecond, f: func(ctx context.Context, base string, i int) {
		mu.Lock()
		if i%len(requests) == 0 {
			requests = hostile.Publishes(hostile.AttackerSource, int(round.Add(1)))
		}
		r := requests[i%len(requests)]
		mu.Unlock()
		code, body, err := r.Send(ctx, client, base, nil)
		if err == nil {
			err = r.Check(code, body)
		}
		switch {
		case err == nil:
			a.refusedOK.Add(1)
		case ctx.Err() == nil && !errors.Is(err, context.Canceled):
			a.wrong.Add(1)
			a.firstWrong.CompareAndSwap(nil, err)
		}
	}})
}

// victimTiming is what the victim measured: each publish's answer time
// and each delivery's publish-to-delivery time.
type victimTiming struct {
	publish, delivery []time.Duration
	// failed counts the publishes that failed, late the events not
	// delivered within 10s of the last publish.
	failed, late int
}

func (v victimTiming) add(w victimTiming) victimTiming {
	return victimTiming{publish: append(v.publish, w.publish...), delivery: append(v.delivery, w.delivery...), failed: v.failed + w.failed, late: v.late + w.late}
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
// costs another's events, for each attack class: in turns, the order
// rotating, o.rounds times, the victim publishes at o.rate for o.duration
// on a kfn pipeline of its own (a NATS server, an event bridge) made for
// the turn, alone or beside the attacker of one class, whose load runs
// from before the victim's warm-up to the end of the turn. The figures are
// the victim's publish and delivery p99 beside each attacker over those
// alone (goal: within 1.5x). The attacker's clients and sinks run in a
// process of their own at the lowest CPU priority (attackerproc.go), so
// that what is measured is what the attack costs the victim through kfn's
// shared parts. The victim's and the attacker's publishes carry their
// namespaces' tokens, which a real API server reviews (identities.go), so
// that the publisher holds each to its namespace's bounds as in a cluster
// (the refused publishes carry their own, or none). o.attacks, when set,
// names the classes to run.
func hostileTenant(s *sink, sinkURL string, o options) error {
	classes := slices.DeleteFunc(slices.Clone(attackClasses), func(c attackClass) bool { return c.probe != nil || c.probeOnly })
	if o.attacks != "" {
		classes = nil
		for name := range strings.SplitSeq(o.attacks, ",") {
			i := slices.IndexFunc(attackClasses, func(c attackClass) bool { return c.name == strings.TrimSpace(name) })
			if i < 0 {
				return fmt.Errorf("-attacks: no attack class %q", name)
			}
			classes = append(classes, attackClasses[i])
		}
	}
	id, err := startIdentities(victimNamespace, attackerNamespace)
	if err != nil {
		return err
	}
	defer func() { _ = id.stop() }()
	fmt.Printf("a hostile tenant beside the victim: victim %d events/s of %d B; each attack class on a pipeline of its own, made for each turn; publishers with their namespaces' tokens (a real API server's TokenReview):\n", o.rate, o.size)
	for _, c := range classes {
		fmt.Printf("  %-18s %s\n", c.name, c.text)
	}
	fmt.Println()
	turns := append([]*attackClass{nil}, pointers(classes)...) // nil: the victim alone
	timings := map[string]victimTiming{}
	var refusedOK int64
	for round := 1; round <= o.rounds; round++ {
		k := (round - 1) % len(turns)
		for _, c := range append(slices.Clone(turns[k:]), turns[:k]...) {
			began := time.Now()
			t, r, err := hostileTurn(s, sinkURL, o, c, id)
			if err != nil {
				return err
			}
			name := turnName(c)
			refusedOK += r.RefusedOK
			attack := ""
			if c != nil {
				secs := time.Since(began).Seconds()
				attack = fmt.Sprintf("; attacker sent %.0f/s, its sinks answered %.0f/s", float64(r.Sent)/secs, float64(r.Answered)/secs)
			}
			fmt.Printf("round %d  %-18s victim publish p99 %7.2f ms  delivery p99 %7.2f ms  (%d delivered, %d not within 10s%s)\n",
				round, name, ms(p99(t.publish)), ms(p99(t.delivery)), len(t.delivery)-t.late, t.late, attack)
			timings[name] = timings[name].add(t)
		}
	}
	alone := timings[turnName(nil)]
	where := ""
	if o.apart {
		where = " on a pipeline of its own (apart: nothing shared but the machine)"
	}
	fmt.Printf("\nthe victim beside each attacker%s over the victim alone (publish p99 %.2f ms, delivery p99 %.2f ms alone; target <= 1.5):\n\n", where, ms(p99(alone.publish)), ms(p99(alone.delivery)))
	fmt.Printf("| attack | victim's publish p99 | ratio | victim's delivery p99 | ratio |\n|---|---|---|---|---|\n")
	const group = "event bridge"
	target := figures.Target{MaxRatio: 1.5, Text: "<= 1.5x without the attacker"}
	var figs []figures.Figure
	for _, c := range classes {
		b := timings[c.name]
		fmt.Printf("| %s | %.2f ms | %.2f | %.2f ms | %.2f |\n", c.name, ms(p99(b.publish)), ms(p99(b.publish))/ms(p99(alone.publish)),
			ms(p99(b.delivery)), ms(p99(b.delivery))/ms(p99(alone.delivery)))
		figs = append(figs,
			figures.Figure{Group: group, Name: fmt.Sprintf("victim's publish p99 at %d events/s beside a hostile tenant%s: %s", o.rate, where, c.name), Unit: "ms",
				Value: ms(p99(b.publish)), Anchor: "the same victim without the attacker", AnchorValue: ms(p99(alone.publish)), Target: target},
			figures.Figure{Group: group, Name: fmt.Sprintf("victim's delivery p99 at %d events/s beside a hostile tenant%s: %s", o.rate, where, c.name), Unit: "ms",
				Value: ms(p99(b.delivery)), Anchor: "the same victim without the attacker", AnchorValue: ms(p99(alone.delivery)), Target: target})
	}
	if refusedOK > 0 {
		fmt.Printf("\nattacker: %d refused publishes answered as they must be\n", refusedOK)
	}
	return figures.Append(o.figures, figs...)
}

func pointers(cs []attackClass) []*attackClass {
	out := make([]*attackClass, len(cs))
	for i := range cs {
		out[i] = &cs[i]
	}
	return out
}

func turnName(c *attackClass) string {
	if c == nil {
		return "alone"
	}
	return c.name
}

// hostileTurn makes a pipeline (a NATS server, an event bridge) for the
// victim, beside the attacker of class c (none when nil), runs the
// attacker's load, warms the victim up for a second, measures it for
// o.duration, and takes the pipeline down. It fails when the victim's
// publishes fail or a hostile publish is not answered as it must be.
func hostileTurn(s *sink, sinkURL string, o options, c *attackClass, id *identities) (victimTiming, attackerReport, error) {
	natsURL, stopNATS, err := hostileNATS(o)
	if err != nil {
		return victimTiming{}, attackerReport{}, err
	}
	defer stopNATS()
	a := newAttacker(sinkURL) // its Subscriptions; its sinks and loads are the process's
	var proc *attackerProc
	sinks := map[string]string{}
	if c != nil {
		c.arm(a)
		if proc, err = startAttacker(c, sinkURL); err != nil {
			return victimTiming{}, attackerReport{}, err
		}
		defer func() { _ = proc.cmd.Process.Kill() }()
		sinks = proc.sinks
	}
	resolve := dispatcher.ResolverFunc(func(s v1alpha2.Sink) (string, error) {
		if u, ok := sinks[s.Service]; ok && s.Namespace == "mallory" {
			return u, nil
		}
		return sinkURL, nil
	})
	var p *pipeline
	as(partKfn, func() {
		var rb *runningBridge
		subs := append(subscriptions(o), a.subs...)
		if o.apart {
			subs = subscriptions(o)
		}
		rb, err = startBridge(natsURL, []string{eventbridge.ComponentPublisher, eventbridge.ComponentDispatcher}, resolve, subs, nil, streamShape{},
			eventbridge.WithAccess(eventbridge.Access{Senders: id.senders}))
		if err == nil {
			p, err = publish(rb, o, rb.stop)
		}
	})
	if err != nil {
		return victimTiming{}, attackerReport{}, err
	}
	defer p.cleanup()
	p.name, p.token = turnName(c), id.tokens[victimNamespace]
	if c != nil && c.probe != nil {
		stopProbe, err := c.probe(natsURL)
		if err != nil {
			return victimTiming{}, attackerReport{}, err
		}
		defer stopProbe()
	}
	if proc != nil {
		base, token := strings.TrimSuffix(p.url, "/publish"), id.tokens[attackerNamespace]
		if o.apart {
			var stopApart func()
			if base, stopApart, err = startApart(c, proc.sinks); err != nil {
				return victimTiming{}, attackerReport{}, err
			}
			defer stopApart()
			token = ""
		}
		if err := proc.attack(base, token); err != nil {
			return victimTiming{}, attackerReport{}, fmt.Errorf("start the attack: %w", err)
		}
	}
	var t victimTiming
	as(partLoad, func() {
		if _, err = victim(p, s, o, time.Second); err == nil { // warm-up
			t, err = victim(p, s, o, o.duration)
		}
	})
	var r attackerReport
	if proc != nil {
		// Before the bridge stops: it waits for its deliveries, which the
		// sinks that never answer end with the process.
		var stopErr error
		r, stopErr = proc.stop()
		err = errors.Join(err, stopErr)
	}
	switch {
	case err != nil:
		return t, r, err
	case t.failed > 0:
		return t, r, fmt.Errorf("%s: %d of the victim's publishes failed", p.name, t.failed)
	case r.Wrong > 0 && !o.apart:
		return t, r, fmt.Errorf("%d hostile publishes were not answered as they must be (first: %s)", r.Wrong, r.FirstWrong)
	}
	return t, r, nil
}

// victim publishes the victim's events at o.rate for d and returns what
// the victim measured; it fails only if the sink cannot be read.
func victim(p *pipeline, s *sink, o options, d time.Duration) (victimTiming, error) {
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
			err := post(p, o.size)
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
	// An event not delivered within the wait counts as delivered at its
	// end: the p99 shows it, and the other turns go on.
	for t.late = n - t.failed - len(t.delivery); len(t.delivery) < n-t.failed; {
		t.delivery = append(t.delivery, time.Since(t0))
	}
	return t, nil
}

// attack runs the attacker's loads on the publisher at base until ctx
// ends, counting in sent the requests it starts.
func (a *attacker) attack(ctx context.Context, wg *sync.WaitGroup, base string, sent *atomic.Int64) {
	for _, l := range a.loads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second / time.Duration(l.perSecond))
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				wg.Add(1)
				sent.Add(1)
				go func() { defer wg.Done(); l.f(ctx, base, i) }()
			}
		}()
	}
}
