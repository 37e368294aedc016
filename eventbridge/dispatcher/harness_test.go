package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// bridge is a dispatcher over a real JetStream, with test sinks.
type bridge struct {
	t       *testing.T
	nats    *natstest.Server
	js      jetstream.JetStream
	streams stream.Config
	store   *eventstore.Store
	d       *dispatcher.Dispatcher
	reg     *prometheus.Registry
	sinks   map[string]*sink // by Service name
	mu      sync.Mutex

	// over is set, under tmu, once the test and its cleanups are done:
	// errorf reports nothing after it.
	tmu  sync.Mutex
	over bool
}

// loopback lets the tests' deliveries reach their sinks, httptest
// servers on loopback, which the dispatcher refuses by default.
var loopback = egress.Policy{AllowLoopback: true}

type bridgeOpt func(*dispatcher.Config, *[]dispatcher.Option)

func withEndpoints(e dispatcher.Endpoints) bridgeOpt {
	return func(_ *dispatcher.Config, o *[]dispatcher.Option) { *o = append(*o, dispatcher.WithEndpoints(e)) }
}

func withOption(opt dispatcher.Option) bridgeOpt {
	return func(_ *dispatcher.Config, o *[]dispatcher.Option) { *o = append(*o, opt) }
}

func withConfig(f func(*dispatcher.Config)) bridgeOpt {
	return func(c *dispatcher.Config, _ *[]dispatcher.Option) { f(c) }
}

func newBridge(t *testing.T, opts ...bridgeOpt) *bridge {
	t.Helper()
	b := &bridge{t: t, sinks: map[string]*sink{}}
	// Registered first, so run last: after it no helper touches t.
	t.Cleanup(func() {
		b.tmu.Lock()
		defer b.tmu.Unlock()
		b.over = true
	})
	b.nats = natstest.Start(t)
	b.js = b.nats.JetStream()
	b.streams = stream.DefaultConfig()
	b.streams.Storage = stream.StorageMemory
	b.reg = prometheus.NewRegistry()
	cfg := dispatcher.Config{Streams: b.streams, Jitter: -1, RequestTimeout: 5 * time.Second, PullExpiry: time.Second, Egress: loopback}
	dopts := []dispatcher.Option{dispatcher.WithMetrics(b.reg), dispatcher.WithResolver(dispatcher.ResolverFunc(b.resolve))}
	for _, o := range opts {
		o(&cfg, &dopts)
	}
	b.streams = cfg.Streams // options may change the streams too
	require.NoError(t, jsstream.Ensure(context.Background(), b.js, b.streams))
	b.store = eventstore.ForEventStream(b.js, b.streams)
	var err error
	b.d, err = dispatcher.New(b.js, cfg, dopts...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.d.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("dispatcher did not stop within 10s")
		}
	})
	// Registered last, so run first: a condition that require.Never or
	// Eventually left running when they returned (testify does not wait
	// for it) must not report the NATS connection the cleanups above
	// close as the test's failure ("nats: connection closed", seen once
	// under load in TestBudgetGivesUpExactlyTheExcessOfAFailingSink).
	t.Cleanup(func() {
		b.tmu.Lock()
		defer b.tmu.Unlock()
		b.over = true
	})
	return b
}

func (b *bridge) resolve(s v1alpha2.Sink) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k, ok := b.sinks[s.Service]
	if !ok {
		return "", fmt.Errorf("no test sink %s", s.Service)
	}
	return k.srv.URL + s.URL.Path, nil
}

// subscribe creates the consumer and serves the Subscription.
func (b *bridge) subscribe(s *v1alpha2.Subscription) {
	b.t.Helper()
	b.subscribeAckWait(s, 2*time.Second)
}

// subscribeAckWait is subscribe with the consumer's ack wait.
func (b *bridge) subscribeAckWait(s *v1alpha2.Subscription, ackWait time.Duration) {
	b.t.Helper()
	cfg, err := jsstream.ConsumerConfig(s, stream.ConsumerSettings{AckWait: ackWait})
	require.NoError(b.t, err)
	for _, name := range b.streams.PartitionStreams() {
		_, err = jsstream.EnsureConsumer(context.Background(), b.js, name, cfg)
		require.NoError(b.t, err)
	}
	require.NoError(b.t, b.d.Upsert(s))
}

func (b *bridge) publish(source, typ, id string, data string) {
	b.t.Helper()
	require.NoError(b.t, b.publishErr(source, typ, id, data))
}

// publishErr is publish, returning the store's error.
func (b *bridge) publishErr(source, typ, id string, data string) error {
	e := event.New()
	e.SetID(id)
	e.SetSource(source)
	e.SetType(typ)
	if err := e.SetData("text/plain", data); err != nil {
		return err
	}
	_, err := put(context.Background(), b.store, &e, "", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	return err
}

// errorf fails the test without stopping it, and only while it runs. The
// helpers that read JetStream or the metrics use it instead of require:
// they run in Eventually's goroutines and in goroutines of the tests,
// where FailNow must not be called, and such a goroutine may outlive its
// test (Eventually gives up on a condition that is still running), when
// testing panics on any report and takes every other result of the
// package with it.
func (b *bridge) errorf(format string, args ...any) {
	b.tmu.Lock()
	defer b.tmu.Unlock()
	if !b.over {
		b.t.Helper()
		b.t.Errorf(format, args...)
	}
}

// waiting is the events of the Subscription's consumers, in every
// partition, pending or unacknowledged. An error fails the test without
// stopping it (errorf) and reads as none.
func (b *bridge) waiting(s *v1alpha2.Subscription) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n := 0
	for _, name := range b.streams.PartitionStreams() {
		c, err := b.js.Consumer(ctx, name, stream.ConsumerName(s.Namespace, s.Name))
		if err != nil {
			b.errorf("consumer of %s/%s in %s: %v", s.Namespace, s.Name, name, err)
			return 0
		}
		info, err := c.Info(ctx)
		if err != nil {
			b.errorf("consumer of %s/%s in %s: %v", s.Namespace, s.Name, name, err)
			return 0
		}
		n += info.NumAckPending + int(info.NumPending)
	}
	return n
}

// consumerInfo returns the consumer's info. An error fails the test
// without stopping it (errorf) and reads as an empty consumer, so a
// condition that holds for it holds for a failed test only.
func (b *bridge) consumerInfo(s *v1alpha2.Subscription) *jetstream.ConsumerInfo {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := b.js.Consumer(ctx, b.streams.EventStream, stream.ConsumerName(s.Namespace, s.Name))
	if err == nil {
		var info *jetstream.ConsumerInfo
		if info, err = c.Info(ctx); err == nil {
			return info
		}
	}
	b.errorf("consumer of %s/%s: %v", s.Namespace, s.Name, err)
	return &jetstream.ConsumerInfo{}
}

// deadLetters returns the dead letters stored so far, read by sequence:
// no consumer is made, so tests can poll it in Eventually as often as they
// like. An error fails the test without stopping it (errorf) and reads as
// no dead letters.
func (b *bridge) deadLetters() []letter {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := b.js.Stream(ctx, b.streams.DeadLetterStream)
	if err != nil {
		b.errorf("dead-letter stream: %v", err)
		return nil
	}
	info, err := s.Info(ctx)
	if err != nil {
		b.errorf("dead-letter stream info: %v", err)
		return nil
	}
	if info.State.Msgs == 0 {
		return nil
	}
	var out []letter
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		// Each read bounded on its own: 288 letters of 64 KiB took more
		// than 30 s together under the race detector beside busy loops.
		one, cancelOne := context.WithTimeout(context.Background(), 10*time.Second)
		m, err := s.GetMsg(one, seq)
		cancelOne()
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted (replayed)
		}
		if err != nil {
			b.errorf("dead letter %d: %v", seq, err)
			return nil
		}
		out = append(out, letter{m})
	}
	return out
}

// letter is one stored dead letter.
type letter struct{ raw *jetstream.RawStreamMsg }

// Headers are the dead letter's headers: the event's and the failure's.
func (l letter) Headers() nats.Header { return l.raw.Header }

// Data is the event's data.
func (l letter) Data() []byte { return l.raw.Data }

// delivery is one request a sink received.
type delivery struct {
	at     time.Time
	path   string
	header http.Header
	body   string
	// replica names the dispatcher replica that sent it (newReplica);
	// empty for the bridge's own.
	replica string
}

// sink is a test HTTP sink whose answers the test decides.
type sink struct {
	srv      *httptest.Server
	mu       sync.Mutex
	got      []delivery
	answer   func(n int, r *http.Request, w http.ResponseWriter) // n counts requests from 1
	inFlight int
	maxIn    int
}

// newSink adds a sink for Service name; answer nil means 200.
func (b *bridge) newSink(name string, answer func(n int, r *http.Request, w http.ResponseWriter)) *sink {
	k := &sink{answer: answer}
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		k.mu.Lock()
		k.got = append(k.got, delivery{at: time.Now(), path: r.URL.Path, header: r.Header.Clone(), body: string(body), replica: r.URL.Query().Get("replica")})
		n := len(k.got)
		k.inFlight++
		k.maxIn = max(k.maxIn, k.inFlight)
		k.mu.Unlock()
		defer func() {
			k.mu.Lock()
			k.inFlight--
			k.mu.Unlock()
		}()
		if k.answer != nil {
			k.answer(n, r, w)
		}
	}))
	b.t.Cleanup(k.srv.Close)
	b.mu.Lock()
	b.sinks[name] = k
	b.mu.Unlock()
	return k
}

func (k *sink) deliveries() []delivery {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]delivery(nil), k.got...)
}

func (k *sink) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.got)
}

func (k *sink) maxInFlight() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.maxIn
}

func sub(name, service string, modify ...func(*v1alpha2.Subscription)) *v1alpha2.Subscription {
	s := &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha2.SubscriptionSpec{
			Sink:   "http://" + service + ".default.svc.cluster.local/events",
			Source: "shop",
			Types:  []string{"order.created.v1"},
		},
	}
	for _, m := range modify {
		m(s)
	}
	return s
}

func config(kv ...string) func(*v1alpha2.Subscription) {
	return func(s *v1alpha2.Subscription) {
		if s.Spec.Config == nil {
			s.Spec.Config = map[string]v1alpha2.ConfigValue{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			s.Spec.Config[kv[i]] = v1alpha2.ConfigValue(kv[i+1])
		}
	}
}

// endpoints is a test Endpoints with one switch for every Service but
// those always ready.
type endpoints struct {
	mu      sync.Mutex
	ready   bool
	waking  bool
	changed chan struct{}
	always  map[string]bool
}

func newEndpoints(ready bool, alwaysReady ...string) *endpoints {
	e := &endpoints{ready: ready, changed: make(chan struct{}), always: map[string]bool{}}
	for _, s := range alwaysReady {
		e.always[s] = true
	}
	return e
}

func (e *endpoints) Ready(_, service string) (bool, <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.always[service] {
		return true, never
	}
	return e.ready, e.changed
}

// Waking reports the waking switch (dispatcher.Waking).
func (e *endpoints) Waking(_, service string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.always[service] && e.waking
}

// setWaking turns the waking switch, and tells it as a claim does.
func (e *endpoints) setWaking(waking bool) { e.change(func() { e.waking = waking }) }

// isReady reports the switch.
func (e *endpoints) isReady() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ready
}

var never = make(chan struct{})

func (e *endpoints) set(ready bool) { e.change(func() { e.ready = ready }) }

// change makes f's change and tells it to Ready's callers.
func (e *endpoints) change(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f()
	close(e.changed)
	e.changed = make(chan struct{})
}

const wait = 10 * time.Second
const tick = 5 * time.Millisecond

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

// subscribeWith creates the consumer and serves the Subscription with
// another, started, dispatcher.
func (b *bridge) subscribeWith(d *dispatcher.Dispatcher, s *v1alpha2.Subscription) {
	b.t.Helper()
	cfg, err := jsstream.ConsumerConfig(s, stream.ConsumerSettings{AckWait: 2 * time.Second})
	require.NoError(b.t, err)
	_, err = jsstream.EnsureConsumer(context.Background(), b.js, b.streams.EventStream, cfg)
	require.NoError(b.t, err)
	require.NoError(b.t, d.Upsert(s))
	ctx, cancel := contextWithCancel()
	done := make(chan struct{})
	go func() { _ = d.Start(ctx); close(done) }()
	b.t.Cleanup(func() { cancel(); <-done })
}
