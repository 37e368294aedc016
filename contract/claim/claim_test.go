package claim_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/claim"
)

func TestPathRoundTrips(t *testing.T) {
	ns, name, err := claim.ParsePath(claim.Path("shop", "orders"))
	require.NoError(t, err)
	assert.Equal(t, []string{"shop", "orders"}, []string{ns, name})
	for _, bad := range []string{"", "/claims/", "/claims/shop", "/claims/shop/", "/claims//orders", "/claims/shop/orders/x",
		"/claims/Shop/orders", "/claims/shop/or..ders", "/claims/" + strings.Repeat("a", 64) + "/orders", "/other/shop/orders",
		"/claims/shop/orders%2Fx"} {
		_, _, err := claim.ParsePath(bad)
		assert.ErrorIs(t, err, claim.ErrInvalidPath, bad)
	}
}

func TestStatusOfEachRefusal(t *testing.T) {
	for err, code := range map[error]int{claim.ErrNotPooled: http.StatusNotFound, claim.ErrServed: http.StatusConflict,
		claim.ErrNoStandby: http.StatusServiceUnavailable, errors.New("the host refused"): http.StatusBadGateway} {
		assert.Equal(t, code, claim.StatusOf(err), err.Error())
	}
}
