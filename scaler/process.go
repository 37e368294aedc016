package scaler

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/kfn-dev/kfn/contract/activation"
	"github.com/kfn-dev/kfn/contract/inflight"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/internal/natsconn"
	"github.com/kfn-dev/kfn/scaler/activity"
)

// ErrInvalidConfig is wrapped by every error of Process.Validate.
var ErrInvalidConfig = errors.New("invalid scaler configuration")

// Process is every setting of the scaler. DefaultProcess has working values
// for a cluster; RegisterFlags documents each one as a flag.
type Process struct {
	// NATSURL is the NATS server (comma-separated for a cluster).
	NATSURL string
	// NATS is the user, password and CA the scaler connects to NATS with
	// (flags -nats-user, -nats-password-file, -nats-creds-file,
	// -nats-ca-file); the zero value connects anonymously.
	NATS natsconn.Credentials
	// EventStream is the stream whose consumers hold the backlog: the
	// event stream's partition 0, and the start of its other partitions'
	// names.
	EventStream string
	// Partitions is the event stream's partitions (the event bridge's
	// -partitions): a Function's backlog is its consumers' in every one.
	Partitions int
	// Listen is the gRPC server's address (KEDA's external scaler protocol
	// and gRPC health).
	Listen string
	// MetricsListen serves /metrics, /healthz and /readyz; empty disables
	// it.
	MetricsListen string
	// TLSCertFile and TLSKeyFile, when set, make the gRPC server serve TLS
	// (the certificate is reloaded when it changes).
	TLSCertFile string
	TLSKeyFile  string
	// TLSClientCAFile, when set, requires client certificates signed by
	// these CAs.
	TLSClientCAFile string
	// RefreshInterval is how often the backlog of every consumer is read.
	RefreshInterval time.Duration
	// InFlightSubject is the core NATS subject of the gateway's in-flight
	// reports.
	InFlightSubject string
	// ActivationSubject is the core NATS subject the scaler publishes
	// each Function's activation on (package contract/activation), for
	// the event bridge to claim a standby pod at once; empty: none.
	ActivationSubject string
	// ClaimHold holds each activation from KEDA while the event bridge
	// claims a standby pod for the Function: until a bridge says on
	// ClaimedSubject that the claim ended, or for at most ClaimHold; 0:
	// KEDA is told at once. Set it where the bridges claim (the chart
	// does when the warm pool's claims are on): without them every
	// activation waits the whole hold.
	ClaimHold time.Duration
	// ClaimedSubject is the core NATS subject of the bridges' answers to
	// activations (package contract/activation).
	ClaimedSubject string
	// LogLevel is debug, info, warn or error.
	LogLevel string
}

// DefaultProcess returns working defaults.
func DefaultProcess() Process {
	return Process{
		NATSURL:           "nats://127.0.0.1:4222",
		EventStream:       stream.DefaultConfig().EventStream,
		Partitions:        1,
		Listen:            ":9090",
		MetricsListen:     ":8080",
		RefreshInterval:   activity.DefaultRefreshInterval,
		InFlightSubject:   inflight.DefaultSubject,
		ActivationSubject: activation.DefaultSubject,
		ClaimedSubject:    activation.ClaimedSubject,
		LogLevel:          "info",
	}
}

// RegisterFlags binds every setting to a flag of fs, with the current
// values as defaults.
func (c *Process) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.NATSURL, "nats-url", c.NATSURL, "NATS server URL(s), comma-separated")
	c.NATS.RegisterFlags(fs)
	fs.StringVar(&c.EventStream, "event-stream", c.EventStream, "name of the event stream whose consumers hold the backlog")
	fs.IntVar(&c.Partitions, "partitions", c.Partitions, fmt.Sprintf("the event stream's partitions, 1 to %d (the event bridge's -partitions)", stream.MaxPartitions))
	fs.StringVar(&c.Listen, "listen", c.Listen, "address of the gRPC server (KEDA's external scaler protocol and gRPC health)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", c.MetricsListen, "address of /metrics, /healthz and /readyz; empty disables it")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "serve gRPC with TLS with this certificate (PEM; reloaded when it changes); needs -tls-key-file")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", c.TLSKeyFile, "the key of -tls-cert-file (PEM)")
	fs.StringVar(&c.TLSClientCAFile, "tls-client-ca-file", c.TLSClientCAFile, "require client certificates signed by these CAs (PEM); needs -tls-cert-file")
	fs.DurationVar(&c.RefreshInterval, "refresh-interval", c.RefreshInterval, "how often the backlog of every consumer is read (at least 10ms)")
	fs.StringVar(&c.ActivationSubject, "activation-subject", c.ActivationSubject, "core NATS subject on which each Function's activation is published, for the event bridge to claim a standby pod at once (its -claim-activation-subject); empty: none")
	fs.DurationVar(&c.ClaimHold, "claim-hold", c.ClaimHold, "hold each activation from KEDA while the event bridge claims a standby pod for the Function, until it says the claim ended (on -claimed-subject) or for at most this (at most 1m); 0: tell KEDA at once. Only where the bridges claim: otherwise every wake waits it")
	fs.StringVar(&c.ClaimedSubject, "claimed-subject", c.ClaimedSubject, "core NATS subject of the event bridges' answers to activations (their -claimed-subject)")
	fs.StringVar(&c.InFlightSubject, "inflight-subject", c.InFlightSubject, "core NATS subject of the gateway's in-flight reports (the event bridge's -gateway-inflight-subject)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: "+logging.Levels)
}

// Validate returns an error wrapping ErrInvalidConfig that says what to fix.
func (c *Process) Validate() error {
	switch {
	case c.NATSURL == "":
		return fmt.Errorf("%w: -nats-url is required", ErrInvalidConfig)
	case c.EventStream == "":
		return fmt.Errorf("%w: -event-stream is required", ErrInvalidConfig)
	case c.Partitions < 1 || c.Partitions > stream.MaxPartitions:
		return fmt.Errorf("%w: -partitions must be between 1 and %d, not %d", ErrInvalidConfig, stream.MaxPartitions, c.Partitions)
	case c.Listen == "":
		return fmt.Errorf("%w: -listen is required", ErrInvalidConfig)
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return fmt.Errorf("%w: -tls-cert-file and -tls-key-file go together", ErrInvalidConfig)
	case c.TLSClientCAFile != "" && c.TLSCertFile == "":
		return fmt.Errorf("%w: -tls-client-ca-file needs -tls-cert-file and -tls-key-file", ErrInvalidConfig)
	case c.RefreshInterval < 10*time.Millisecond:
		return fmt.Errorf("%w: -refresh-interval must be at least 10ms, not %s", ErrInvalidConfig, c.RefreshInterval)
	case c.InFlightSubject == "":
		return fmt.Errorf("%w: -inflight-subject is required", ErrInvalidConfig)
	case c.ClaimHold < 0 || c.ClaimHold > time.Minute:
		return fmt.Errorf("%w: -claim-hold must be between 0 and 1m, not %s", ErrInvalidConfig, c.ClaimHold)
	case c.ClaimHold > 0 && (c.ActivationSubject == "" || c.ClaimedSubject == ""):
		return fmt.Errorf("%w: -claim-hold needs -activation-subject and -claimed-subject (the bridges claim on the one and answer on the other)", ErrInvalidConfig)
	}
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		return fmt.Errorf("%w: -log-level: %w", ErrInvalidConfig, err)
	}
	if err := c.NATS.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Streams names the event stream and counts its partitions.
func (c *Process) Streams() stream.Config {
	return stream.Config{EventStream: c.EventStream, Partitions: c.Partitions}
}
