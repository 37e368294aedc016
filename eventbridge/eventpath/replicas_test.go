package eventpath_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/test/natstest"
)

// TestEveryReplicaHasEveryDelivery: two event bridge replicas, each
// delivering some of a namespace's events; a caller reaches one of them.
// Each tells the other its steps, so either answers the whole path; a
// report that is not a replica's (another client of the subject) changes
// nothing.
func TestEveryReplicaHasEveryDelivery(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	replica := func() (*eventpath.Namespaces, *eventpath.Replicas) {
		n, err := eventpath.NewNamespaces(10, 0)
		require.NoError(t, err)
		r, err := eventpath.NewReplicas(n, nc, "", nil)
		require.NoError(t, err)
		running := make(chan error, 1)
		go func() { running <- r.Run(ctx) }()
		t.Cleanup(func() { cancel(); require.NoError(t, <-running) })
		return n, r
	}
	na, ra := replica()
	nb, rb := replica()
	// Each replica delivers one event and tells the other.
	require.Eventually(t, func() bool {
		ra.Observe(step("team-a", "audit", 1, "order-1"))
		rb.Observe(step("team-a", "billing", 2, "order-2"))
		return len(nb.Find("team-a", "order-1", "")) == 1 && len(na.Find("team-a", "order-2", "")) == 1
	}, 5*time.Second, 50*time.Millisecond, "each replica has the other's delivery")
	assert.Equal(t, []string{"team-a/audit"}, deliveriesOf(t, nb.Find("team-a", "order-1", ""), "order-1"))
	assert.Equal(t, []string{"team-a/billing"}, deliveriesOf(t, na.Find("team-a", "order-2", ""), "order-2"))

	for _, bad := range []string{
		`not json`,
		`{"replica": "", "steps": []}`,
		`{"replica": "x", "steps": [{"namespace": "Not_A_Namespace", "subscription": "s", "event": {"id": "forged"}}]}`,
		`{"replica": "x", "steps": [{"namespace": "team-a", "subscription": "s", "event": {"id": "` + strings.Repeat("x", 9<<10) + `"}}]}`,
		`{"replica": "x", "steps": [{"namespace": "team-a", "subscription": "s", "error": "` + strings.Repeat("e", 2<<10) + `", "event": {"id": "forged"}}]}`,
	} {
		require.NoError(t, nc.Publish(eventpath.DefaultStepsSubject, []byte(bad)))
	}
	require.NoError(t, nc.Publish(eventpath.DefaultStepsSubject,
		[]byte(`{"replica": "x", "steps": [{"namespace": "team-c", "subscription": "s", "sequence": 9, "event": {"id": "told", "source": "shop"}, "outcome": "delivered", "attempt": 1}]}`)))
	require.Eventually(t, func() bool { return len(na.Find("team-c", "told", "")) == 1 }, 5*time.Second, 10*time.Millisecond,
		"a valid report after the invalid ones is recorded")
	assert.Empty(t, na.Find("team-a", "forged", ""), "invalid reports are dropped whole")
	assert.Empty(t, nb.Find("team-a", "forged", ""))
}
