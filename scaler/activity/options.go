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

	maxListenPerNamespace int
	maxListen             int
}

// Defaults of the options.
const (
	// DefaultRefreshInterval is how often the backlog is read.
	DefaultRefreshInterval = time.Second
	// DefaultActivationHold is how long a signal keeps a Function active
	// against a refresh that started before the signal was counted.
	DefaultActivationHold = 500 * time.Millisecond
	// DefaultMaxListenSubjectsPerNamespace bounds the subjects listened on
	// for the Functions of one namespace (WithListenBounds): about 85
	// Subscriptions of one type each (3 subjects: partition 0, the other
	// partitions, replays). A listened subject of 2 KiB costs about 2.5
	// KiB of the scaler's memory and as much of the NATS server's, so a
	// namespace at the consumer limit (100 Subscriptions of up to 64
	// types: 12,900 subjects) would cost some 32 MiB a namespace, more
	// than the scaler (256 MiB) can afford for every tenant.
	DefaultMaxListenSubjectsPerNamespace = 256
	// DefaultMaxListenSubjects bounds the subjects listened on in all
	// (WithListenBounds): 16 namespaces at their bound, at most about
	// 10 MiB of the scaler's memory and as much of the NATS server's.
	DefaultMaxListenSubjects = 4096
)

func newOptions(opts []Option) (options, error) {
	o := options{
		interval: DefaultRefreshInterval,
		hold:     DefaultActivationHold,
		log:      slog.New(slog.DiscardHandler),
		metrics:  &metrics{},

		maxListenPerNamespace: DefaultMaxListenSubjectsPerNamespace,
		maxListen:             DefaultMaxListenSubjects,
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

// WithListenBounds bounds the subjects the scaler listens on for inactive
// Functions (see the package doc): perNamespace for the Functions of one
// namespace (default DefaultMaxListenSubjectsPerNamespace) and total for
// all (default DefaultMaxListenSubjects); 1 <= perNamespace <= total.
// Each subject is a NATS subscription of the scaler's, so the bounds are
// what a tenant's Subscriptions can cost it. A Function is listened for
// on all of its subjects or on none; within a namespace Functions are
// taken in name order, and for the total the namespaces that ask for
// fewest subjects go first, so a large namespace never crowds a small one
// out. A Function past a bound loses push activation only: the refresh
// (every refresh interval, default 1s) still finds its first event in its
// backlog and wakes it, a refresh interval later than push would have.
func WithListenBounds(perNamespace, total int) Option {
	return func(o *options) error {
		if perNamespace < 1 || total < perNamespace {
			return fmt.Errorf("%w: listen bounds must be 1 <= per namespace <= total, not %d and %d", ErrInvalidOption, perNamespace, total)
		}
		o.maxListenPerNamespace, o.maxListen = perNamespace, total
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
