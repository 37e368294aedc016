package admission_test

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/auth"
)

func stored(source, typ string, more ...string) nats.Header {
	h := nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"1"}, "ce-source": {source}, "ce-type": {typ}}
	for i := 0; i+1 < len(more); i += 2 {
		h[more[i]] = []string{more[i+1]}
	}
	return h
}

func TestAdmit(t *testing.T) {
	p := admission.Policy{MaxHops: 3, Reserved: []admission.Reservation{{Source: "bank", Namespaces: []string{"team-a"}}}}
	tests := map[string]struct {
		h          nats.Header
		route      string
		sender     string
		wantErr    error
		wantSender string
		wantHops   string
	}{
		"a sender is recorded":         {h: stored("shop", "a.b"), sender: "team-b", wantSender: "team-b"},
		"no sender, nothing recorded":  {h: stored("shop", "a.b")},
		"a sender named by the event":  {h: stored("shop", "a.b", "ce-kfnsendernamespace", "team-a"), sender: "team-b", wantErr: eventstore.ErrInvalidEvent},
		"named without a sender":       {h: stored("shop", "a.b", "ce-kfnsendernamespace", "team-a"), wantErr: eventstore.ErrInvalidEvent},
		"reserved, from its namespace": {h: stored("bank", "a.b"), sender: "team-a", wantSender: "team-a"},
		"reserved, from another":       {h: stored("bank", "a.b"), sender: "team-b", wantErr: admission.ErrReserved},
		"reserved, from nobody":        {h: stored("bank", "a.b"), wantErr: auth.ErrUnauthenticated},
		"reserved, by its route":       {h: stored("bank-eu", "a.b"), route: "bank", sender: "team-b", wantErr: admission.ErrReserved},
		"hops within the limit":        {h: stored("shop", "a.b", "ce-kfnhops", "03"), wantHops: "3"},
		"hops over the limit":          {h: stored("shop", "a.b", "ce-kfnhops", "4"), wantErr: admission.ErrHopLimit},
		"hops past any int":            {h: stored("shop", "a.b", "ce-kfnhops", "99999999999999999999"), wantErr: admission.ErrHopLimit},
		"hops that are no count":       {h: stored("shop", "a.b", "ce-kfnhops", "-1"), wantErr: eventstore.ErrInvalidEvent},
		"reserved, by its legacy type": {h: stored("x", "sap.kyma.custom.bank.account.opened.v1"), sender: "team-b", wantErr: admission.ErrReserved},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := p.Admit(tt.h, tt.route, tt.sender)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantSender, eventstore.Attribute(tt.h, eventstore.SenderExtension))
			assert.Equal(t, tt.wantHops, eventstore.Attribute(tt.h, eventstore.HopsExtension))
		})
	}
}
