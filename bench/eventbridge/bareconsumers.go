package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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

// bareProbe says what a bare-consumers probe makes: consumers pull
// consumers (each filtering one of the first consumers subjects), or with
// oneOfAll a single consumer whose filter is all bareSubjects subjects; on
// the event stream, or with ownStream on a stream of their own.
type bareProbe struct {
	Consumers int  `json:"consumers"`
	OneOfAll  bool `json:"oneOfAll,omitempty"`
	OwnStream bool `json:"ownStream,omitempty"`
	// OneSubject, when set, has every consumer filter the same subject,
	// so that each event is handed to all of them (a fan-out), and the
	// events come in bursts of Burst every Burst/Rate seconds, Rate a
	// second on average, each burst published at once.
	OneSubject bool `json:"oneSubject,omitempty"`
	Burst      int  `json:"burst,omitempty"`
	Rate       int  `json:"rate,omitempty"`
}

// bareOwnStream is the stream of bareProbe.OwnStream, and the first
// token of its subjects.
const bareOwnStream = "bare"

// probe returns the attack class's probe: the bare consumers run in a
// process of their own (childBare), so that what they cost is NATS's and
// the machine's, not that of a client in the benchmark's process beside
// the victim's pipeline.
func (b bareProbe) probe() func(natsURL string) (func(), error) {
	return func(natsURL string) (func(), error) {
		spec, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		cmd, in, out, err := startSelf(nil, "-child-bare", string(spec), "-child-sink", natsURL)
		if err != nil {
			return nil, fmt.Errorf("start the bare consumers' process: %w", err)
		}
		stop := func() { _ = in.Close(); _ = cmd.Wait() }
		if !out.Scan() || out.Text() != "started" {
			_ = cmd.Process.Kill()
			stop()
			return nil, fmt.Errorf("the bare consumers' process did not start: %q, %w", out.Text(), out.Err())
		}
		return stop, nil
	}
}

// childBare is the process of a bareProbe (spec, JSON) on natsURL: it
// says "started" once its consumers and publisher run, and stops them
// when its stdin closes.
func childBare(spec, natsURL string) error {
	var b bareProbe
	if err := json.Unmarshal([]byte(spec), &b); err != nil {
		return fmt.Errorf("bare probe %q: %w", spec, err)
	}
	stop, err := bareConsumers(natsURL, b)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Println("started")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// bareConsumers is a probe of what JetStream consumers cost the others,
// without kfn's publisher or dispatcher: on natsURL it makes b's
// consumers, acknowledges every event they are handed, and publishes
// bareEventsPerSecond events a second to JetStream spread over their
// subjects, until the function it returns is called.
func bareConsumers(natsURL string, b bareProbe) (func(), error) {
	consumers := b.Consumers
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
	streamName, prefix := stream.DefaultEventStream, v1alpha2.SubjectPrefix+".bare"
	if b.OwnStream {
		streamName, prefix = bareOwnStream, bareOwnStream
		if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: streamName, Subjects: []string{prefix + ".>"},
			Retention: jetstream.InterestPolicy, Storage: jetstream.FileStorage}); err != nil {
			nc.Close()
			return nil, fmt.Errorf("bare consumers: create their stream: %w", err)
		}
	}
	for i := range subjects {
		subjects[i] = fmt.Sprintf("%s.t%d.v1", prefix, i)
	}
	used := subjects[:consumers]
	configs := make([]jetstream.ConsumerConfig, 0, consumers)
	if b.OneOfAll {
		used = subjects
		configs = append(configs, jetstream.ConsumerConfig{Durable: "bare-all", FilterSubjects: subjects, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: bareEventsPerSecond})
	} else if b.OneSubject {
		used = subjects[:1]
		for i := range consumers {
			configs = append(configs, jetstream.ConsumerConfig{Durable: fmt.Sprintf("bare-%d", i), FilterSubject: used[0], AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: bareEventsPerSecond})
		}
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
		c, err := js.CreateOrUpdateConsumer(ctx, streamName, cfg)
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
	if b.Burst > 0 && b.Rate > 0 {
		go func() {
			defer wg.Done()
			bursts(ctx, js, used[0], b.Burst, b.Rate)
		}()
		return func() { closeAll(); wg.Wait() }, nil
	}
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

// bursts publishes burst events on subject at once (asynchronously, then
// waiting for their acknowledgements), rate a second on average, until ctx
// ends.
func bursts(ctx context.Context, js jetstream.JetStream, subject string, burst, rate int) {
	tick := time.NewTicker(time.Duration(burst) * time.Second / time.Duration(rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for range burst {
			_, _ = js.PublishAsync(subject, []byte(`{}`))
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			return
		}
	}
}
