package runtimes_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/runtimes"
)

// largestEvent returns the headers of the largest event the event bridge
// stores (eventstore's bounds, every one at its limit) as the dispatcher
// delivers it, with the trace context at its bounds too.
func largestEvent(t *testing.T) http.Header {
	t.Helper()
	stored := nats.Header{
		"ce-specversion":             {"1.0"},
		"ce-id":                      {strings.Repeat("i", eventstore.MaxIDLength)},
		"ce-source":                  {"shop"},
		"ce-type":                    {"order.created.v1"},
		eventstore.HeaderContentType: {"application/json"},
	}
	size := func() int {
		n := 0
		for k, v := range stored {
			n += len(k) + len(v[0]) + 4
		}
		return n
	}
	for i := len(stored); i < eventstore.MaxAttributes; i++ {
		name := fmt.Sprintf("x%02d%s", i, strings.Repeat("n", eventstore.MaxExtensionNameLength-3))
		stored[eventstore.HeaderPrefix+name] = []string{"v"}
	}
	// The bytes left go to the last extension's value.
	last := eventstore.HeaderPrefix + fmt.Sprintf("x%02d%s", eventstore.MaxAttributes-1, strings.Repeat("n", eventstore.MaxExtensionNameLength-3))
	stored[last] = []string{"v" + strings.Repeat("w", eventstore.MaxAttributeBytes-size())}
	require.NoError(t, eventstore.CheckAttributes(stored), "the largest event is stored")
	stored[last][0] += "w"
	require.ErrorIs(t, eventstore.CheckAttributes(stored), eventstore.ErrTooLarge, "one byte more is not")
	stored[last][0] = stored[last][0][:len(stored[last][0])-1]

	stored[eventstore.HeaderTraceParent] = []string{"00-" + strings.Repeat("a", 32) + "-" + strings.Repeat("b", 16) + "-01"}
	stored[eventstore.HeaderTraceState] = []string{"k=" + strings.Repeat("s", eventstore.MaxTraceStateLength-2)}
	stored[eventstore.HeaderBaggage] = []string{"k=" + strings.Repeat("b", eventstore.MaxBaggageLength-2)}
	h := http.Header{}
	eventstore.CopyToHTTP(h, stored)
	return h
}

// TestLargestStoredEventReachesTheHandler delivers the largest event the
// event bridge stores to each host as the dispatcher does: every
// attribute arrives. Node.js's own default header limit (16 KiB) would
// answer 431 and the event would end as a dead letter.
func TestLargestStoredEventReachesTheHandler(t *testing.T) {
	t.Parallel()
	event := largestEvent(t)
	header := map[string]string{}
	for k, v := range event {
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
		for k, v := range event {
			name := strings.ToLower(k)
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
