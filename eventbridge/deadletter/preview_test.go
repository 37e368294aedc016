package deadletter_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
)

// A listing with Preview gives each letter's metadata, the start of its
// data and the whole data's size, without the data; one without Preview
// gives the whole data, as before. A letter stored before previews were
// kept has no data in a preview.
func TestListPreview(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	big := strings.Repeat("0123456789", 30<<10) // 300 KiB
	require.NoError(t, e.buryData("shop", "orders", 1, []byte(big)))
	require.NoError(t, e.buryData("shop", "orders", 2, []byte("small")))
	old := deadletter.NewMsg(nats.Header{"ce-id": {"3"}}, []byte("stored by an earlier release"), deadletter.Failure{Namespace: "shop", Subscription: "orders", Sequence: 3})
	old.Header.Del(deadletter.HeaderDataPreview)
	_, err := e.js.PublishMsg(ctx, old)
	require.NoError(t, err)

	previews, err := e.admin.List(ctx, deadletter.Filter{Namespace: "shop", Preview: true})
	require.NoError(t, err)
	require.Len(t, previews, 3)
	assert.Equal(t, big[:deadletter.MaxPreview], string(previews[0].Data))
	assert.Equal(t, len(big), previews[0].DataSize)
	assert.Equal(t, "1", previews[0].ID)
	assert.Equal(t, "orders", previews[0].Subscription)
	assert.Equal(t, 500, previews[0].Status)
	assert.Equal(t, "small", string(previews[1].Data))
	assert.Equal(t, 5, previews[1].DataSize)
	assert.Empty(t, previews[2].Data, "no preview kept: the data is not read")
	assert.Equal(t, len("stored by an earlier release"), previews[2].DataSize)

	whole, err := e.admin.List(ctx, deadletter.Filter{Namespace: "shop"})
	require.NoError(t, err)
	require.Len(t, whole, 3)
	assert.Equal(t, big, string(whole[0].Data))
	assert.Equal(t, len(big), whole[0].DataSize)
	assert.Equal(t, "stored by an earlier release", string(whole[2].Data))

	// The admin API lists previews when asked (the cluster's web view).
	code, body := e.do(t, http.MethodGet, "/deadletters?namespace=shop&preview=true")
	require.Equal(t, http.StatusOK, code, body)
	var listed []deadletter.Letter
	require.NoError(t, json.Unmarshal([]byte(body), &listed))
	require.Len(t, listed, 3)
	assert.Equal(t, big[:deadletter.MaxPreview], string(listed[0].Data))
	assert.Equal(t, len(big), listed[0].DataSize)
	code, body = e.do(t, http.MethodGet, "/deadletters?namespace=shop&preview=yes")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "preview must be true or false")
}
