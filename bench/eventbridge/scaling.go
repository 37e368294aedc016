package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/bench/result"
)

// subscriptions returns n Subscriptions, each to its own event type, and
// those types. Together they may have inflight events in flight (at least
// 16 each), so that a thousand of them do not prefetch a thousand times
// as much as one.
func subscriptions(n, inflight int) ([]*v1alpha2.Subscription, []string) {
	per := inflight
	if n > 1 {
		per = max(16, inflight/n)
	}
	subs := make([]*v1alpha2.Subscription, n)
	types := make([]string, n)
	for i := range n {
		types[i] = "order.created.v1"
		name := "bench"
		if n > 1 {
			types[i] = "order.n" + strconv.Itoa(i) + ".v1"
			name = fmt.Sprintf("bench-%04d", i)
		}
		subs[i] = &v1alpha2.Subscription{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: v1alpha2.SubscriptionSpec{
				Sink: "http://sink.default.svc.cluster.local/", Source: "bench", Types: []string{types[i]},
				Config: map[string]v1alpha2.ConfigValue{v1alpha2.ConfigMaxInFlightMessages: v1alpha2.ConfigValue(strconv.Itoa(per))},
			},
		}
	}
	return subs, types
}

// scaling measures the event bridge with each Subscription count of
// o.subs, each on a fresh NATS server: the load is spread evenly over the
// Subscriptions' event types, so every event is delivered once.
func scaling(o options, out *result.Writer) error {
	if len(o.subs) == 0 {
		return nil
	}
	fmt.Fprintf(human, "\nscaling: events spread over N Subscriptions (one event type each)\n")
	for _, n := range o.subs {
		m, err := scalingPoint(o, n)
		if err != nil {
			return fmt.Errorf("%d subscriptions: %w", n, err)
		}
		fmt.Fprintf(human, "%5d subscriptions  throughput %8.0f events/s   latency at %d/s: p50 %6.2f ms  p99 %6.2f ms  (undelivered %d)\n",
			n, m.throughput, o.rate, ms(m.p50), ms(m.p99), m.lost)
		for _, f := range []result.Figure{
			{Name: "eventbridge/subscriptions/throughput", Unit: "events/s", Value: m.throughput, X: float64(n), XLabel: "Subscriptions"},
			{Name: "eventbridge/subscriptions/latency-p99", Unit: "ms", Value: ms(m.p99), X: float64(n), XLabel: "Subscriptions"},
		} {
			if err := out.Emit(f); err != nil {
				return err
			}
		}
	}
	return nil
}

func scalingPoint(o options, n int) (measured, error) {
	ns, stop, err := startNATS()
	if err != nil {
		return measured{}, err
	}
	defer stop()
	sink := newSink()
	srv, sinkURL, err := serve(sink)
	if err != nil {
		return measured{}, err
	}
	defer srv.Close()
	p, err := kfn(ns.ClientURL(), sinkURL, o, n)
	if err != nil {
		return measured{}, err
	}
	defer p.cleanup()
	if _, err := throughput(p, sink, o, time.Second); err != nil {
		return measured{}, err
	}
	tp, err := throughput(p, sink, o, o.duration)
	if err != nil {
		return measured{}, err
	}
	p50, p99, lost, err := latency(p, sink, o)
	if err != nil {
		return measured{}, err
	}
	return measured{throughput: tp, p50: p50, p99: p99, lost: lost}, nil
}

// rawJetStream measures JetStream alone, with no HTTP on either side:
// o.connections publishers calling js.Publish (which waits for the stored
// acknowledgement, as the publisher does) and one pull consumer acking
// every message. It returns the consumed events/s and the publish-to-
// consume latency at o.rate.
func rawJetStream(natsURL string, o options) (measured, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return measured{}, fmt.Errorf("connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return measured{}, err
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "raw", Subjects: []string{"raw.>"}, Storage: jetstream.FileStorage, Retention: jetstream.InterestPolicy}); err != nil {
		return measured{}, fmt.Errorf("create stream: %w", err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "raw", jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: o.inflight})
	if err != nil {
		return measured{}, fmt.Errorf("create consumer: %w", err)
	}
	var consumed atomic.Int64
	var mu sync.Mutex
	var record bool
	var lat []time.Duration
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if d := m.Data(); len(d) >= 19 {
			if sent, err := strconv.ParseInt(string(d[:19]), 10, 64); err == nil {
				mu.Lock()
				if record {
					lat = append(lat, time.Since(time.Unix(0, sent)))
				}
				mu.Unlock()
			}
		}
		_ = m.Ack()
		consumed.Add(1)
	}, jetstream.PullMaxMessages(o.inflight))
	if err != nil {
		return measured{}, fmt.Errorf("consume: %w", err)
	}
	defer cc.Stop()

	publish := func() error {
		_, err := js.Publish(ctx, "raw.events", payload(o.size))
		return err
	}
	closedLoop := func(d time.Duration) (float64, error) {
		start := consumed.Load()
		var published atomic.Int64
		var firstErr error
		var once sync.Once
		t0 := time.Now()
		var wg sync.WaitGroup
		for range o.connections {
			wg.Go(func() {
				for time.Since(t0) < d {
					if err := publish(); err != nil {
						once.Do(func() { firstErr = err })
						return
					}
					published.Add(1)
				}
			})
		}
		wg.Wait()
		if firstErr != nil {
			return 0, fmt.Errorf("publish: %w", firstErr)
		}
		for limit := time.Now().Add(30 * time.Second); consumed.Load()-start < published.Load(); time.Sleep(time.Millisecond) {
			if time.Now().After(limit) {
				return 0, fmt.Errorf("raw JetStream: %d of %d consumed after 30s", consumed.Load()-start, published.Load())
			}
		}
		return float64(published.Load()) / time.Since(t0).Seconds(), nil
	}
	if _, err := closedLoop(time.Second); err != nil {
		return measured{}, err
	}
	var best measured
	for range o.rounds {
		tp, err := closedLoop(o.duration)
		if err != nil {
			return measured{}, err
		}
		best.throughput = max(best.throughput, tp)
	}

	mu.Lock()
	record, lat = true, nil
	mu.Unlock()
	start := consumed.Load()
	n := int(o.duration.Seconds() * float64(o.rate))
	interval := time.Second / time.Duration(o.rate)
	var failed atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * interval)))
		wg.Go(func() {
			if err := publish(); err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	for limit := time.Now().Add(10 * time.Second); consumed.Load()-start < int64(n)-failed.Load() && time.Now().Before(limit); time.Sleep(time.Millisecond) {
	}
	mu.Lock()
	l := slices.Clone(lat)
	record = false
	mu.Unlock()
	if len(l) == 0 {
		return measured{}, fmt.Errorf("raw JetStream: nothing consumed")
	}
	slices.Sort(l)
	best.p50, best.p99, best.lost = l[len(l)/2], l[len(l)*99/100], n-len(l)
	return best, nil
}
