package admission_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/admission"
)

// TestRatesAreEachNamespacesOwn takes a namespace's burst whole: its next
// event is refused, naming it, while another namespace and the senders
// without one keep theirs; nil Rates and a rate of 0 bound nothing.
func TestRatesAreEachNamespacesOwn(t *testing.T) {
	r := admission.NewRates(0.001, 3, 0.001, 2)
	require.NoError(t, r.Take("a", 3))
	err := r.Take("a", 1)
	require.ErrorIs(t, err, admission.ErrTooManyEvents)
	assert.Contains(t, err.Error(), "namespace a may store 0.001 events a second (bursts of 3)")
	require.NoError(t, r.Take("b", 3), "another namespace's bucket is full")
	require.ErrorIs(t, r.Take("b", 1), admission.ErrTooManyEvents)

	require.NoError(t, r.Take("", 2))
	err = r.Take("", 1)
	require.ErrorIs(t, err, admission.ErrTooManyEvents)
	assert.Contains(t, err.Error(), "publishers without a namespace (together)")

	require.ErrorIs(t, r.Take("c", 4), admission.ErrTooManyEvents, "more than a burst at once")
	require.NoError(t, r.Take("c", 3), "a refused take takes nothing")

	var none *admission.Rates
	require.NoError(t, none.Take("a", 1_000_000))
	unbounded := admission.NewRates(0, 0, 0, 0)
	require.NoError(t, unbounded.Take("a", 1_000_000))
	require.NoError(t, unbounded.Take("", 1_000_000))
}
