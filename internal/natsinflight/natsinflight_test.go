package natsinflight_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/internal/natsinflight"
)

func TestOptionsRefuseWhatCannotWork(t *testing.T) {
	nc := &nats.Conn{} // never used: every case is refused before
	_, err := natsinflight.NewPublisher(nil)
	require.ErrorIs(t, err, natsinflight.ErrInvalidOption)
	_, err = natsinflight.Subscribe(nc, nil)
	require.ErrorIs(t, err, natsinflight.ErrInvalidOption)
	for name, opt := range map[string]natsinflight.Option{
		"empty subject": natsinflight.WithSubject(""),
		"nil logger":    natsinflight.WithLogger(nil),
		"nil option":    nil,
	} {
		_, err := natsinflight.NewPublisher(nc, opt)
		require.ErrorIs(t, err, natsinflight.ErrInvalidOption, name)
		_, err = natsinflight.Subscribe(nc, reporterFunc(func(string, map[types.NamespacedName]int, time.Duration) {}), opt)
		require.ErrorIs(t, err, natsinflight.ErrInvalidOption, name)
	}
}

type reporterFunc func(string, map[types.NamespacedName]int, time.Duration)

func (f reporterFunc) ReportInFlight(src string, counts map[types.NamespacedName]int, ttl time.Duration) {
	f(src, counts, ttl)
}
