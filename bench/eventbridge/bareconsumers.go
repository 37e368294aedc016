package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
)

// bareSubjects are the subjects the bare consumers are handed events on:
// event subjects of the event stream that no Subscription of the
// benchmark takes.
const bareSubjects = 100

// bareEventsPerSecond is what the bare consumers are handed together.
const bareEventsPerSecond = 1000

// bareConsumers is a probe of what JetStream consumers cost the others,
// without kfn's publisher or dispatcher: on natsURL's event stream it makes
// consumers pull consumers (each filtering one of the first consumers
// subjects), or with oneOfAll a single consumer whose filter is all
// bareSubjects subjects, acknowledges every event they are handed, and
// publishes bareEventsPerSecond events a second to JetStream spread over
// their subjects, until the function it returns is called.
func bareConsumers(natsURL string, consumers int, oneOfAll bool) (func(), error) {
	if consumers < 1 || consumers > bareSubjects {
		return nil, fmt.Errorf("bare consumers: %d, want 1 to %d", consumers, bareSubjects)
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return nil, fmt.Errorf("bare consumers: connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("bare consumers: %w", err)
	}
	subjects := make([]string, bareSubjects)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("%s.bare.t%d.v1", v1alpha2.SubjectPrefix, i)
	}
	used := subjects[:consumers]
	configs := make([]jetstream.ConsumerConfig, 0, consumers)
	if oneOfAll {
		used = subjects
		configs = append(configs, jetstream.ConsumerConfig{Durable: "bare-all", FilterSubjects: subjects, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: bareEventsPerSecond})
	} else {
		for i, s := range used {
			configs = append(configs, jetstream.ConsumerConfig{Durable: fmt.Sprintf("bare-%d", i), FilterSubject: s, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: bareEventsPerSecond})
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var contexts []jetstream.ConsumeContext
	closeAll := func() {
		cancel()
		for _, cc := range contexts {
			cc.Stop()
		}
		nc.Close()
	}
	for _, cfg := range configs {
		c, err := js.CreateOrUpdateConsumer(ctx, stream.DefaultEventStream, cfg)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("bare consumers: create %s: %w", cfg.Durable, err)
		}
		cc, err := c.Consume(func(m jetstream.Msg) { _ = m.Ack() })
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("bare consumers: consume %s: %w", cfg.Durable, err)
		}
		contexts = append(contexts, cc)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / bareEventsPerSecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if _, err := js.Publish(ctx, used[n%len(used)], []byte(`{}`)); err != nil && !errors.Is(err, context.Canceled) {
					continue // a publish the server refused is one event fewer, not the probe's end
				}
			}
		}
	}()
	return func() { closeAll(); wg.Wait() }, nil
}
