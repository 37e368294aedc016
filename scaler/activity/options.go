package activity

import (
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Option configures [New].
type Option func(*options) error

type options struct {
	interval    time.Duration
	readTimeout time.Duration
	hold        time.Duration
	log         *slog.Logger
	metrics     *metrics
	activated   func(types.NamespacedName)
	claimHold   time.Duration
}

// Defaults of the options.
const (
	// DefaultRefreshInterval is how often the backlog is read.
	DefaultRefreshInterval = time.Second
	// DefaultActivationHold is how long a signal keeps a Function active
	// against a refresh that started before the signal was counted.
	DefaultActivationHold = 500 * time.Millisecond
)

func newOptions(opts []Option) (options, error) {
	o := options{
		interval: DefaultRefreshInterval,
		hold:     DefaultActivationHold,
		log:      slog.New(slog.DiscardHandler),
		metrics:  &metrics{},
	}
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	if o.readTimeout == 0 {
		o.readTimeout = max(o.interval, 5*time.Second)
	}
	return o, nil
}

// WithRefreshInterval sets how often [Scaler.Run] reads the backlog
// (default DefaultRefreshInterval); it must be at least 10ms.
func WithRefreshInterval(d time.Duration) Option {
	return func(o *options) error {
		if d < 10*time.Millisecond {
			return fmt.Errorf("%w: refresh interval must be >= 10ms, not %s", ErrInvalidOption, d)
		}
		o.interval = d
		return nil
	}
}

// WithReadTimeout bounds one read of the backlog (default: the larger of
// the refresh interval and 5s).
func WithReadTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: read timeout must be positive, not %s", ErrInvalidOption, d)
		}
		o.readTimeout = d
		return nil
	}
}

// WithActivationHold sets the activation hold (default
// DefaultActivationHold, see the package doc); it must not be negative.
func WithActivationHold(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: activation hold must not be negative, not %s", ErrInvalidOption, d)
		}
		o.hold = d
		return nil
	}
}

// WithActivations has f called with each Function that turns active
// (every inactive->active transition, as Watch announces it), on a
// goroutine of its own: the scaler's process publishes them
// (package contract/activation), so that the event bridge claims a
// standby pod for the Function at once.
func WithActivations(f func(types.NamespacedName)) Option {
	return func(o *options) error {
		if f == nil {
			return fmt.Errorf("%w: nil activation hook", ErrInvalidOption)
		}
		o.activated = f
		return nil
	}
}

// WithClaimHold holds each activation's announcement to the watchers
// (KEDA's StreamIsActive, and so its scale-up) while the event bridge
// claims a standby pod for the Function: until ClaimEnded is called for
// it, or for at most d. It applies only with WithActivations (which tells
// the bridge); 0 (the default) announces at once. d must be at most a
// minute.
func WithClaimHold(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 || d > time.Minute {
			return fmt.Errorf("%w: claim hold must be between 0 and 1m, not %s", ErrInvalidOption, d)
		}
		o.claimHold = d
		return nil
	}
}

// WithLogger sets the logger (default: none).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		o.log = l
		return nil
	}
}
