package eventpath_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/local/broker"
)

// pipeline is kfn's event path on a real embedded NATS: the publisher
// storing through TraceRoots, the dispatcher delivering through the
// Recorder's Transport and telling it every step, and sinks that answer as
// the test decides. The sinks stand in for function processes so that a
// test can make an attempt fail on demand; the runtime hosts' behaviour
// they copy (an emitted event carries the incoming traceparent on) is
// tested with the real hosts in local/dev and e2e/kfndev.
type pipeline struct {
	t       *testing.T
	js      jetstream.JetStream
	streams stream.Config
	rec     *eventpath.Recorder
	pub     *httptest.Server
	d       *dispatcher.Dispatcher
	dl      *deadletter.Admin

	mu    sync.Mutex
	sinks map[string]*sink // by function name
	hosts map[string]string
}

// sink is a function stand-in: answer decides each response, and emit,
// when set, is published with the request's traceparent before answering.
type sink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []http.Header
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

func newPipeline(t *testing.T, maxEvents int) *pipeline {
	t.Helper()
	b, err := broker.Start(broker.Config{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(b.Stop)
	nc, err := b.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	p := &pipeline{t: t, js: js, streams: stream.DefaultConfig(), sinks: map[string]*sink{}, hosts: map[string]string{}}
	p.streams.Storage = stream.StorageMemory
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, jsstream.Ensure(ctx, js, p.streams))

	p.rec, err = eventpath.New(maxEvents)
	require.NoError(t, err)
	stop, err := p.rec.Follow(ctx, js, p.streams.EventStream)
	require.NoError(t, err)
	t.Cleanup(stop)

	pub, err := publisher.New(eventpath.TraceRoots(eventstore.New(js, p.streams.EventStream)), publisher.Config{})
	require.NoError(t, err)
	p.pub = httptest.NewServer(pub)
	t.Cleanup(p.pub.Close)

	transport := p.rec.Transport(dispatcher.NewTransport(egress.Policy{AllowLoopback: true}), p.functionAt)
	p.d, err = dispatcher.New(js, dispatcher.Config{Streams: p.streams, Jitter: -1, PullExpiry: time.Second, Egress: egress.Policy{AllowLoopback: true}},
		dispatcher.WithObserver(p.rec), dispatcher.WithTransport(transport), dispatcher.WithResolver(dispatcher.ResolverFunc(p.resolve)))
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { _ = p.d.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	p.dl, err = deadletter.NewAdmin(js, p.streams)
	require.NoError(t, err)
	return p
}

func (p *pipeline) functionAt(host string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn, ok := p.hosts[host]
	return fn, ok
}

func (p *pipeline) resolve(s v1alpha2.Sink) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, ok := p.sinks[s.Service]
	if !ok {
		return "", fmt.Errorf("no sink %s", s.Service)
	}
	return k.srv.URL + s.URL.Path, nil
}

// function adds a function stand-in; answer nil answers 200.
func (p *pipeline) function(name string, answer func(n int, w http.ResponseWriter, r *http.Request)) *sink {
	k := &sink{answer: answer}
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		k.mu.Lock()
		k.got = append(k.got, r.Header.Clone())
		n := len(k.got)
		k.mu.Unlock()
		if k.answer != nil {
			k.answer(n, w, r)
		}
	}))
	p.t.Cleanup(k.srv.Close)
	u, _ := url.Parse(k.srv.URL)
	p.mu.Lock()
	p.sinks[name] = k
	p.hosts[u.Host] = "default/" + name
	p.mu.Unlock()
	return k
}

func (k *sink) requests() []http.Header {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]http.Header(nil), k.got...)
}

// subscribe serves a Subscription of name to function for typ from source
// "shop", with spec.config key-value pairs.
func (p *pipeline) subscribe(name, function, typ string, config ...string) {
	p.t.Helper()
	s := &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha2.SubscriptionSpec{
			Sink: "http://" + function + ".default.svc.cluster.local/", Source: "shop", Types: []string{typ},
			Config: map[string]v1alpha2.ConfigValue{"backoffInitial": "10ms", "backoffMax": "20ms"},
		},
	}
	for i := 0; i+1 < len(config); i += 2 {
		s.Spec.Config[config[i]] = v1alpha2.ConfigValue(config[i+1])
	}
	cc, err := jsstream.ConsumerConfig(s, stream.ConsumerSettings{AckWait: 5 * time.Second})
	require.NoError(p.t, err)
	_, err = jsstream.EnsureConsumer(context.Background(), p.js, p.streams.EventStream, cc)
	require.NoError(p.t, err)
	require.NoError(p.t, p.d.Upsert(s))
}

// publish posts a binary-mode CloudEvent from source "shop" to the
// publisher, with traceParent when not empty.
func (p *pipeline) publish(typ, id, traceParent string) {
	p.t.Helper()
	require.NoError(p.t, publishTo(p.pub.URL, typ, id, traceParent))
}

func publishTo(base, typ, id, traceParent string) error {
	req, err := http.NewRequest(http.MethodPost, base+"/publish", strings.NewReader(`{"id":"`+id+`"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Type", typ)
	req.Header.Set("Ce-Source", "shop")
	req.Header.Set("Ce-Id", id)
	if traceParent != "" {
		req.Header.Set("Traceparent", traceParent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("publish %s: %d %s", id, resp.StatusCode, body)
	}
	return nil
}

// emits answers 200 after publishing typ as the runtime hosts' emitCloudEvent
// does: with the incoming request's traceparent.
func (p *pipeline) emits(typ string) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, r *http.Request) {
		if err := publishTo(p.pub.URL, typ, typ+"-of-"+r.Header.Get("Ce-Id"), r.Header.Get("Traceparent")); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
	}
}

// replies answers 200 with a binary-mode CloudEvent of typ.
func replies(typ string) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Ce-Specversion", "1.0")
		w.Header().Set("Ce-Id", typ+"-of-"+r.Header.Get("Ce-Id"))
		w.Header().Set("Ce-Source", "shop")
		w.Header().Set("Ce-Type", typ)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}
}

const (
	wait = 15 * time.Second
	tick = 10 * time.Millisecond
)
