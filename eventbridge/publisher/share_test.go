package publisher_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/test/metrictest"
)

// TestANamespaceHoldingThePublisherGetsNoMore: a namespace whose
// publishes take every request the publisher works on at once (here four
// whose bodies never end), while another namespace has one in progress
// too, is answered 429 with Retry-After for its next, while the other
// namespace, and publishers without one, still publish: each has its
// share of the publisher's work under contention. Once its requests end,
// its publishes are stored again.
func TestANamespaceHoldingThePublisherGetsNoMore(t *testing.T) {
	const maxPublishing = 4
	e := newEnv(t, publisher.Config{MaxPublishing: maxPublishing}, nil, publisher.WithSenders(tokens{"a": "team-a", "b": "team-b"}))
	send := func(token, id string) (int, string, http.Header) {
		t.Helper()
		h := binary(id, "order.created.v1")
		if token != "" {
			h["Authorization"] = "Bearer " + token
		}
		return e.post(t, "/publish", h, "{}")
	}
	type answer struct {
		code int
		err  error
	}
	var bodies []*io.PipeWriter
	t.Cleanup(func() { // before the server closes, which waits for its requests
		for _, w := range bodies {
			w.CloseWithError(io.ErrUnexpectedEOF)
		}
	})
	slow := append(slices.Repeat([]string{"a"}, maxPublishing), "b")
	answers := make(chan answer, len(slow))
	for i, token := range slow {
		r, w := io.Pipe()
		bodies = append(bodies, w)
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/publish", r)
		require.NoError(t, err)
		for k, v := range binary(fmt.Sprint("slow-", i), "order.created.v1") {
			req.Header.Set(k, v)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				answers <- answer{code: resp.StatusCode}
				return
			}
			answers <- answer{err: err}
		}()
		_, err = w.Write([]byte("{")) // the request is read, its body never ends
		require.NoError(t, err)
		// Each is counted before the next is sent: under load a request
		// may reach the publisher after one sent later, and team-b's
		// before team-a's last would leave that one over team-a's share.
		require.Eventually(t, func() bool {
			return metrictest.Gauge(t, e.reg, "kfn_eventbridge_publish_in_progress") == float64(i+1)
		}, 10*time.Second, 5*time.Millisecond, "slow request %d in progress", i)
	}
	code, body, header := send("a", "more")
	assert.Equal(t, http.StatusTooManyRequests, code, "team-a's publish past its share: %s", body)
	assert.Contains(t, body, "namespace team-a")
	assert.Equal(t, "1", header.Get("Retry-After"))

	code, body, _ = send("b", "other")
	assert.Equal(t, http.StatusNoContent, code, "another namespace: %s", body)
	code, body, _ = send("", "anonymous")
	assert.Equal(t, http.StatusNoContent, code, "publishers without a namespace: %s", body)

	for _, w := range bodies {
		_, err := w.Write([]byte("}"))
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	for range slow {
		a := <-answers
		require.NoError(t, a.err)
		assert.Equal(t, http.StatusNoContent, a.code)
	}
	code, body, _ = send("a", "again")
	assert.Equal(t, http.StatusNoContent, code, "team-a once its requests ended: %s", body)
	e.stored(t, len(slow)+3)
}
