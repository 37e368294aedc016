package dispatcher_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/test/natstest"
)

func TestNewRefusesBadOptions(t *testing.T) {
	js := natstest.Start(t).JetStream()
	good := dispatcher.Config{Streams: stream.DefaultConfig()}
	_, err := dispatcher.New(nil, good)
	require.ErrorIs(t, err, dispatcher.ErrInvalidOption)
	_, err = dispatcher.New(js, dispatcher.Config{})
	require.ErrorIs(t, err, dispatcher.ErrInvalidOption, "streams are required")
	for name, cfg := range map[string]dispatcher.Config{
		"negative timeout":                     {Streams: good.Streams, RequestTimeout: -1},
		"jitter over 1":                        {Streams: good.Streams, Jitter: 1.5},
		"negative hops":                        {Streams: good.Streams, MaxHops: -1},
		"tiny pull expiry":                     {Streams: good.Streams, PullExpiry: dispatcher.MinPullExpiry / 2},
		"a namespace's total above the stream": {Streams: good.Streams, NamespaceMaxBacklogBytes: good.Streams.MaxBytes + 1},
		"a namespace's total below one event":  {Streams: good.Streams, NamespaceMaxBacklogBytes: int64(good.Streams.MaxMsgSize) - 1},
		"a namespace's total of no events":     {Streams: good.Streams, NamespaceMaxBacklog: -1},
		"a negative retry burst":               {Streams: good.Streams, RetryBurstPerNamespace: -1},
	} {
		_, err := dispatcher.New(js, cfg)
		require.ErrorIs(t, err, dispatcher.ErrInvalidOption, name)
	}
	for name, opt := range map[string]dispatcher.Option{
		"nil endpoints": dispatcher.WithEndpoints(nil),
		"nil resolver":  dispatcher.WithResolver(nil),
		"nil transport": dispatcher.WithTransport(nil),
		"nil logger":    dispatcher.WithLogger(nil),
		"nil observer":  dispatcher.WithObserver(nil),
		"nil metrics":   dispatcher.WithMetrics(nil),
	} {
		_, err := dispatcher.New(js, good, opt)
		require.ErrorIs(t, err, dispatcher.ErrInvalidOption, name)
	}
	_, err = dispatcher.New(js, good)
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	_, err = dispatcher.New(js, good, dispatcher.WithMetrics(reg))
	require.NoError(t, err)
	_, err = dispatcher.New(js, good, dispatcher.WithMetrics(reg))
	require.ErrorIs(t, err, dispatcher.ErrInvalidOption, "the metrics are registered once per registry")
}
