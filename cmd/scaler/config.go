package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/kfn-dev/kfn/eventbridge/inflight"
	"github.com/kfn-dev/kfn/eventbridge/stream"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/scaler"
)

// errInvalidConfig is wrapped by every error of config.validate.
var errInvalidConfig = errors.New("invalid scaler configuration")

// config is every setting of the scaler; defaultConfig has working values
// for a cluster, registerFlags documents each one.
type config struct {
	NATSURL         string
	EventStream     string
	Listen          string
	MetricsListen   string
	TLSCertFile     string
	TLSKeyFile      string
	TLSClientCAFile string
	RefreshInterval time.Duration
	InFlightSubject string
	LogLevel        string
}

func defaultConfig() config {
	return config{
		NATSURL:         "nats://127.0.0.1:4222",
		EventStream:     stream.DefaultConfig().EventStream,
		Listen:          ":9090",
		MetricsListen:   ":8080",
		RefreshInterval: scaler.DefaultRefreshInterval,
		InFlightSubject: inflight.DefaultSubject,
		LogLevel:        "info",
	}
}

func (c *config) registerFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.NATSURL, "nats-url", c.NATSURL, "NATS server URL(s), comma-separated")
	fs.StringVar(&c.EventStream, "event-stream", c.EventStream, "name of the event stream whose consumers hold the backlog")
	fs.StringVar(&c.Listen, "listen", c.Listen, "address of the gRPC server (KEDA's external scaler protocol and gRPC health)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", c.MetricsListen, "address of /metrics, /healthz and /readyz; empty disables it")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "serve gRPC with TLS with this certificate (PEM; reloaded when it changes); needs -tls-key-file")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", c.TLSKeyFile, "the key of -tls-cert-file (PEM)")
	fs.StringVar(&c.TLSClientCAFile, "tls-client-ca-file", c.TLSClientCAFile, "require client certificates signed by these CAs (PEM); needs -tls-cert-file")
	fs.DurationVar(&c.RefreshInterval, "refresh-interval", c.RefreshInterval, "how often the backlog of every consumer is read (at least 10ms)")
	fs.StringVar(&c.InFlightSubject, "inflight-subject", c.InFlightSubject, "core NATS subject of the gateway's in-flight reports (the event bridge's -gateway-inflight-subject)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: "+logging.Levels)
}

// validate returns an error wrapping errInvalidConfig that says what to fix.
func (c *config) validate() error {
	switch {
	case c.NATSURL == "":
		return fmt.Errorf("%w: -nats-url is required", errInvalidConfig)
	case c.EventStream == "":
		return fmt.Errorf("%w: -event-stream is required", errInvalidConfig)
	case c.Listen == "":
		return fmt.Errorf("%w: -listen is required", errInvalidConfig)
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return fmt.Errorf("%w: -tls-cert-file and -tls-key-file go together", errInvalidConfig)
	case c.TLSClientCAFile != "" && c.TLSCertFile == "":
		return fmt.Errorf("%w: -tls-client-ca-file needs -tls-cert-file and -tls-key-file", errInvalidConfig)
	case c.RefreshInterval < 10*time.Millisecond:
		return fmt.Errorf("%w: -refresh-interval must be at least 10ms, not %s", errInvalidConfig, c.RefreshInterval)
	case c.InFlightSubject == "":
		return fmt.Errorf("%w: -inflight-subject is required", errInvalidConfig)
	}
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		return fmt.Errorf("%w: -log-level: %w", errInvalidConfig, err)
	}
	return nil
}
