package admission_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/admission"
)

func TestParseReservation(t *testing.T) {
	r, err := admission.ParseReservation("bank=team-a, team-b")
	require.NoError(t, err)
	assert.Equal(t, admission.Reservation{Source: "bank", Namespaces: []string{"team-a", "team-b"}}, r)
	r, err = admission.ParseReservation("shop:order.refund=team-b")
	require.NoError(t, err)
	assert.Equal(t, admission.Reservation{Source: "shop", TypePrefix: "order.refund", Namespaces: []string{"team-b"}}, r)
	for _, bad := range []string{"", "bank", "bank=", "=team-a", "bank=Team_A", "bank=,"} {
		_, err := admission.ParseReservation(bad)
		assert.ErrorIs(t, err, admission.ErrInvalidPolicy, "%q", bad)
	}
	p := admission.Policy{Reserved: []admission.Reservation{{Source: "bank"}}}
	assert.ErrorIs(t, p.Validate(), admission.ErrInvalidPolicy, "a reservation without namespaces")
}
