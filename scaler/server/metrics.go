package server

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

type grpcMetrics struct {
	requests *prometheus.CounterVec
}

func newGRPCMetrics(reg prometheus.Registerer) (*grpcMetrics, error) {
	m := &grpcMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kfn_scaler_grpc_requests_total",
		Help: "gRPC calls handled, by method and status code (streams count when they end).",
	}, []string{"method", "code"})}
	if err := reg.Register(m.requests); err != nil {
		return nil, fmt.Errorf("%w: register metrics: %w", ErrInvalidOption, err)
	}
	return m, nil
}

func (m *grpcMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	m.requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	return resp, err
}

func (m *grpcMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	err := handler(srv, ss)
	m.requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	return err
}
