package sharedrates_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/sharedrates"
	"github.com/kfn-dev/kfn/test/natstest"
)

// newRates are buckets of 10 events and 1,000 bytes that do not refill
// within a test.
func newRates() *admission.Rates {
	r := admission.NewRates(0.001, 10, 0.001, 10)
	r.LimitBytes(0.001, 1000, 0.001, 1000)
	return r
}

// replica is one event bridge replica's rates and their sharer.
type replica struct {
	rates  *admission.Rates
	sharer *sharedrates.Sharer
}

// startReplica shares new rates over nc until the test ends.
func startReplica(t *testing.T, nc *nats.Conn, opts ...sharedrates.Option) replica {
	t.Helper()
	r := replica{rates: newRates()}
	var err error
	r.sharer, err = sharedrates.New(nc, r.rates, append([]sharedrates.Option{sharedrates.WithInterval(10 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.sharer.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return r
}

func (r replica) count(result string) float64 {
	return testutil.ToFloat64(r.sharer.Reports().WithLabelValues(result))
}

// awaitReports waits until r counted n reports of the result.
func (r replica) awaitReports(t *testing.T, result string, n float64) {
	t.Helper()
	require.Eventually(t, func() bool { return r.count(result) >= n }, 5*time.Second, 5*time.Millisecond,
		"%v reports %s", n, result)
}

// TestReplicasHoldANamespaceToOneRate: what a namespace took on one
// replica is taken from the other's buckets (events and bytes), both ways,
// so that two replicas store its rate, not twice it; other namespaces keep
// theirs.
func TestReplicasHoldANamespaceToOneRate(t *testing.T) {
	ns := natstest.Start(t)
	a, b := startReplica(t, ns.Connect()), startReplica(t, ns.Connect())

	require.NoError(t, a.rates.Take("team-a", 8))
	require.NoError(t, a.rates.TakeBytes("team-a", 900))
	b.awaitReports(t, sharedrates.ResultApplied, 1)
	require.ErrorIs(t, b.rates.Take("team-a", 3), admission.ErrTooManyEvents, "8 of team-a's 10 were taken on a")
	require.ErrorIs(t, b.rates.TakeBytes("team-a", 101), admission.ErrTooManyEvents, "900 of its 1,000 bytes too")
	require.NoError(t, b.rates.Take("team-a", 2))
	require.NoError(t, b.rates.Take("team-b", 10), "another namespace keeps its own")

	a.awaitReports(t, sharedrates.ResultApplied, 1)
	require.ErrorIs(t, a.rates.Take("team-a", 1), admission.ErrTooManyEvents, "b's 2 are a's too")
	require.ErrorIs(t, a.rates.Take("team-b", 1), admission.ErrTooManyEvents, "b's 10 of team-b are a's too")
	require.NoError(t, a.rates.TakeBytes("team-a", 100), "what is left of the bytes")
	assert.Zero(t, a.count(sharedrates.ResultDropped)+b.count(sharedrates.ResultDropped))
}

// TestAReplicaDoesNotDebitItsOwnReports: a replica hears its own reports
// back on the subject and skips them (else it would take each event
// twice).
func TestAReplicaDoesNotDebitItsOwnReports(t *testing.T) {
	ns := natstest.Start(t)
	a := startReplica(t, ns.Connect())
	require.NoError(t, a.rates.Take("team-a", 5))
	a.awaitReports(t, sharedrates.ResultOwn, 1)
	require.NoError(t, a.rates.Take("team-a", 5), "the other 5 are still a's")
	assert.Zero(t, a.count(sharedrates.ResultApplied))
}

// TestReportsThatNoReplicaSendsAreDropped: whatever else arrives on the
// subject (not JSON, no replica, counts no replica takes, names that are
// no namespace's, too many namespaces) is dropped and counted, and takes
// nothing.
func TestReportsThatNoReplicaSendsAreDropped(t *testing.T) {
	ns := natstest.Start(t)
	a := startReplica(t, ns.Connect())
	many := make([]admission.Spent, sharedrates.MaxSpentPerReport+1)
	for i := range many {
		many[i] = admission.Spent{Namespace: fmt.Sprintf("ns-%d", i), Events: 1}
	}
	bad := []any{
		"not json",
		sharedrates.Report{Spent: []admission.Spent{{Namespace: "team-a", Events: 10}}},
		sharedrates.Report{Replica: strings.Repeat("r", 65), Spent: []admission.Spent{{Namespace: "team-a", Events: 10}}},
		sharedrates.Report{Replica: "x", Spent: []admission.Spent{{Namespace: "team-a", Events: -1}}},
		sharedrates.Report{Replica: "x", Spent: []admission.Spent{{Namespace: "team-a", Bytes: 1 << 50}}},
		sharedrates.Report{Replica: "x", Spent: []admission.Spent{{Namespace: "Team_A", Events: 10}}},
		sharedrates.Report{Replica: "x", Spent: append(many, admission.Spent{Namespace: "team-a", Events: 10})},
	}
	pub := ns.Connect()
	for _, m := range bad {
		data, ok := m.(string)
		if !ok {
			raw, err := json.Marshal(m)
			require.NoError(t, err)
			data = string(raw)
		}
		require.NoError(t, pub.Publish(sharedrates.DefaultSubject, []byte(data)))
	}
	a.awaitReports(t, sharedrates.ResultDropped, float64(len(bad)))
	require.NoError(t, a.rates.Take("team-a", 10), "nothing was taken")
	require.NoError(t, a.rates.TakeBytes("team-a", 1000))
	assert.Zero(t, a.count(sharedrates.ResultApplied))
}

// TestRunReportsWhatIsLeftWhenItEnds: a replica that stops tells what it
// took since its last report, split into reports of at most
// MaxSpentPerReport namespaces, on the subject it was given.
func TestRunReportsWhatIsLeftWhenItEnds(t *testing.T) {
	ns := natstest.Start(t)
	nc := ns.Connect()
	got := make(chan sharedrates.Report, 10)
	sub, err := nc.Subscribe("test.spent", func(m *nats.Msg) {
		r, err := sharedrates.Decode(m.Data)
		if assert.NoError(t, err) {
			got <- r
		}
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	defer func() { _ = sub.Unsubscribe() }()

	rates := newRates()
	s, err := sharedrates.New(ns.Connect(), rates, sharedrates.WithSubject("test.spent"), sharedrates.WithInterval(time.Hour))
	require.NoError(t, err)
	for i := range sharedrates.MaxSpentPerReport + 1 {
		require.NoError(t, rates.Take(fmt.Sprintf("ns-%d", i), 1))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, s.Run(ctx))
	var namespaces int
	for range 2 {
		select {
		case r := <-got:
			namespaces += len(r.Spent)
		case <-time.After(5 * time.Second):
			t.Fatal("no report")
		}
	}
	assert.Equal(t, sharedrates.MaxSpentPerReport+1, namespaces)
	assert.Equal(t, 2.0, testutil.ToFloat64(s.Reports().WithLabelValues(sharedrates.ResultSent)))
}

func TestOptionsRefuseWhatCannotWork(t *testing.T) {
	nc := &nats.Conn{} // never used: every case is refused before subscribing
	_, err := sharedrates.New(nil, newRates())
	require.ErrorIs(t, err, sharedrates.ErrInvalidOption)
	_, err = sharedrates.New(nc, nil)
	require.ErrorIs(t, err, sharedrates.ErrInvalidOption)
	reg := prometheus.NewRegistry()
	_, err = sharedrates.New(natstest.Start(t).Connect(), newRates(), sharedrates.WithMetrics(reg))
	require.NoError(t, err)
	for name, opt := range map[string]sharedrates.Option{
		"empty subject":     sharedrates.WithSubject(""),
		"no interval":       sharedrates.WithInterval(0),
		"nil logger":        sharedrates.WithLogger(nil),
		"nil option":        nil,
		"metric registered": sharedrates.WithMetrics(reg),
	} {
		_, err := sharedrates.New(nc, newRates(), opt)
		require.Error(t, err, name)
		if name != "metric registered" {
			require.ErrorIs(t, err, sharedrates.ErrInvalidOption, name)
		}
	}
}

// TestDecodeHoldsReportsToWhatAReplicaSends: a replica's name of 1 to 64
// bytes, at most MaxSpentPerReport namespaces, names that are a
// namespace's (or "" for the publishers without one), counts from 0 to
// 2^30 events and 2^40 bytes.
func TestDecodeHoldsReportsToWhatAReplicaSends(t *testing.T) {
	ok := func(spent ...admission.Spent) string {
		raw, err := json.Marshal(sharedrates.Report{Replica: "r", Spent: spent})
		require.NoError(t, err)
		return string(raw)
	}
	for data, valid := range map[string]bool{
		ok(admission.Spent{Namespace: "team-a", Events: 1 << 30, Bytes: 1 << 40}): true,
		ok(admission.Spent{Namespace: "", Events: 0, Bytes: 0}):                   true,
		ok(admission.Spent{Namespace: "team-a", Events: 1<<30 + 1}):               false,
		ok(admission.Spent{Namespace: "team-a", Bytes: 1<<40 + 1}):                false,
		ok(admission.Spent{Namespace: "team-a", Bytes: -1}):                       false,
		ok(admission.Spent{Namespace: strings.Repeat("a", 64)}):                   false,
		`{"replica":"` + strings.Repeat("r", 64) + `","spent":[]}`:                true,
		`{"replica":"` + strings.Repeat("r", 65) + `","spent":[]}`:                false,
		`{"replica":"","spent":[]}`:                                               false,
		`{"spent":[]}`:                                                            false,
		`[]`:                                                                      false,
	} {
		_, err := sharedrates.Decode([]byte(data))
		if valid {
			assert.NoError(t, err, "%.100s", data)
		} else {
			assert.Error(t, err, "%.100s", data)
		}
	}
	many := make([]admission.Spent, sharedrates.MaxSpentPerReport)
	for i := range many {
		many[i] = admission.Spent{Namespace: fmt.Sprintf("ns-%d", i)}
	}
	_, err := sharedrates.Decode([]byte(ok(many...)))
	require.NoError(t, err, "MaxSpentPerReport namespaces")
	_, err = sharedrates.Decode([]byte(ok(append(many, admission.Spent{Namespace: "one-more"})...)))
	require.Error(t, err, "one more")
}
