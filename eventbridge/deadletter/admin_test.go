package deadletter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

type env struct {
	js      jetstream.JetStream
	streams stream.Config
	admin   *deadletter.Admin
	srv     *httptest.Server
}

func newEnv(t *testing.T) *env {
	js := natstest.Start(t).JetStream()
	sc := stream.DefaultConfig()
	sc.Storage = stream.StorageMemory
	require.NoError(t, jsstream.Ensure(context.Background(), js, sc))
	a, err := deadletter.NewAdmin(js, sc)
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return &env{js: js, streams: sc, admin: a, srv: srv}
}

// bury stores a dead letter of Subscription ns/name as the dispatcher does.
func (e *env) bury(t *testing.T, ns, name, id string, seq uint64) {
	h := nats.Header{"ce-specversion": {"1.0"}, "ce-id": {id}, "ce-source": {"shop"}, "ce-type": {"order.created.v1"},
		"Content-Type": {"text/plain"}, "Nats-Msg-Id": {"x"}}
	f := deadletter.Failure{Namespace: ns, Subscription: name, Status: 500, Error: "sink answered 500\nInternal", Attempts: 3,
		Subject: "kyma.shop.order.created.v1", Sequence: seq, At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	_, err := eventstore.New(e.js, e.streams.DeadLetterStream).Put(context.Background(), eventstore.Restore(deadletter.NewMsg(h, []byte("data-"+id), f), deadletter.MsgID(f)))
	require.NoError(t, err)
}

func (e *env) consumer(t *testing.T, ns, name string) jetstream.Consumer {
	name = stream.ConsumerName(ns, name)
	c, err := e.js.CreateOrUpdateConsumer(context.Background(), e.streams.EventStream, jetstream.ConsumerConfig{
		Durable: name, AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubjects: []string{"kyma.shop.order.created.v1"},
	})
	require.NoError(t, err)
	return c
}

func (e *env) do(t *testing.T, method, path string) (int, string) {
	req, err := http.NewRequest(method, e.srv.URL+path, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestListAndGet(t *testing.T) {
	e := newEnv(t)
	e.bury(t, "default", "a", "1", 10)
	e.bury(t, "default", "b", "2", 11)
	e.bury(t, "other", "a", "3", 12)
	e.bury(t, "default", "a", "1", 10) // the same failure stored twice (a dispatcher crash) counts once

	all, err := e.admin.List(context.Background(), deadletter.Filter{})
	require.NoError(t, err)
	require.Len(t, all, 3)
	first := all[0]
	assert.Equal(t, "default", first.Namespace)
	assert.Equal(t, "a", first.Subscription)
	assert.Equal(t, 500, first.Status)
	assert.Equal(t, "sink answered 500 Internal", first.Error, "control characters cleaned")
	assert.Equal(t, 3, first.Attempts)
	assert.Equal(t, "1", first.ID)
	assert.Equal(t, "order.created.v1", first.Type)
	assert.Equal(t, []byte("data-1"), first.Data)
	assert.Equal(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), first.FailedAt)

	one, err := e.admin.List(context.Background(), deadletter.Filter{Namespace: "default", Subscription: "a"})
	require.NoError(t, err)
	require.Len(t, one, 1)
	ns, err := e.admin.List(context.Background(), deadletter.Filter{Namespace: "default"})
	require.NoError(t, err)
	assert.Len(t, ns, 2)
	page, err := e.admin.List(context.Background(), deadletter.Filter{After: all[0].Sequence, Limit: 1})
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, all[1].Sequence, page[0].Sequence)

	_, err = e.admin.List(context.Background(), deadletter.Filter{Subscription: "a"})
	require.ErrorIs(t, err, deadletter.ErrInvalidFilter)

	code, body := e.do(t, http.MethodGet, "/deadletters?namespace=default&subscription=b")
	require.Equal(t, http.StatusOK, code, body)
	var got []deadletter.Letter
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Len(t, got, 1)
	assert.Equal(t, "2", got[0].ID)

	code, prefixed := e.do(t, http.MethodGet, deadletter.PathPrefix+"/deadletters?namespace=default&subscription=b")
	require.Equal(t, http.StatusOK, code, prefixed)
	assert.JSONEq(t, body, prefixed, "the kfn command's prefix reaches the same API")

	code, body = e.do(t, http.MethodGet, fmt.Sprintf("/deadletters/%d", all[2].Sequence))
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"namespace":"other"`)

	for path, want := range map[string]int{
		"/deadletters/999":                 http.StatusNotFound,
		"/deadletters/x":                   http.StatusBadRequest,
		"/deadletters?limit=0":             http.StatusBadRequest,
		"/deadletters?limit=5000":          http.StatusBadRequest,
		"/deadletters?after=-1":            http.StatusBadRequest,
		"/deadletters?subscription=lonely": http.StatusBadRequest,
	} {
		code, body := e.do(t, http.MethodGet, path)
		assert.Equal(t, want, code, "%s: %s", path, body)
		assert.Contains(t, body, `"error"`)
	}
}

// awaitPending waits until c counts want messages pending. JetStream
// updates a consumer's pending count from a signal loop of its own, so it
// can trail a publish (a replay) that was already acknowledged.
func awaitPending(t *testing.T, c jetstream.Consumer, want uint64, msg string) {
	t.Helper()
	var got uint64
	assert.Eventually(t, func() bool {
		info, err := c.Info(context.Background())
		if err != nil {
			return false
		}
		got = info.NumPending
		return got == want
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, want, got, msg)
}

func TestReplayReachesOnlyItsSubscription(t *testing.T) {
	e := newEnv(t)
	a := e.consumer(t, "default", "a")
	b := e.consumer(t, "default", "b")
	e.bury(t, "default", "a", "1", 10)
	letters, err := e.admin.List(context.Background(), deadletter.Filter{})
	require.NoError(t, err)

	code, body := e.do(t, http.MethodPost, fmt.Sprintf("/deadletters/%d/replay", letters[0].Sequence))
	require.Equal(t, http.StatusOK, code, body)

	awaitPending(t, a, 1, "replayed to its Subscription")
	infoB, err := b.Info(context.Background())
	require.NoError(t, err)
	assert.Zero(t, infoB.NumPending, "not to another Subscription of the same type")

	msgs, err := a.Fetch(1, jetstream.FetchMaxWait(time.Second))
	require.NoError(t, err)
	m := <-msgs.Messages()
	require.NotNil(t, m)
	assert.Equal(t, "data-1", string(m.Data()))
	assert.Equal(t, "1", m.Headers().Get("ce-id"))
	assert.Empty(t, m.Headers().Get(deadletter.HeaderStatus), "failure headers stay behind")

	left, err := e.admin.List(context.Background(), deadletter.Filter{})
	require.NoError(t, err)
	assert.Empty(t, left, "replayed dead letters leave the queue")

	code, _ = e.do(t, http.MethodPost, fmt.Sprintf("/deadletters/%d/replay", letters[0].Sequence))
	assert.Equal(t, http.StatusNotFound, code)
}

func TestReplayAllAndDelete(t *testing.T) {
	e := newEnv(t)
	a := e.consumer(t, "default", "a")
	for i := range 3 {
		e.bury(t, "default", "a", fmt.Sprint(i), uint64(i+1))
	}
	e.bury(t, "default", "b", "x", 9)

	code, body := e.do(t, http.MethodPost, "/deadletters/replay")
	assert.Equal(t, http.StatusBadRequest, code, body)
	code, body = e.do(t, http.MethodPost, "/deadletters/replay?namespace=default&subscription=a")
	require.Equal(t, http.StatusOK, code, body)
	assert.JSONEq(t, `{"replayed":3}`, body)
	awaitPending(t, a, 3, "the three replayed")

	left, err := e.admin.List(context.Background(), deadletter.Filter{})
	require.NoError(t, err)
	require.Len(t, left, 1)
	code, _ = e.do(t, http.MethodDelete, fmt.Sprintf("/deadletters/%d", left[0].Sequence))
	assert.Equal(t, http.StatusNoContent, code)
	code, _ = e.do(t, http.MethodDelete, fmt.Sprintf("/deadletters/%d", left[0].Sequence))
	assert.Equal(t, http.StatusNotFound, code)
}

func TestReplayWithoutSubscriptionKeepsTheLetter(t *testing.T) {
	e := newEnv(t)
	e.bury(t, "default", "gone", "1", 10) // its Subscription was deleted since
	letters, err := e.admin.List(context.Background(), deadletter.Filter{})
	require.NoError(t, err)
	require.Len(t, letters, 1)

	code, body := e.do(t, http.MethodPost, fmt.Sprintf("/deadletters/%d/replay", letters[0].Sequence))
	assert.Equal(t, http.StatusConflict, code, body)
	assert.Contains(t, body, "default/gone")
	code, body = e.do(t, http.MethodPost, "/deadletters/replay?namespace=default&subscription=gone")
	assert.Equal(t, http.StatusConflict, code, body)
	left, err := e.admin.List(context.Background(), deadletter.Filter{})
	require.NoError(t, err)
	assert.Len(t, left, 1, "a letter that could not be replayed is kept")
}

func TestListLeavesNoConsumer(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		e.bury(t, "default", "s", fmt.Sprint(i), uint64(i+1))
	}
	for _, f := range []deadletter.Filter{{}, {Limit: 1}, {Namespace: "default", Subscription: "s", After: 1}, {Namespace: "other"}} {
		_, err := e.admin.List(context.Background(), f)
		require.NoError(t, err)
	}
	s, err := e.js.Stream(context.Background(), e.streams.DeadLetterStream)
	require.NoError(t, err)
	// An ordered consumer that nats.go made anew during a read (a reset,
	// under load) has its predecessor deleted in the background.
	require.Eventually(t, func() bool {
		info, err := s.Info(context.Background())
		return err == nil && info.State.Consumers == 0
	}, 10*time.Second, 10*time.Millisecond, "listing often (the web view) leaves no consumer behind")
}
