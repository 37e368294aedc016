package pool

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// TestSpecializeReadsLittleOfTheAnswer: the host of a claimed pod, which
// runs the Function's code once specialized, answering with a megabyte of
// headers fails the claim with the reason, instead of being read up to
// Go's 10 MiB by the controller every tenant shares.
func TestSpecializeReadsLittleOfTheAnswer(t *testing.T) {
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(runtimes.FunctionHeader, "shop/orders")
		w.Header().Set("X-Padding", strings.Repeat("x", 1<<20))
	}))
	t.Cleanup(host.Close)
	p, err := New(nil, nil, Config{ClaimTimeout: 10 * time.Second},
		WithAddress(func(*corev1.Pod) string { return strings.TrimPrefix(host.URL, "http://") }))
	require.NoError(t, err)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "standby-1"}}
	err = p.specialize(context.Background(), pod, plan.Plan{Namespace: "shop", Name: "orders"})
	require.ErrorContains(t, err, "response headers exceeded")
}
