package runtimes_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/runtimes"
)

// largestEvent returns the headers of the largest event the event bridge
// stores (eventstore's bounds, every one at its limit; the bytes left to
// the last extension's value, filled with fill) as the dispatcher
// delivers it (eventstore.CopyToWire: percent-encoded), with the trace
// context at its bounds too, and the stored attributes, which a handler
// is to read.
func largestEvent(t *testing.T, fill string) (wire http.Header, stored nats.Header) {
	t.Helper()
	stored = nats.Header{
		"ce-specversion":             {"1.0"},
		"ce-id":                      {strings.Repeat("i", eventstore.MaxIDLength)},
		"ce-source":                  {"shop"},
		"ce-type":                    {"order.created.v1"},
		eventstore.HeaderContentType: {"application/json"},
	}
	for i := len(stored); i < eventstore.MaxAttributes; i++ {
		name := fmt.Sprintf("x%02d%s", i, strings.Repeat("n", eventstore.MaxExtensionNameLength-3))
		stored[eventstore.HeaderPrefix+name] = []string{"v"}
	}
	// The most of fill the store takes in the last extension's value.
	last := eventstore.HeaderPrefix + fmt.Sprintf("x%02d%s", eventstore.MaxAttributes-1, strings.Repeat("n", eventstore.MaxExtensionNameLength-3))
	n := sort.Search(eventstore.MaxAttributeBytes+1, func(n int) bool {
		stored[last] = []string{"v" + strings.Repeat(fill, n)}
		return eventstore.CheckAttributes(stored) != nil
	}) - 1
	require.Positive(t, n)
	stored[last] = []string{"v" + strings.Repeat(fill, n)}
	require.NoError(t, eventstore.CheckAttributes(stored), "the largest event is stored")

	stored[eventstore.HeaderTraceParent] = []string{"00-" + strings.Repeat("a", 32) + "-" + strings.Repeat("b", 16) + "-01"}
	stored[eventstore.HeaderTraceState] = []string{"k=" + strings.Repeat("s", eventstore.MaxTraceStateLength-2)}
	stored[eventstore.HeaderBaggage] = []string{"k=" + strings.Repeat("b", eventstore.MaxBaggageLength-2)}
	wire = http.Header{}
	eventstore.CopyToWire(wire, stored)
	return wire, stored
}

// TestLargestStoredEventReachesTheHandler delivers the largest event the
// event bridge stores to each host as the dispatcher does: every
// attribute arrives. Node.js's own default header limit (16 KiB) would
// answer 431 and the event would end as a dead letter. So would kfn's
// hosts, for attributes of bytes that travel percent-encoded (three bytes
// each: %, space, ", anything outside printable ASCII) had the store
// bounded them as stored rather than as they travel.
func TestLargestStoredEventReachesTheHandler(t *testing.T) {
	t.Parallel()
	for _, fill := range []string{"w", "%", "é"} {
		t.Run(fmt.Sprintf("filled with %q", fill), func(t *testing.T) {
			t.Parallel()
			largestReachesTheHandler(t, fill)
		})
	}
}

func largestReachesTheHandler(t *testing.T, fill string) {
	wire, stored := largestEvent(t, fill)
	header := map[string]string{}
	for k, v := range wire {
		header[k] = v[0]
	}
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		h := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{})
		r := h.mustDo("POST", "/echo", header, `{"a":1}`)
		require.Equal(t, 200, r.status, r.body)
		var got struct {
			CE map[string]string `json:"ce"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.body), &got))
		for name, v := range stored {
			if strings.HasPrefix(name, eventstore.HeaderPrefix) {
				assert.Equal(t, v[0], got.CE[name], name)
			}
		}
	})
	for _, name := range []string{"nodejs26", "python314"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rt := lookup(t, name)
			h := startHost(t, rt, fixture(t, rt, "sample"), hostOptions{env: map[string]string{"PERSON_NAME": "Kyma"}})
			r := h.mustDo("POST", "/", header, `{"a":1}`)
			assert.Equal(t, 200, r.status, r.body)
		})
	}
}
