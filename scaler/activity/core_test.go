package activity_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/test/logtest"
	"github.com/kfn-dev/kfn/test/metrictest"
	"github.com/kfn-dev/kfn/test/scalertest"
)

// counter reads the value of the unlabelled counter name from reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			require.Len(t, f.GetMetric(), 1, name)
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestNewRefusesOptionsThatCannotWork(t *testing.T) {
	n := scalertest.StartNATS(t)
	reader := activity.NewJetStreamReader(n.JS, n.Streams)
	for name, opt := range map[string]activity.Option{
		"nil option":                  nil,
		"refresh interval under 10ms": activity.WithRefreshInterval(5 * time.Millisecond),
		"zero read timeout":           activity.WithReadTimeout(0),
		"negative activation hold":    activity.WithActivationHold(-time.Millisecond),
		"negative claim hold":         activity.WithClaimHold(-time.Millisecond),
		"claim hold over a minute":    activity.WithClaimHold(time.Minute + 1),
		"nil logger":                  activity.WithLogger(nil),
		"no subject a namespace":      activity.WithListenBounds(0, 10),
		"total under per namespace":   activity.WithListenBounds(10, 9),
		"nil metrics registerer":      activity.WithMetrics(nil),
	} {
		_, err := activity.New(reader, nil, opt)
		assert.ErrorIs(t, err, activity.ErrInvalidOption, name)
	}
	_, err := activity.New(nil, nil)
	assert.ErrorIs(t, err, activity.ErrInvalidOption, "nil reader")
	reg := prometheus.NewRegistry()
	_, err = activity.New(reader, nil, activity.WithMetrics(reg))
	require.NoError(t, err)
	_, err = activity.New(reader, nil, activity.WithMetrics(reg))
	assert.ErrorIs(t, err, activity.ErrInvalidOption, "metrics registered twice")
	_, err = activity.New(reader, nil, activity.WithRefreshInterval(10*time.Millisecond),
		activity.WithReadTimeout(time.Second), activity.WithLogger(slog.New(slog.DiscardHandler)))
	assert.NoError(t, err, "the smallest refresh interval")
	_, err = activity.New(reader, nil, activity.WithClaimHold(0), activity.WithClaimHold(time.Minute))
	assert.NoError(t, err, "claim holds of 0 (none) and of a minute")
	_, err = activity.New(reader, nil, activity.WithListenBounds(1, 1))
	assert.NoError(t, err, "the smallest listen bounds")
}

// The backlog counts the events delivered and not yet acknowledged as well
// as those waiting.
func TestBacklogCountsUnacknowledgedEvents(t *testing.T) {
	n := scalertest.StartNATS(t)
	core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), nil, activity.WithActivationHold(0))
	require.NoError(t, err)
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	sub := scalertest.Subscription(fn.Namespace, "orders", fn.Name, "shop", "order.created.v1")
	c := n.CreateConsumer(t, sub)
	require.NoError(t, core.Upsert(sub))
	n.Publish(t, "shop", "order.created.v1", "1")
	n.Publish(t, "shop", "order.created.v1", "2")
	n.AwaitPending(t, 2)
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	var fetched []jetstream.Msg
	for m := range batch.Messages() {
		fetched = append(fetched, m)
	}
	require.NoError(t, batch.Error())
	require.Len(t, fetched, 1)
	n.AwaitPending(t, 1) // one pending, one delivered and unacknowledged
	require.NoError(t, core.Refresh(context.Background()))
	st, err := core.State(fn)
	require.NoError(t, err)
	assert.Equal(t, activity.State{Backlog: 2, Active: true}, st)
}

// A refresh that cannot read the backlog is counted in
// kfn_scaler_refresh_errors_total and makes every Function with
// Subscriptions answer ErrBacklogUnavailable; one without any has no
// backlog to read and answers as before. A refresh that reads is not
// counted.
func TestRefreshThatCannotReadTheBacklog(t *testing.T) {
	n := scalertest.StartNATS(t)
	fed := types.NamespacedName{Namespace: "shop", Name: "orders"}
	called := types.NamespacedName{Namespace: "shop", Name: "api"}
	for _, tc := range []struct {
		stream string
		err    error
	}{
		{stream: "NO-SUCH-STREAM", err: activity.ErrBacklogUnavailable},
		{stream: n.Streams.EventStream},
	} {
		reg := prometheus.NewRegistry()
		core, err := activity.New(activity.NewJetStreamReader(n.JS, stream.Config{EventStream: tc.stream}), nil,
			activity.WithActivationHold(0), activity.WithMetrics(reg))
		require.NoError(t, err)
		sub := scalertest.Subscription(fed.Namespace, "orders", fed.Name, "shop", "order.created.v1")
		n.CreateConsumer(t, sub)
		require.NoError(t, core.Upsert(sub))
		core.ReportInFlight("gw-0", map[types.NamespacedName]int{called: 1}, time.Minute)

		err = core.Refresh(context.Background())
		assert.ErrorIs(t, err, tc.err, tc.stream)
		_, err = core.State(fed)
		assert.ErrorIs(t, err, tc.err, "%s: a Function with Subscriptions", tc.stream)
		st, err := core.State(called)
		require.NoError(t, err, "%s: a Function without Subscriptions", tc.stream)
		assert.Equal(t, activity.State{InFlight: 1, Active: true}, st)
		want := 0.0
		if tc.err != nil {
			want = 1
		}
		assert.Equal(t, want, counter(t, reg, "kfn_scaler_refresh_errors_total"), tc.stream)
	}
}

// Run refreshes every interval until its context ends, then returns nil;
// a refresh that fails is logged and the next one tried.
func TestRunRefreshesUntilItsContextEnds(t *testing.T) {
	n := scalertest.StartNATS(t)
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	sub := scalertest.Subscription(fn.Namespace, "orders", fn.Name, "shop", "order.created.v1")
	n.CreateConsumer(t, sub)
	run := func(t *testing.T, reader activity.BacklogReader, log *slog.Logger) (*activity.Scaler, func()) {
		core, err := activity.New(reader, nil, activity.WithActivationHold(0),
			activity.WithRefreshInterval(10*time.Millisecond), activity.WithLogger(log))
		require.NoError(t, err)
		require.NoError(t, core.Upsert(sub))
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		done := make(chan error, 1)
		go func() { done <- core.Run(ctx) }()
		return core, func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return within 10s of its context's end")
			}
		}
	}

	core, stop := run(t, activity.NewJetStreamReader(n.JS, n.Streams), slog.New(slog.DiscardHandler))
	n.Publish(t, "shop", "order.created.v1", "1")
	require.Eventually(t, func() bool {
		st, err := core.State(fn)
		return err == nil && st.Backlog == 1
	}, 10*time.Second, 10*time.Millisecond, "a refresh, without being asked, reads the event")
	n.Publish(t, "shop", "order.created.v1", "2")
	require.Eventually(t, func() bool {
		st, err := core.State(fn)
		return err == nil && st.Backlog == 2
	}, 10*time.Second, 10*time.Millisecond, "and the next")
	stop()

	var out logtest.Buffer
	core, stop = run(t, activity.NewJetStreamReader(n.JS, stream.Config{EventStream: "NO-SUCH-STREAM"}), slog.New(slog.NewJSONHandler(&out, nil)))
	require.Eventually(t, func() bool { return strings.Count(out.String(), `"msg":"refresh failed"`) >= 2 }, 10*time.Second, 10*time.Millisecond,
		"each failed refresh is logged, and Run goes on")
	_, err := core.State(fn)
	assert.ErrorIs(t, err, activity.ErrBacklogUnavailable)
	stop()
}

// A listener ends once it is not needed: when an event on one of its
// subjects activates the Function (the subscriptions on its other subjects
// end too), and when Run returns.
func TestListenersEndWhenNotNeeded(t *testing.T) {
	n := scalertest.StartNATS(t)
	conn := scalertest.Connect(t, n.Server.ClientURL())
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	sub := scalertest.Subscription(fn.Namespace, "orders", fn.Name, "shop", "order.created.v1")
	n.CreateConsumer(t, sub)
	newCore := func(sub *eventingv1alpha2.Subscription) *activity.Scaler {
		core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), activity.NewNATSListener(conn),
			activity.WithActivationHold(0), activity.WithRefreshInterval(10*time.Millisecond))
		require.NoError(t, err)
		require.NoError(t, core.Upsert(sub))
		return core
	}

	core := newCore(sub)
	_, activated, cancel := core.Watch(fn)
	defer cancel()
	require.NoError(t, core.Refresh(context.Background()))
	require.Equal(t, 3, conn.NumSubscriptions(), "the Subscription's subject, in partition 0 and in the others, and its replay subject")
	n.Publish(t, "shop", "order.created.v1", "1")
	awaitActivation(t, activated, "the event")
	require.Eventually(t, func() bool { return conn.NumSubscriptions() == 0 }, 10*time.Second, 10*time.Millisecond,
		"the listener ends with the activation")

	// Another Function, with no events: Run listens for it, then stops.
	idle := scalertest.Subscription(fn.Namespace, "shipping", "shipping", "shop", "order.shipped.v1")
	n.CreateConsumer(t, idle)
	core = newCore(idle)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	done := make(chan error, 1)
	go func() { done <- core.Run(ctx) }()
	require.Eventually(t, func() bool { return conn.NumSubscriptions() == 3 }, 10*time.Second, 10*time.Millisecond,
		"Run listens while the Function is inactive")
	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context's end")
	}
	assert.Equal(t, 0, conn.NumSubscriptions(), "Run stops its listeners when it returns")
}

// failingReader fails its reads while fail is set, and otherwise reads
// with the real reader. A fake: a real reader's failure cannot be turned
// on and off between two refreshes without the server going away, which
// would lose the consumers the test reads.
type failingReader struct {
	activity.BacklogReader
	fail atomic.Bool
}

func (r *failingReader) Backlogs(ctx context.Context) (map[string]uint64, error) {
	if r.fail.Load() {
		return nil, errors.New("no answer")
	}
	return r.BacklogReader.Backlogs(ctx)
}

// A refresh that cannot read the backlog turns no Function inactive: one
// that had events stays active through it, and the next refresh that
// reads finds it active still, with no second announcement.
func TestAFailedRefreshLeavesActiveFunctionsActive(t *testing.T) {
	n := scalertest.StartNATS(t)
	reader := &failingReader{BacklogReader: activity.NewJetStreamReader(n.JS, n.Streams)}
	reg := prometheus.NewRegistry()
	core, err := activity.New(reader, nil, activity.WithActivationHold(0), activity.WithMetrics(reg))
	require.NoError(t, err)
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	sub := scalertest.Subscription(fn.Namespace, "orders", fn.Name, "shop", "order.created.v1")
	n.CreateConsumer(t, sub)
	require.NoError(t, core.Upsert(sub))
	_, activated, cancel := core.Watch(fn)
	defer cancel()
	n.Publish(t, "shop", "order.created.v1", "1")
	n.AwaitPending(t, 1)
	require.NoError(t, core.Refresh(context.Background()))
	awaitActivation(t, activated, "the backlog")

	reader.fail.Store(true)
	require.ErrorIs(t, core.Refresh(context.Background()), activity.ErrBacklogUnavailable)
	assert.Equal(t, 1.0, metrictest.Gauge(t, reg, "kfn_scaler_functions_active"), "active through the failed refresh")
	reader.fail.Store(false)
	require.NoError(t, core.Refresh(context.Background()))
	st, err := core.State(fn)
	require.NoError(t, err)
	assert.Equal(t, activity.State{Backlog: 1, Active: true}, st)
	select {
	case <-activated:
		t.Fatal("a second announcement: the failed refresh turned the Function inactive")
	default:
	}
}

// deadlineReader records how long each read may take, by its context's
// deadline, and reads with the real reader.
type deadlineReader struct {
	activity.BacklogReader
	left atomic.Int64 // time.Duration
}

func (r *deadlineReader) Backlogs(ctx context.Context) (map[string]uint64, error) {
	if d, ok := ctx.Deadline(); ok {
		r.left.Store(int64(time.Until(d)))
	}
	return r.BacklogReader.Backlogs(ctx)
}

// A read of the backlog is bounded by the read timeout, by default the
// larger of the refresh interval and 5s.
func TestReadTimeout(t *testing.T) {
	n := scalertest.StartNATS(t)
	for _, tc := range []struct {
		opts     []activity.Option
		min, max time.Duration
	}{
		{min: 4 * time.Second, max: 5 * time.Second},
		{opts: []activity.Option{activity.WithRefreshInterval(20 * time.Second)}, min: 19 * time.Second, max: 20 * time.Second},
		{opts: []activity.Option{activity.WithReadTimeout(200 * time.Millisecond)}, max: 200 * time.Millisecond},
	} {
		reader := &deadlineReader{BacklogReader: activity.NewJetStreamReader(n.JS, n.Streams)}
		core, err := activity.New(reader, nil, tc.opts...)
		require.NoError(t, err)
		require.NoError(t, core.Refresh(context.Background()))
		left := time.Duration(reader.left.Load())
		assert.Greater(t, left, tc.min, "a read may take more than %s", tc.min)
		assert.LessOrEqual(t, left, tc.max, "a read may take at most %s", tc.max)
	}
}
