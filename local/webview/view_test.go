package webview_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/local/broker"
	"github.com/kfn-dev/kfn/local/devstatus"
	"github.com/kfn-dev/kfn/local/webview"
)

func TestClassify(t *testing.T) {
	tests := map[string]struct {
		f    devstatus.Function
		want webview.FunctionState
	}{
		"all ready":                 {devstatus.Function{Replicas: 2, Ready: 2}, webview.Running},
		"starting":                  {devstatus.Function{Replicas: 2, Ready: 1}, webview.Scaling},
		"stopping":                  {devstatus.Function{Replicas: 1, Ready: 2}, webview.Scaling},
		"autoscaled at zero":        {devstatus.Function{Autoscaled: true}, webview.ScaledToZero},
		"replicas 0":                {devstatus.Function{}, webview.Stopped},
		"invalid spec":              {devstatus.Function{Error: "ConfigurationReady: InvalidFunctionSpec: ..."}, webview.NotReady},
		"invalid, old one running":  {devstatus.Function{Replicas: 1, Ready: 1, Error: "ConfigurationReady: ..."}, webview.NotReady},
		"last replica draining":     {devstatus.Function{Autoscaled: true, Ready: 1}, webview.Scaling},
		"failed to start, retrying": {devstatus.Function{Replicas: 1, Error: "start: exit status 1"}, webview.NotReady},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, webview.Classify(tc.f))
		})
	}
}

// fixture is a View over a real JetStream (its dead letters), a real
// Recorder, and a platform the test sets.
type fixture struct {
	view    *webview.View
	srv     *httptest.Server
	js      jetstream.JetStream
	nc      *nats.Conn // the view's connection to NATS
	streams stream.Config
	reads   atomic.Int64

	mu     sync.Mutex
	status devstatus.Status
}

func newFixture(t *testing.T, o webview.Config) *fixture {
	t.Helper()
	b, err := broker.Start(broker.Config{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(b.Stop)
	nc, err := b.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	f := &fixture{streams: stream.DefaultConfig(), nc: nc}
	f.streams.Storage = stream.StorageMemory
	f.js, err = jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, jsstream.Ensure(context.Background(), f.js, f.streams))
	admin, err := deadletter.NewAdmin(f.js, f.streams)
	require.NoError(t, err)
	rec, err := eventpath.New(0)
	require.NoError(t, err)
	f.view, err = webview.New(sourceFunc(func() devstatus.Status {
		f.reads.Add(1)
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.status
	}), admin, webview.Recorded(rec), o)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.view.Run(ctx) }()
	f.srv = httptest.NewServer(http.StripPrefix("/ui", f.view.Handler()))
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		f.srv.Close()
	})
	return f
}

func (f *fixture) set(st devstatus.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = st
}

// events reads a page's event stream: states arrive on the channel.
func (f *fixture) events(t *testing.T) <-chan webview.State {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/ui/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	states := make(chan webview.State, 100)
	go func() {
		defer resp.Body.Close()
		defer close(states)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<22)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "state":
				var st webview.State
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &st) == nil {
					states <- st
				}
			}
		}
	}()
	return states
}

func next(t *testing.T, states <-chan webview.State) webview.State {
	t.Helper()
	select {
	case st, ok := <-states:
		require.True(t, ok, "the stream ended")
		return st
	case <-time.After(10 * time.Second):
		t.Fatal("no state within 10s")
		return webview.State{}
	}
}

func TestEventStreamSendsTheStateWhenItChangesOnly(t *testing.T) {
	f := newFixture(t, webview.Config{Interval: 20 * time.Millisecond, MinInterval: time.Millisecond})
	f.set(devstatus.Status{Addr: "127.0.0.1:8080", Functions: []devstatus.Function{{Namespace: "default", Name: "orders", Replicas: 1}}})
	states := f.events(t)

	st := next(t, states)
	assert.Equal(t, "127.0.0.1:8080", st.Addr)
	require.Len(t, st.Functions, 1)
	assert.Equal(t, webview.Scaling, st.Functions[0].State, "the view classifies the functions")
	assert.Empty(t, st.DeadLetters)
	assert.Empty(t, st.Chains)

	// Read again and again, unchanged: nothing more is sent.
	reads := f.reads.Load()
	require.Eventually(t, func() bool { return f.reads.Load() >= reads+5 }, 10*time.Second, 5*time.Millisecond)
	assert.Empty(t, states, "an unchanged state is not sent again")

	f.set(devstatus.Status{Addr: "127.0.0.1:8080", Functions: []devstatus.Function{{Namespace: "default", Name: "orders", Replicas: 1, Ready: 1}}})
	st = next(t, states)
	assert.Equal(t, webview.Running, st.Functions[0].State, "a change arrives within the interval")

	// A second page gets the last state at once.
	assert.Equal(t, webview.Running, next(t, f.events(t)).Functions[0].State)
}

func TestEventStreamShowsDeadLetters(t *testing.T) {
	f := newFixture(t, webview.Config{Interval: 20 * time.Millisecond, MinInterval: time.Millisecond, MaxDeadLetters: 2})
	states := f.events(t)
	assert.Empty(t, next(t, states).DeadLetters)
	for i, data := range []string{`{"id":"1"}`, strings.Repeat("é", 150), "\xff\xfe binary"} {
		msg := deadletter.NewMsg(nil, []byte(data), deadletter.Failure{
			Namespace: "default", Subscription: "payments", Status: 500, Error: "sink answered 500", Attempts: 2,
			Sequence: uint64(i + 1), At: time.Now(),
		})
		msg.Header.Set("ce-id", "o-"+string(rune('1'+i)))
		_, err := f.js.PublishMsg(context.Background(), msg)
		require.NoError(t, err)
	}
	// States are read here, in the test's goroutine (next stops the test
	// when the stream ends), not in a condition of Eventually.
	var st webview.State
	for end := time.Now().Add(10 * time.Second); !st.MoreDeadLetters; {
		require.True(t, time.Now().Before(end), "no state with more dead letters within 10s")
		st = next(t, states)
	}
	require.Len(t, st.DeadLetters, 2, "three dead letters, two shown")
	first := st.DeadLetters[0]
	assert.Equal(t, "o-1", first.ID)
	assert.Equal(t, "default", first.Namespace)
	assert.Equal(t, "payments", first.Subscription)
	assert.Equal(t, 500, first.Status)
	assert.Equal(t, 2, first.Attempts)
	assert.Equal(t, `{"id":"1"}`, first.Data)
	assert.Equal(t, strings.Repeat("é", 100)+"…", st.DeadLetters[1].Data, "long data is cut at a character")
}

func TestPageAndBadRequests(t *testing.T) {
	f := newFixture(t, webview.Config{})
	tests := map[string]struct {
		method, path string
		code         int
		contains     string
	}{
		"the page":           {http.MethodGet, "/ui/", http.StatusOK, `<script src="app.js"`},
		"its script":         {http.MethodGet, "/ui/app.js", http.StatusOK, "new EventSource('events')"},
		"its style":          {http.MethodGet, "/ui/style.css", http.StatusOK, ".badge"},
		"the state":          {http.MethodGet, "/ui/state", http.StatusOK, `"functions":[]`},
		"no such file":       {http.MethodGet, "/ui/nope.js", http.StatusNotFound, ""},
		"posting the state":  {http.MethodPost, "/ui/state", http.StatusMethodNotAllowed, ""},
		"posting the events": {http.MethodPost, "/ui/events", http.StatusMethodNotAllowed, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, f.srv.URL+tc.path, nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			assert.Equal(t, tc.code, resp.StatusCode)
			assert.Contains(t, string(body), tc.contains)
			assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'", "nothing from elsewhere")
		})
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	r, err := eventpath.New(0)
	require.NoError(t, err)
	rec := webview.Recorded(r)
	src := sourceFunc(func() devstatus.Status { return devstatus.Status{} })
	var letters webview.DeadLetters = &deadletter.Admin{}
	tests := map[string]struct {
		src     webview.Source
		letters webview.DeadLetters
		rec     webview.Events
		o       webview.Config
	}{
		"no source":             {nil, letters, rec, webview.Config{}},
		"no dead letters":       {src, nil, rec, webview.Config{}},
		"no recorder":           {src, letters, nil, webview.Config{}},
		"negative interval":     {src, letters, rec, webview.Config{Interval: -time.Second}},
		"negative min interval": {src, letters, rec, webview.Config{MinInterval: -1}},
		"negative chains":       {src, letters, rec, webview.Config{MaxChains: -1}},
		"too many dead letters": {src, letters, rec, webview.Config{MaxDeadLetters: deadletter.MaxLimit + 1}},
		"negative read timeout": {src, letters, rec, webview.Config{ReadTimeout: -1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := webview.New(tc.src, tc.letters, tc.rec, tc.o)
			require.ErrorIs(t, err, webview.ErrInvalidConfig)
		})
	}
}

// sourceFunc adapts a function to webview.Source.
type sourceFunc func() devstatus.Status

func (f sourceFunc) Status() devstatus.Status { return f() }

// unreachableEvents are the events of an event bridge that cannot be
// reached (a cluster's, through a port-forward that broke).
type unreachableEvents struct{}

func (unreachableEvents) Recent(context.Context, int) ([]eventpath.Chain, error) {
	return nil, errors.New("the event bridge's admin API did not answer")
}

func (unreachableEvents) Changes() <-chan struct{} { return nil }

// TestEventsThatCannotBeReadAreAProblemNotAnEmptyPage: events read from
// elsewhere (a cluster's event bridge) that fail to come show as a
// problem on the page, never as "no events", and the rest of the state is
// shown.
func TestEventsThatCannotBeReadAreAProblemNotAnEmptyPage(t *testing.T) {
	admin := &fakeLetters{}
	v, err := webview.New(sourceFunc(func() devstatus.Status {
		return devstatus.Status{Functions: []devstatus.Function{{Namespace: "default", Name: "orders", Replicas: 1, Ready: 1}}}
	}), admin, unreachableEvents{}, webview.Config{})
	require.NoError(t, err)
	st := v.State(context.Background())
	assert.Contains(t, st.Problems, "events: the event bridge's admin API did not answer")
	assert.NotNil(t, st.Chains)
	assert.Empty(t, st.Chains)
	require.Len(t, st.Functions, 1)
	assert.Equal(t, webview.Running, st.Functions[0].State)
}

// fakeLetters lists no dead letter: the dead letters are not what this
// test is about (TestWebView reads a real stream's).
type fakeLetters struct{}

func (*fakeLetters) List(context.Context, deadletter.Filter) ([]deadletter.Letter, error) {
	return nil, nil
}

// stuckLetters never answers a listing before its context ends: a fake of
// something that hangs (a cluster's admin API behind a port-forward that
// stopped; before, kfn dev's own listing when a letter went while it was
// read), which no real part does on demand.
type stuckLetters struct{}

func (stuckLetters) List(ctx context.Context, _ deadletter.Filter) ([]deadletter.Letter, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestAStateReadThatHangsIsAProblemNotAFrozenPage: the dead letters do
// not answer; the pages get the rest of the state, with the dead letters
// as a problem, and every change after it.
func TestAStateReadThatHangsIsAProblemNotAFrozenPage(t *testing.T) {
	var replicas atomic.Int32
	v, err := webview.New(sourceFunc(func() devstatus.Status {
		return devstatus.Status{Functions: []devstatus.Function{{Namespace: "default", Name: "orders", Replicas: int(replicas.Load())}}}
	}), stuckLetters{}, unreachableEvents{}, webview.Config{Interval: 10 * time.Millisecond, MinInterval: time.Millisecond, ReadTimeout: 20 * time.Millisecond})
	require.NoError(t, err)
	f := &fixture{view: v}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	f.srv = httptest.NewServer(http.StripPrefix("/ui", v.Handler()))
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		f.srv.Close()
	})
	states := f.events(t)
	st := next(t, states)
	assert.Contains(t, st.Problems, "dead letters: context deadline exceeded")
	require.Len(t, st.Functions, 1)
	for want := int32(1); want <= 3; want++ {
		replicas.Store(want)
		for st.Functions[0].Replicas != int(want) {
			st = next(t, states)
		}
	}
}

// stuckEvents never answers before its context ends (as stuckLetters).
type stuckEvents struct{}

func (stuckEvents) Recent(ctx context.Context, _ int) ([]eventpath.Chain, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (stuckEvents) Changes() <-chan struct{} { return nil }

// oneLetter lists one dead letter, unless its context has ended.
type oneLetter struct{}

func (oneLetter) List(ctx context.Context, _ deadletter.Filter) ([]deadletter.Letter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []deadletter.Letter{{Sequence: 7, Namespace: "default", Subscription: "orders"}}, nil
}

// TestEachPartOfTheStateHasItsOwnTime: the events do not answer; the dead
// letters, read after them, still get their own ReadTimeout, and are
// shown.
func TestEachPartOfTheStateHasItsOwnTime(t *testing.T) {
	v, err := webview.New(sourceFunc(func() devstatus.Status { return devstatus.Status{} }), oneLetter{}, stuckEvents{},
		webview.Config{ReadTimeout: 20 * time.Millisecond})
	require.NoError(t, err)
	st := v.State(context.Background())
	assert.Equal(t, []string{"events: context deadline exceeded"}, st.Problems)
	require.Len(t, st.DeadLetters, 1)
	assert.Equal(t, uint64(7), st.DeadLetters[0].Sequence)
}
