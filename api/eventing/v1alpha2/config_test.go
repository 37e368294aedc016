package v1alpha2_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	. "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

func TestParseDelivery(t *testing.T) {
	tests := map[string]struct {
		config   map[string]ConfigValue
		defaults *Delivery // nil: DefaultDelivery()
		want     Delivery
		wantErr  string
	}{
		"no config": {config: nil, want: DefaultDelivery()},
		"kyma default": {
			config: map[string]ConfigValue{"maxInFlightMessages": "10"},
			want:   Delivery{MaxInFlight: 10, MaxDeliver: 10, BackoffInitial: time.Second, BackoffMax: time.Minute, DeadLetter: true, MaxBacklog: 100000, MaxBacklogBytes: DefaultMaxBacklogBytes},
		},
		"every key": {
			config: map[string]ConfigValue{"maxInFlightMessages": "1", "maxDeliver": "3", "backoffInitial": "250ms", "backoffMax": "2s", "deadLetter": "false", "maxBacklog": "500"},
			want:   Delivery{MaxInFlight: 1, MaxDeliver: 3, BackoffInitial: 250 * time.Millisecond, BackoffMax: 2 * time.Second, DeadLetter: false, MaxBacklog: 500, MaxBacklogBytes: DefaultMaxBacklogBytes},
		},
		"eventmesh keys ignored": {
			config: map[string]ConfigValue{"qos": "AT_LEAST_ONCE", "contentMode": "BINARY"},
			want:   DefaultDelivery(),
		},
		"not an int":                {config: map[string]ConfigValue{"maxInFlightMessages": "ten"}, wantErr: `maxInFlightMessages must be a stringified int value between 1 and 1000, not "ten"`},
		"most in flight":            {config: map[string]ConfigValue{"maxInFlightMessages": "1000"}, want: Delivery{MaxInFlight: 1000, MaxDeliver: 10, BackoffInitial: time.Second, BackoffMax: time.Minute, DeadLetter: true, MaxBacklog: 100000, MaxBacklogBytes: DefaultMaxBacklogBytes}},
		"in flight over its cap":    {config: map[string]ConfigValue{"maxInFlightMessages": "1001"}, wantErr: `maxInFlightMessages must be a stringified int value between 1 and 1000, not "1001"`},
		"a billion in flight":       {config: map[string]ConfigValue{"maxInFlightMessages": "999999999"}, wantErr: "between 1 and 1000"},
		"most deliveries":           {config: map[string]ConfigValue{"maxDeliver": "100"}, want: Delivery{MaxInFlight: 10, MaxDeliver: 100, BackoffInitial: time.Second, BackoffMax: time.Minute, DeadLetter: true, MaxBacklog: 100000, MaxBacklogBytes: DefaultMaxBacklogBytes}},
		"deliveries over their cap": {config: map[string]ConfigValue{"maxDeliver": "101"}, wantErr: "maxDeliver must be a stringified int value between 1 and 100"},
		"largest backlog":           {config: map[string]ConfigValue{"maxBacklog": "1000000"}, want: Delivery{MaxInFlight: 10, MaxDeliver: 10, BackoffInitial: time.Second, BackoffMax: time.Minute, DeadLetter: true, MaxBacklog: 1000000, MaxBacklogBytes: DefaultMaxBacklogBytes}},
		"backlog over its cap":      {config: map[string]ConfigValue{"maxBacklog": "1000001"}, wantErr: "maxBacklog must be a stringified int value between 1 and 1000000"},
		"zero in flight":            {config: map[string]ConfigValue{"maxInFlightMessages": "0"}, wantErr: "maxInFlightMessages must be"},
		"negative deliveries":       {config: map[string]ConfigValue{"maxDeliver": "-1"}, wantErr: "maxDeliver must be"},
		"bad duration":              {config: map[string]ConfigValue{"backoffInitial": "soon"}, wantErr: `backoffInitial must be a duration of at least 10ms such as 1s or 5m, not "soon"`},
		"zero duration":             {config: map[string]ConfigValue{"backoffMax": "0s"}, wantErr: "backoffMax must be a duration of at least 10ms"},
		"a nanosecond's backoff":    {config: map[string]ConfigValue{"backoffInitial": "1ns", "backoffMax": "1ns"}, wantErr: `backoffInitial must be a duration of at least 10ms such as 1s or 5m, not "1ns"`},
		"backoff below 10ms":        {config: map[string]ConfigValue{"backoffInitial": "9ms"}, wantErr: `backoffInitial must be a duration of at least 10ms`},
		"shortest backoff":          {config: map[string]ConfigValue{"backoffInitial": "10ms", "backoffMax": "10ms"}, want: Delivery{MaxInFlight: 10, MaxDeliver: 10, BackoffInitial: 10 * time.Millisecond, BackoffMax: 10 * time.Millisecond, DeadLetter: true, MaxBacklog: 100000, MaxBacklogBytes: DefaultMaxBacklogBytes}},
		"max below initial":         {config: map[string]ConfigValue{"backoffInitial": "10s", "backoffMax": "1s"}, wantErr: "backoffMax (1s) must not be less than backoffInitial (10s)"},
		"zero backlog":              {config: map[string]ConfigValue{"maxBacklog": "0"}, wantErr: "maxBacklog must be a stringified int value between 1 and 1000000"},
		"backlog below flight":      {config: map[string]ConfigValue{"maxInFlightMessages": "50", "maxBacklog": "20"}, wantErr: "maxBacklog (20) must not be less than maxInFlightMessages (50)"},
		"default backlog grows with in flight": {
			config:   map[string]ConfigValue{"maxInFlightMessages": "500"},
			defaults: &Delivery{MaxInFlight: 10, MaxDeliver: 10, BackoffInitial: time.Second, BackoffMax: time.Minute, DeadLetter: true, MaxBacklog: 100, MaxBacklogBytes: DefaultMaxBacklogBytes},
			want:     Delivery{MaxInFlight: 500, MaxDeliver: 10, BackoffInitial: time.Second, BackoffMax: time.Minute, DeadLetter: true, MaxBacklog: 500, MaxBacklogBytes: DefaultMaxBacklogBytes},
		},
		"bad dead letter": {config: map[string]ConfigValue{"deadLetter": "yes"}, wantErr: `deadLetter must be "true" or "false", not "yes"`},
		"ordered by partition key": {
			config: map[string]ConfigValue{"ordering": "partitionkey"},
			want:   Delivery{MaxInFlight: 10, MaxDeliver: 10, BackoffInitial: time.Second, BackoffMax: time.Minute, DeadLetter: true, MaxBacklog: 100000, MaxBacklogBytes: DefaultMaxBacklogBytes, Ordered: true},
		},
		"not ordered":      {config: map[string]ConfigValue{"ordering": "none"}, want: DefaultDelivery()},
		"unknown ordering": {config: map[string]ConfigValue{"ordering": "PartitionKey"}, wantErr: `ordering must be "none" or "partitionkey", not "PartitionKey"`},
		"empty ordering":   {config: map[string]ConfigValue{"ordering": ""}, wantErr: `ordering must be "none" or "partitionkey", not ""`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			defaults := DefaultDelivery()
			if tt.defaults != nil {
				defaults = *tt.defaults
			}
			got, err := (&Subscription{Spec: SubscriptionSpec{Config: tt.config}}).DeliveryOver(defaults)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrInvalidConfig)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDeliveryOverOperatorDefaults(t *testing.T) {
	defaults := Delivery{MaxInFlight: 4, MaxDeliver: 20, BackoffInitial: 2 * time.Second, BackoffMax: 5 * time.Minute, DeadLetter: false, MaxBacklog: 1000, MaxBacklogBytes: DefaultMaxBacklogBytes}
	require.NoError(t, defaults.Validate())
	sub := &Subscription{Spec: SubscriptionSpec{Config: map[string]ConfigValue{"maxDeliver": "3"}}}
	got, err := sub.DeliveryOver(defaults)
	require.NoError(t, err)
	assert.Equal(t, Delivery{MaxInFlight: 4, MaxDeliver: 3, BackoffInitial: 2 * time.Second, BackoffMax: 5 * time.Minute, DeadLetter: false, MaxBacklog: 1000, MaxBacklogBytes: DefaultMaxBacklogBytes}, got,
		"keys the Subscription sets win; the others are the operator's")

	sub.Spec.Config = map[string]ConfigValue{"backoffInitial": "10m"}
	_, err = sub.DeliveryOver(defaults)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "backoffMax (5m0s) must not be less than backoffInitial (10m0s)", "checked against the defaults it is combined with")

	for name, bad := range map[string]Delivery{
		"no in flight":         {MaxInFlight: 0, MaxDeliver: 1, BackoffInitial: time.Second, BackoffMax: time.Second, MaxBacklog: 1, MaxBacklogBytes: DefaultMaxBacklogBytes},
		"backlog below flight": {MaxInFlight: 10, MaxDeliver: 1, BackoffInitial: time.Second, BackoffMax: time.Second, MaxBacklog: 5, MaxBacklogBytes: DefaultMaxBacklogBytes},
		"no delivery":          {MaxInFlight: 1, MaxDeliver: 0, BackoffInitial: time.Second, BackoffMax: time.Second},
		"no backoff":           {MaxInFlight: 1, MaxDeliver: 1, BackoffMax: time.Second},
		"backoff below 10ms":   {MaxInFlight: 1, MaxDeliver: 1, BackoffInitial: time.Nanosecond, BackoffMax: time.Second, MaxBacklog: 1, MaxBacklogBytes: DefaultMaxBacklogBytes},
		"max below initial":    {MaxInFlight: 1, MaxDeliver: 1, BackoffInitial: time.Minute, BackoffMax: time.Second},
		"negative in flight":   {MaxInFlight: -1, MaxDeliver: 1, BackoffInitial: time.Second, BackoffMax: time.Second},
		"negative backoffMax":  {MaxInFlight: 1, MaxDeliver: 1, BackoffInitial: time.Second, BackoffMax: -time.Second},
		"in flight over cap":   {MaxInFlight: MaxMaxInFlightMessages + 1, MaxDeliver: 1, BackoffInitial: time.Second, BackoffMax: time.Second, MaxBacklog: MaxMaxBacklog, MaxBacklogBytes: DefaultMaxBacklogBytes},
		"backlog over cap":     {MaxInFlight: 1, MaxDeliver: 1, BackoffInitial: time.Second, BackoffMax: time.Second, MaxBacklog: MaxMaxBacklog + 1, MaxBacklogBytes: DefaultMaxBacklogBytes},
		"deliveries over cap":  {MaxInFlight: 1, MaxDeliver: MaxMaxDeliver + 1, BackoffInitial: time.Second, BackoffMax: time.Second, MaxBacklog: 1, MaxBacklogBytes: DefaultMaxBacklogBytes},
	} {
		assert.ErrorIs(t, bad.Validate(), ErrInvalidConfig, name)
	}
}

func TestAnOrderedSubscriptionHoldsMoreThanItDelivers(t *testing.T) {
	d := DefaultDelivery()
	assert.Equal(t, 10, d.AckPending(), "unordered: maxInFlightMessages")
	d.Ordered = true
	assert.Equal(t, 10*OrderedAckPendingFactor, d.AckPending(), "events of busy keys wait behind them, and the others must still come")
	d.MaxInFlight = MaxMaxInFlightMessages
	assert.Equal(t, MaxOrderedAckPending, d.AckPending(), "bounded")
}

func TestBackoffDoublesUpToMax(t *testing.T) {
	d := Delivery{BackoffInitial: time.Second, BackoffMax: 10 * time.Second}
	var got []time.Duration
	for failures := 1; failures <= 6; failures++ {
		got = append(got, d.Backoff(failures))
	}
	assert.Equal(t, []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}, got)
	assert.Equal(t, time.Second, d.Backoff(0), "no failure yet: the initial delay")
	assert.Equal(t, 10*time.Second, d.Backoff(1000), "no overflow on many failures")
}
