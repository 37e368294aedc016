package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/internal/jsstream"
)

// plainKfn is the event bridge without metrics or traces.
func plainKfn(natsURL, sinkURL string, o options) (*pipeline, error) {
	return kfn(natsURL, sinkURL, o, nil)
}

// subscriptions are the kfn pipeline's Subscriptions: max(o.subs, 1), the
// i-th subscribing to the i-th event type, each with maxInFlightMessages
// o.inflight, and ordered by partition key with o.ordering.
func subscriptions(o options) []*v1alpha2.Subscription {
	subs := make([]*v1alpha2.Subscription, max(o.subs, 1))
	for i := range subs {
		subs[i] = &v1alpha2.Subscription{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("bench-%d", i)},
			Spec: v1alpha2.SubscriptionSpec{
				Sink: "http://sink.default.svc.cluster.local/", Source: "bench", Types: []string{eventType(int64(i), o.subs)},
				Config: map[string]v1alpha2.ConfigValue{v1alpha2.ConfigMaxInFlightMessages: v1alpha2.ConfigValue(strconv.Itoa(o.inflight))},
			},
		}
		if o.ordering {
			subs[i].Spec.Config[v1alpha2.ConfigOrdering] = v1alpha2.OrderingPartitionKey
		}
	}
	return subs
}

// runningBridge is an event bridge built with eventbridge.New, as every
// host of kfn builds it, on a NATS connection of its own, and running.
type runningBridge struct {
	*eventbridge.Bridge
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan struct{}
}

// startBridge connects to natsURL, makes kfn's streams, builds the event
// bridge's components (delivering each event to resolve's URL), serves subs
// (their consumers made, as the Subscription reconciler makes them, and
// the dispatcher told, when it runs) and runs it until stop. With obs, it
// records its metrics and traces there. Its streams are of shape (the
// defaults, one replica and one partition, for the zero shape). extra are
// more options of the bridge's.
func startBridge(natsURL string, components []string, resolve dispatcher.Resolver, subs []*v1alpha2.Subscription, obs *telemetry, shape streamShape, extra ...eventbridge.Option) (*runningBridge, error) {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return nil, err
	}
	cfg := eventbridge.DefaultConfig()
	cfg.Components = components
	cfg.Dispatcher.Egress = egress.Policy{AllowLoopback: true} // the sinks are on this machine
	cfg.Admin = false
	cfg.ReplaySweep = time.Hour // nothing is replayed here
	// The benchmark's Subscriptions (up to 2,000) are one namespace's: it
	// measures the bridge at scale, not a namespace's limits.
	cfg.SubscriptionLimits.MaxConsumersPerNamespace = cfg.Streams.MaxConsumers
	if shape.replicas > 0 {
		cfg.Streams.Replicas = shape.replicas
	}
	cfg.Streams.Partitions = shape.partitions
	if shape.stream != "" {
		cfg.Streams.EventStream, cfg.Streams.DeadLetterStream = shape.stream, shape.stream+"-deadletter"
	}
	opts := []eventbridge.Option{eventbridge.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))}
	if obs != nil && obs.reg != nil {
		opts = append(opts, eventbridge.WithMetrics(obs.reg))
	}
	if obs != nil && obs.traces.Enabled {
		opts = append(opts, eventbridge.WithTracer(obs.traces))
	}
	opts = append(opts, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	fail := func(err error) (*runningBridge, error) {
		cancel()
		nc.Close()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	if err := jsstream.Ensure(ctx, js, cfg.Streams); err != nil {
		return fail(err)
	}
	static := &eventbridge.Static{Resolver: resolve}
	b, err := eventbridge.New(cfg, nc, static, opts...)
	if err != nil {
		return fail(err)
	}
	if errs := static.Apply(ctx, subs); len(errs) > 0 {
		return fail(errors.Join(errs...))
	}
	rb := &runningBridge{Bridge: b, nc: nc, cancel: cancel, done: make(chan struct{})}
	go func() {
		if err := b.Run(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "event bridge:", err)
		}
		close(rb.done)
	}()
	return rb, nil
}

// stop stops the event bridge (the dispatcher settles what it holds) and
// closes its connection.
func (rb *runningBridge) stop() {
	rb.cancel()
	<-rb.done
	rb.nc.Close()
}

// to resolves every sink to url.
func to(url string) dispatcher.Resolver {
	return dispatcher.ResolverFunc(func(v1alpha2.Sink) (string, error) { return url, nil })
}

// kfn is the event bridge: publisher, streams, consumers, dispatcher; with
// obs, also its metrics and traces.
func kfn(natsURL, sinkURL string, o options, obs *telemetry) (*pipeline, error) {
	return kfnShaped(natsURL, sinkURL, o, obs, streamShape{})
}

// streamShape is how many replicas and partitions the streams of a
// pipeline have; zero is the default (1).
type streamShape struct {
	replicas, partitions int
	// stream, when set, names the event stream (and, with "-deadletter",
	// the dead-letter stream): two pipelines on one NATS server.
	stream string
}

// kfnShaped is kfn with streams of shape.
func kfnShaped(natsURL, sinkURL string, o options, obs *telemetry, shape streamShape) (*pipeline, error) {
	rb, err := startBridge(natsURL, []string{eventbridge.ComponentPublisher, eventbridge.ComponentDispatcher}, to(sinkURL), subscriptions(o), obs, shape)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if obs != nil {
		go obs.scrape(ctx)
	}
	p, err := publish(rb, o, func() {
		cancel()
		rb.stop()
		if obs != nil {
			obs.close()
		}
	})
	if err != nil {
		return nil, err
	}
	if obs != nil {
		p.name = "kfn+obs"
	}
	return p, nil
}

// publish serves rb's publisher; the pipeline's cleanup stops serving,
// then calls stop. When publish fails it calls stop itself.
func publish(rb *runningBridge, o options, stop func()) (*pipeline, error) {
	srv, url, err := serve(rb.Handlers().Publisher)
	if err != nil {
		stop()
		return nil, err
	}
	return &pipeline{name: "kfn", url: url + "/publish", binary: true, types: o.subs, cleanup: func() { srv.Close(); stop() }}, nil
}
