package dispatcher

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/pull"
	"github.com/kfn-dev/kfn/eventbridge/tracing/otlp"
	"github.com/kfn-dev/kfn/internal/egress"
)

// BenchmarkDeliver measures what one delivery costs the dispatcher's
// process, sink included, beside the bare delivery of the benchmark's
// anchor (bench/eventbridge): "kfn" hands each event to a worker as the
// puller does (deliver, then handle: matching, the heartbeat, the
// request with its timeout, the answer, the ack) and "bare" POSTs the
// event's data with its ce-* headers from a long-lived goroutine and reads
// the answer. Both deliver 64 events at a time to the same keep-alive
// sink. JetStream is left out: the events are settled on a message with
// no connection (its ack fails at once), so what is measured is the
// dispatcher's own work and HTTP's.
//
//	go test ./eventbridge/dispatcher -run '^$' -bench Deliver -benchmem
func BenchmarkDeliver(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	data := bytes.Repeat([]byte("x"), 1024)
	header := nats.Header{
		"ce-specversion": {"1.0"}, "ce-id": {"8e1f3c5a-5c1b-4ad2-9a52-1f2f1c0e6b9d"}, "ce-source": {"bench"},
		"ce-type": {"order.created.v1"}, "Content-Type": {"application/json"},
		"traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	const inFlight = 64

	kfn := func(b *testing.B, header nats.Header, opts ...Option) {
		d, err := New(benchJetStream{}, Config{Streams: stream.DefaultConfig(), Egress: egress.Policy{AllowLoopback: true}},
			append(opts, WithResolver(ResolverFunc(func(v1alpha2.Sink) (string, error) { return sink.URL, nil })))...)
		if err != nil {
			b.Fatal(err)
		}
		sub := &v1alpha2.Subscription{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bench"},
			Spec:       v1alpha2.SubscriptionSpec{Sink: "http://sink.default.svc.cluster.local/", Source: "bench", Types: []string{"order.created.v1"}},
		}
		w, err := d.sched.Unpulled(sub)
		if err != nil {
			b.Fatal(err)
		}
		slots := make(chan struct{}, inFlight)
		free := func() { <-slots }
		b.ReportAllocs()
		defer reportCPU(b)()
		for i := 0; i < b.N; i++ {
			slots <- struct{}{}
			m := pull.NewMsg(&nats.Msg{Subject: "kyma.bench.order.created.v1", Header: header, Data: data},
				&jetstream.MsgMetadata{NumDelivered: 1, Timestamp: time.Now()})
			// As deliver, and frees the slot once the event is settled.
			w.Deliver(m, free)
		}
		w.Wait()
	}
	b.Run("kfn", func(b *testing.B) { kfn(b, header) })
	// As "kfn", with the metrics and traces of an installation that has
	// them: a registry, and every span sampled, batched and exported (to
	// an exporter that drops them).
	observed := func(b *testing.B, header nats.Header) {
		tp, err := otlp.NewProvider(context.Background(), "bench", sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()))
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = tp.Shutdown(context.Background()) }()
		kfn(b, header, WithMetrics(prometheus.NewRegistry()), WithTracerProvider(tp))
	}
	b.Run("kfn+obs", func(b *testing.B) { observed(b, header) })
	// As "kfn+obs", the event's trace not sampled (as 9 in 10 with
	// bench/eventbridge -sample 0.1): no span is started (the provider's
	// sampler is parent-based, OpenTelemetry's default).
	unsampled := maps.Clone(header)
	unsampled["traceparent"] = []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}
	b.Run("kfn+obs-unsampled", func(b *testing.B) { observed(b, unsampled) })

	b.Run("bare", func(b *testing.B) {
		client := &http.Client{Transport: NewTransport(egress.Policy{AllowLoopback: true})}
		work := make(chan []byte, inFlight)
		var wg sync.WaitGroup
		for range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for body := range work {
					req, _ := http.NewRequest(http.MethodPost, sink.URL, bytes.NewReader(body))
					for k, v := range header {
						if strings.HasPrefix(k, "ce-") {
							req.Header[k] = v
						}
					}
					req.Header["Content-Type"] = header["Content-Type"]
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
		b.ReportAllocs()
		defer reportCPU(b)()
		for i := 0; i < b.N; i++ {
			work <- data
		}
		close(work)
		wg.Wait()
	})
}

// reportCPU resets b's timer and returns a function that reports the
// process's CPU time (user and system, every goroutine's) per operation
// since: on a shared machine a steadier measure than the elapsed time.
func reportCPU(b *testing.B) (stop func()) {
	b.ResetTimer()
	start := cpuTime()
	return func() {
		b.StopTimer()
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchJetStream is a JetStream that BenchmarkDeliver's dispatcher never
// calls: a delivered event needs none of it.
type benchJetStream struct{ jetstream.JetStream }
