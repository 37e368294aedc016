package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/contract/trigger"
	"github.com/kfn-dev/kfn/scaler/activity"
)

// Metric names the server reports; KEDA prefixes them with the trigger
// index ("s0-backlog").
const (
	// MetricBacklog is the number of events waiting for the Function.
	MetricBacklog = "backlog"
	// MetricConcurrency is the number of requests for the Function in the
	// gateway, held ones included.
	MetricConcurrency = "concurrency"
)

// ServiceName is the gRPC service name of KEDA's external scaler, also the
// name under which the health service reports it.
const ServiceName = "externalscaler.ExternalScaler"

// ErrInvalidOption is wrapped by every error an [Option] returns.
var ErrInvalidOption = errors.New("invalid option")

// Core is what the server needs of a [activity.Scaler].
type Core interface {
	State(fn types.NamespacedName) (activity.State, error)
	Watch(fn types.NamespacedName) (active bool, ch <-chan struct{}, cancel func())
}

var _ Core = (*activity.Scaler)(nil)

// Server is a gRPC server of KEDA's external scaler protocol and the gRPC
// health service. Create it with [New], run it with [Server.Serve].
type Server struct {
	pb.UnimplementedExternalScalerServer

	core    Core
	grpc    *grpc.Server
	health  *health.Server
	log     *slog.Logger
	closing chan struct{}
}

// New returns a server of core.
func New(core Core, opts ...Option) (*Server, error) {
	if core == nil {
		return nil, fmt.Errorf("%w: nil Core", ErrInvalidOption)
	}
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	var gopts []grpc.ServerOption
	if o.tls != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(o.tls)))
	}
	if o.reg != nil {
		m, err := newGRPCMetrics(o.reg)
		if err != nil {
			return nil, err
		}
		gopts = append(gopts, grpc.ChainUnaryInterceptor(m.unary), grpc.ChainStreamInterceptor(m.stream))
	}
	s := &Server{
		core:    core,
		grpc:    grpc.NewServer(gopts...),
		health:  health.NewServer(),
		log:     o.log,
		closing: make(chan struct{}),
	}
	pb.RegisterExternalScalerServer(s.grpc, s)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	return s, nil
}

// Serve serves on lis until ctx ends, then reports NOT_SERVING, ends every
// StreamIsActive stream, waits for unary calls to finish, and returns nil.
// The error is the listener's, if it fails first. Serve must be called at
// most once.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- s.grpc.Serve(lis) }()
	select {
	case err := <-errc:
		close(s.closing)
		return fmt.Errorf("serve gRPC on %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	s.health.Shutdown()
	close(s.closing)
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.grpc.Stop()
		<-done
	}
	<-errc
	return nil
}

// IsActive reports whether the Function has work (see package scaler/activity).
func (s *Server) IsActive(_ context.Context, ref *pb.ScaledObjectRef) (*pb.IsActiveResponse, error) {
	fn, err := function(ref)
	if err != nil {
		return nil, err
	}
	st, err := s.core.State(fn)
	if err != nil {
		return nil, grpcError(err)
	}
	return &pb.IsActiveResponse{Result: st.Active}, nil
}

// StreamIsActive sends true when the stream opens if the Function is
// active, then once per inactive->active transition of the Function, until
// the client goes away or the server stops. It never sends false: KEDA
// ignores it and scales in on its polling loop.
func (s *Server) StreamIsActive(ref *pb.ScaledObjectRef, stream grpc.ServerStreamingServer[pb.IsActiveResponse]) error {
	fn, err := function(ref)
	if err != nil {
		return err
	}
	active, ch, cancel := s.core.Watch(fn)
	defer cancel()
	s.log.Debug("activation stream opened", "namespace", fn.Namespace, "function", fn.Name, "active", active)
	if active {
		if err := stream.Send(&pb.IsActiveResponse{Result: true}); err != nil {
			return err
		}
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-s.closing:
			return nil
		case <-ch:
			if err := stream.Send(&pb.IsActiveResponse{Result: true}); err != nil {
				return err
			}
		}
	}
}

// GetMetricSpec returns the two metrics and their per-replica targets from
// the trigger metadata.
func (s *Server) GetMetricSpec(_ context.Context, ref *pb.ScaledObjectRef) (*pb.GetMetricSpecResponse, error) {
	md, err := metadata(ref)
	if err != nil {
		return nil, err
	}
	backlog, concurrency := int64(md.TargetBacklog), int64(md.TargetConcurrency)
	return &pb.GetMetricSpecResponse{MetricSpecs: []*pb.MetricSpec{
		{MetricName: MetricBacklog, TargetSize: backlog, TargetSizeFloat: float64(backlog)},
		{MetricName: MetricConcurrency, TargetSize: concurrency, TargetSizeFloat: float64(concurrency)},
	}}, nil
}

// GetMetrics returns the value of the named metric, from memory. A Function
// whose backlog is unknown (a missing consumer, NATS unreachable) gets an
// error, so KEDA's fallback applies.
func (s *Server) GetMetrics(_ context.Context, req *pb.GetMetricsRequest) (*pb.GetMetricsResponse, error) {
	fn, err := function(req.GetScaledObjectRef())
	if err != nil {
		return nil, err
	}
	st, err := s.core.State(fn)
	if err != nil {
		return nil, grpcError(err)
	}
	var v int64
	switch req.GetMetricName() {
	case MetricBacklog:
		v = int64(min(st.Backlog, 1<<62))
	case MetricConcurrency:
		v = int64(st.InFlight)
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown metric %q: want %q or %q", req.GetMetricName(), MetricBacklog, MetricConcurrency)
	}
	return &pb.GetMetricsResponse{MetricValues: []*pb.MetricValue{
		{MetricName: req.GetMetricName(), MetricValue: v, MetricValueFloat: float64(v)},
	}}, nil
}

// function returns the Function a ScaledObjectRef names.
func function(ref *pb.ScaledObjectRef) (types.NamespacedName, error) {
	md, err := metadata(ref)
	return md.Function, err
}

// metadata parses the trigger metadata of a ScaledObjectRef; a bad one is
// InvalidArgument.
func metadata(ref *pb.ScaledObjectRef) (trigger.Metadata, error) {
	if ref == nil {
		return trigger.Metadata{}, status.Error(codes.InvalidArgument, "missing scaledObjectRef")
	}
	md, err := trigger.Parse(ref.GetScalerMetadata(), ref.GetNamespace(), ref.GetName())
	if err != nil {
		return md, status.Error(codes.InvalidArgument, err.Error())
	}
	return md, nil
}

func grpcError(err error) error {
	code := codes.Unavailable
	if errors.Is(err, activity.ErrConsumerNotFound) {
		code = codes.FailedPrecondition
	}
	return status.Error(code, err.Error())
}

// Option configures [New].
type Option func(*options) error

type options struct {
	tls *tls.Config
	reg prometheus.Registerer
	log *slog.Logger
}

// WithTLS serves TLS with cfg (see [TLSConfig]).
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) error {
		if cfg == nil {
			return fmt.Errorf("%w: nil TLS config", ErrInvalidOption)
		}
		o.tls = cfg
		return nil
	}
}

// WithMetrics registers kfn_scaler_grpc_requests_total{method,code} with reg.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(o *options) error {
		if reg == nil {
			return fmt.Errorf("%w: nil metrics registerer", ErrInvalidOption)
		}
		o.reg = reg
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
