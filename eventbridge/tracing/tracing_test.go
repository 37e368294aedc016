package tracing_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/propagation"

	"github.com/kfn-dev/kfn/eventbridge/tracing"
)

// HeaderCarrier reads and writes an http.Header as
// propagation.HeaderCarrier does, whatever the case of the key.
func TestHeaderCarrierIsOpenTelemetrysHeaderCarrier(t *testing.T) {
	keys := []string{"traceparent", "tracestate", "baggage", "Traceparent", "TRACESTATE", "x-other", "X-Other"}
	for _, key := range keys {
		ours, theirs := http.Header{}, http.Header{}
		tracing.HeaderCarrier(ours).Set(key, "v-"+key)
		propagation.HeaderCarrier(theirs).Set(key, "v-"+key)
		assert.Equal(t, theirs, ours, "Set(%q)", key)
	}
	h := http.Header{}
	h.Add("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.Add("Tracestate", "a=1")
	h.Add("Baggage", "k=v")
	h.Add("Baggage", "l=w")
	h.Add("X-Other", "o")
	for _, key := range keys {
		assert.Equal(t, propagation.HeaderCarrier(h).Get(key), tracing.HeaderCarrier(h).Get(key), "Get(%q)", key)
		assert.Equal(t, propagation.HeaderCarrier(h).Values(key), tracing.HeaderCarrier(h).Values(key), "Values(%q)", key)
	}
	assert.ElementsMatch(t, propagation.HeaderCarrier(h).Keys(), tracing.HeaderCarrier(h).Keys())
}

// The W3C names are found without making their canonical form anew.
func TestHeaderCarrierAllocatesNothingToRead(t *testing.T) {
	h := http.Header{}
	h.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	c := tracing.HeaderCarrier(h)
	allocs := testing.AllocsPerRun(100, func() {
		_ = c.Get("traceparent")
		_ = c.Get("tracestate")
		_ = c.Values("baggage")
	})
	assert.Zero(t, allocs)
}
