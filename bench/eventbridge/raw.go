package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// rawJetStream measures JetStream alone, the floor under both pipelines:
// o.connections publishers each waiting for the store's acknowledgement
// (as an HTTP publish does), one pull consumer acknowledging every event,
// file storage, no HTTP anywhere. It returns the events consumed per
// second over d.
func rawJetStream(natsURL string, o options, d time.Duration) (tp float64, err error) {
	as(partRaw, func() { tp, err = measureRaw(natsURL, o, d) })
	return tp, err
}

func measureRaw(natsURL string, o options, d time.Duration) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return 0, fmt.Errorf("raw: connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	_ = js.DeleteStream(ctx, "raw") // each measurement starts empty
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "raw", Subjects: []string{"raw.>"}, Storage: jetstream.FileStorage, Retention: jetstream.InterestPolicy}); err != nil {
		return 0, fmt.Errorf("raw: stream: %w", err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), "raw") }()
	cons, err := js.CreateConsumer(ctx, "raw", jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: o.inflight})
	if err != nil {
		return 0, fmt.Errorf("raw: consumer: %w", err)
	}
	var consumed atomic.Int64
	counting := atomic.Bool{}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		if counting.Load() {
			consumed.Add(1)
		}
	}, jetstream.PullMaxMessages(o.inflight))
	if err != nil {
		return 0, fmt.Errorf("raw: consume: %w", err)
	}
	defer cc.Stop()
	body := payload(o.size)
	start := time.Now()
	counting.Store(true)
	var wg sync.WaitGroup
	for range o.connections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < d {
				if _, err := js.Publish(ctx, "raw.events", body); err != nil && ctx.Err() != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	counting.Store(false)
	return float64(consumed.Load()) / time.Since(start).Seconds(), nil
}
