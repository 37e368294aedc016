package admission_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/auth"
)

// stored is the stored form of a binary-mode event from source of type
// typ, with more headers (name, value, ...).
func stored(source, typ string, more ...string) eventstore.Event {
	h := http.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {"1"}, "Ce-Source": {source}, "Ce-Type": {typ}}
	for i := 0; i+1 < len(more); i += 2 {
		h[more[i]] = []string{more[i+1]}
	}
	e, ok := eventstore.EncodeBinary(h, nil, "", "")
	if !ok {
		panic("not a plain event")
	}
	return e
}

func TestAdmit(t *testing.T) {
	p := admission.Policy{MaxHops: 3, Reserved: []admission.Reservation{{Source: "bank", Namespaces: []string{"team-a"}}}}
	tests := map[string]struct {
		e          eventstore.Event
		route      string
		sender     string
		wantErr    error
		wantSender string
		wantHops   string
	}{
		"a sender is recorded":         {e: stored("shop", "a.b"), sender: "team-b", wantSender: "team-b"},
		"no sender, nothing recorded":  {e: stored("shop", "a.b")},
		"a sender named by the event":  {e: stored("shop", "a.b", "Ce-Kfnsendernamespace", "team-a"), sender: "team-b", wantErr: eventstore.ErrInvalidEvent},
		"named without a sender":       {e: stored("shop", "a.b", "Ce-Kfnsendernamespace", "team-a"), wantErr: eventstore.ErrInvalidEvent},
		"reserved, from its namespace": {e: stored("bank", "a.b"), sender: "team-a", wantSender: "team-a"},
		"reserved, from another":       {e: stored("bank", "a.b"), sender: "team-b", wantErr: admission.ErrReserved},
		"reserved, from nobody":        {e: stored("bank", "a.b"), wantErr: auth.ErrUnauthenticated},
		"reserved, by its route":       {e: stored("bank-eu", "a.b"), route: "bank", sender: "team-b", wantErr: admission.ErrReserved},
		"hops within the limit":        {e: stored("shop", "a.b", "Ce-Kfnhops", "03"), wantHops: "3"},
		"hops over the limit":          {e: stored("shop", "a.b", "Ce-Kfnhops", "4"), wantErr: admission.ErrHopLimit},
		"hops past any int":            {e: stored("shop", "a.b", "Ce-Kfnhops", "99999999999999999999"), wantErr: admission.ErrHopLimit},
		"hops that are no count":       {e: stored("shop", "a.b", "Ce-Kfnhops", "-1"), wantErr: eventstore.ErrInvalidEvent},
		"reserved, by its legacy type": {e: stored("x", "sap.kyma.custom.bank.account.opened.v1"), sender: "team-b", wantErr: admission.ErrReserved},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tt.e.SetRoute(tt.route)
			err := p.Admit(&tt.e, tt.sender)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantSender, tt.e.Attribute(eventstore.SenderExtension))
			assert.Equal(t, tt.wantHops, tt.e.Attribute(eventstore.HopsExtension))
		})
	}
}
