package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/stream"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/egress"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
)

// plainKfn is the event bridge without metrics or traces.
func plainKfn(natsURL, sinkURL string, o options) (*pipeline, error) {
	return kfn(natsURL, sinkURL, o, nil)
}

// subscriptions are the kfn pipeline's Subscriptions: max(o.subs, 1), the
// i-th subscribing to the i-th event type, each with maxInFlightMessages
// o.inflight.
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
	}
	return subs
}

// connect returns a JetStream on a new connection to natsURL, with kfn's
// streams made.
func connect(ctx context.Context, natsURL string) (*nats.Conn, jetstream.JetStream, stream.Config, error) {
	streams := stream.DefaultConfig()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return nil, nil, streams, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		err = stream.Ensure(ctx, js, streams)
	}
	if err != nil {
		nc.Close()
		return nil, nil, streams, err
	}
	return nc, js, streams, nil
}

// ensureConsumers makes the consumers of subs, as the Subscription
// reconciler does.
func ensureConsumers(ctx context.Context, js jetstream.JetStream, streams stream.Config, subs []*v1alpha2.Subscription) error {
	for _, sub := range subs {
		cc, err := stream.ConsumerConfig(sub, stream.ConsumerSettings{})
		if err != nil {
			return err
		}
		if _, err := stream.EnsureConsumer(ctx, js, streams.EventStream, cc); err != nil {
			return err
		}
	}
	return nil
}

// newDispatcher is a dispatcher serving subs, delivering every event to
// sinkURL, logging warnings and errors to stderr.
func newDispatcher(js jetstream.JetStream, streams stream.Config, sinkURL string, subs []*v1alpha2.Subscription, opts ...dispatcher.Option) (*dispatcher.Dispatcher, error) {
	opts = append([]dispatcher.Option{
		dispatcher.WithResolver(dispatcher.ResolverFunc(func(v1alpha2.Sink) (string, error) { return sinkURL, nil })),
		dispatcher.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}, opts...)
	d, err := dispatcher.New(js, dispatcher.Config{Streams: streams, Egress: egress.Policy{AllowLoopback: true}}, opts...)
	if err != nil {
		return nil, err
	}
	for _, sub := range subs {
		if err := d.Upsert(sub); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// kfn is the event bridge: publisher, streams, consumers, dispatcher; with
// obs, also its metrics and traces.
func kfn(natsURL, sinkURL string, o options, obs *telemetry) (*pipeline, error) {
	ctx, cancel := context.WithCancel(context.Background())
	nc, js, streams, err := connect(ctx, natsURL)
	if err != nil {
		cancel()
		return nil, err
	}
	fail := func(err error) (*pipeline, error) {
		cancel()
		nc.Close()
		return nil, err
	}
	var dopts []dispatcher.Option
	var popts []publisher.Option
	if obs != nil && obs.reg != nil {
		dopts = append(dopts, dispatcher.WithMetrics(obs.dispatcher))
		popts = append(popts, publisher.WithMetrics(obs.publisher))
	}
	if obs != nil && obs.traces.Enabled {
		dopts = append(dopts, dispatcher.WithTracerProvider(obs.traces))
		popts = append(popts, publisher.WithTracerProvider(obs.traces))
	}
	subs := subscriptions(o)
	if err := ensureConsumers(ctx, js, streams, subs); err != nil {
		return fail(err)
	}
	d, err := newDispatcher(js, streams, sinkURL, subs, dopts...)
	if err != nil {
		return fail(err)
	}
	if obs != nil && obs.reg != nil {
		if err := obs.reg.Register(d.Collector()); err != nil {
			return fail(err)
		}
	}
	done := make(chan struct{})
	go func() { _ = d.Start(ctx); close(done) }()
	p, err := publish(js, streams, o, popts...)
	if err != nil {
		cancel()
		<-done
		return fail(err)
	}
	if obs != nil {
		p.name = "kfn+obs"
		go obs.scrape(ctx)
	}
	closePublisher := p.cleanup
	p.cleanup = func() {
		cancel()
		<-done
		closePublisher()
		if obs != nil {
			obs.close()
		}
		nc.Close()
	}
	return p, nil
}

// publish serves kfn's publisher; the pipeline's cleanup stops it.
func publish(js jetstream.JetStream, streams stream.Config, o options, opts ...publisher.Option) (*pipeline, error) {
	p, err := publisher.New(eventstore.New(js, streams.EventStream), publisher.Config{}, opts...)
	if err != nil {
		return nil, err
	}
	srv, url, err := serve(p)
	if err != nil {
		return nil, err
	}
	return &pipeline{name: "kfn", url: url + "/publish", binary: true, types: o.subs, cleanup: func() { srv.Close() }}, nil
}

// connectWithConsumers connects to natsURL and makes the consumers of o's
// Subscriptions there, as the dispatcher processes expect them.
func connectWithConsumers(ctx context.Context, natsURL string, o options) (*nats.Conn, jetstream.JetStream, stream.Config, error) {
	nc, js, streams, err := connect(ctx, natsURL)
	if err != nil {
		return nil, nil, stream.Config{}, err
	}
	if err := ensureConsumers(ctx, js, streams, subscriptions(o)); err != nil {
		nc.Close()
		return nil, nil, stream.Config{}, err
	}
	return nc, js, streams, nil
}
