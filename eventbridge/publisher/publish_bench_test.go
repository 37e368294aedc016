package publisher_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/tracing/otlp"
)

// BenchmarkPublish measures what the publisher does for one binary-mode
// CloudEvent of 1 KiB, from the request to the message handed to
// JetStream, beside what the bare CloudEvents pipeline of
// bench/eventbridge does ("bare": read the body, copy the ce-* headers,
// publish with source and id as message id). JetStream is left out: the
// message goes to a JetStream that answers at once, so what is measured
// is the publisher's own work (the HTTP server's too is left out: the
// request is served in process).
//
//	go test ./eventbridge/publisher -run '^$' -bench Publish -benchmem
func BenchmarkPublish(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 1024)
	// One request, its body and id renewed for every event, and one
	// writer, so that only the handler is measured.
	request := func(url string) (*http.Request, func(i int)) {
		r := httptest.NewRequest(http.MethodPost, url, nil)
		r.Header.Set("Ce-Specversion", "1.0")
		r.Header.Set("Ce-Source", "bench")
		r.Header.Set("Ce-Type", "order.created.v1")
		r.Header.Set("Content-Type", "application/octet-stream")
		r.ContentLength = int64(len(data))
		body := bytes.NewReader(data)
		return r, func(i int) {
			body.Reset(data)
			r.Body = io.NopCloser(body)
			r.Header["Ce-Id"] = []string{strconv.Itoa(i)}
			// As a new request: the publisher sets the traceparent of a
			// new unsampled trace it stores on the request.
			delete(r.Header, "Traceparent")
		}
	}
	serve := func(b *testing.B, h http.Handler, url string) {
		r, next := request(url)
		w := &writer{header: http.Header{}}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			next(i)
			clear(w.header)
			h.ServeHTTP(w, r)
			if w.code != http.StatusNoContent {
				b.Fatalf("answered %d", w.code)
			}
		}
	}

	b.Run("kfn", func(b *testing.B) {
		js := &answeringJetStream{}
		p, err := publisher.New(eventstore.New(js, stream.DefaultEventStream), publisher.Config{})
		if err != nil {
			b.Fatal(err)
		}
		serve(b, p, "/publish")
	})

	// As "kfn", with the metrics and traces of an installation that has
	// them: a registry, and every span sampled, batched and exported (to
	// an exporter that drops them). The provider is an installation's
	// (otlp.NewProvider), its sampler named by OTEL_TRACES_SAMPLER.
	observed := func(b *testing.B, sampler, arg string) {
		b.Setenv("OTEL_TRACES_SAMPLER", sampler)
		b.Setenv("OTEL_TRACES_SAMPLER_ARG", arg)
		js := &answeringJetStream{}
		tp, err := otlp.NewProvider(context.Background(), "bench", sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()))
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = tp.Shutdown(context.Background()) }()
		p, err := publisher.New(eventstore.New(js, stream.DefaultEventStream), publisher.Config{},
			publisher.WithMetrics(prometheus.NewRegistry()), publisher.WithTracerProvider(tp))
		if err != nil {
			b.Fatal(err)
		}
		serve(b, p, "/publish")
	}
	b.Run("kfn+obs", func(b *testing.B) { observed(b, "parentbased_always_on", "") })
	// As "kfn+obs" with 1 trace in 10 sampled, as bench/eventbridge -sample 0.1.
	b.Run("kfn+obs-sampled-0.1", func(b *testing.B) { observed(b, "parentbased_traceidratio", "0.1") })

	b.Run("bare", func(b *testing.B) {
		js := &answeringJetStream{}
		bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			m := &nats.Msg{Subject: "bare.0", Data: body, Header: nats.Header{}}
			for k, v := range r.Header {
				if strings.HasPrefix(k, "Ce-") || k == "Content-Type" {
					m.Header[strings.ToLower(k)] = v
				}
			}
			if _, err := js.PublishMsg(r.Context(), m, jetstream.WithMsgID(r.Header.Get("Ce-Source")+r.Header.Get("Ce-Id"))); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
		serve(b, bare, "/")
	})
}

// answeringJetStream takes every message as stored at once, applying the
// publish options as nats.go's JetStream does (they set the message id
// header).
type answeringJetStream struct {
	jetstream.JetStream
	seq uint64
}

func (js *answeringJetStream) PublishMsg(_ context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if len(opts) > 0 && m.Header == nil {
		m.Header = nats.Header{}
	}
	js.seq++
	return &jetstream.PubAck{Stream: stream.DefaultEventStream, Sequence: js.seq}, nil
}

// writer is a ResponseWriter that keeps the status.
type writer struct {
	header http.Header
	code   int
}

func (w *writer) Header() http.Header         { return w.header }
func (w *writer) Write(b []byte) (int, error) { return len(b), nil }
func (w *writer) WriteHeader(code int)        { w.code = code }
