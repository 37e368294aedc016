package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/pool"
	"github.com/kfn-dev/kfn/internal/auth"
)

// Bounds of the claim listener: its callers are the event bridge's
// replicas, each with a few connections; anyone else the network lets
// reach it is refused before a handler runs, and cannot hold it.
const (
	claimMaxConns          = 256
	claimReadHeaderTimeout = 5 * time.Second
	claimIdleTimeout       = 90 * time.Second
	claimMaxHeaderBytes    = 16 << 10
)

// ClaimPermission is what a caller of the claim listener needs for a
// Function: create on functions/claim in its namespace (on that name);
// with namespace and name empty, for every Function.
func ClaimPermission(namespace, name string) auth.Attributes {
	return auth.Attributes{Verb: "create", Group: v1alpha2.GroupVersion.Group, Resource: "functions", Subresource: "claim",
		Namespace: namespace, Name: name}
}

// addClaims has mgr serve p's claims on addr in the leader, to the callers
// Kubernetes authenticates and RBAC lets claim (ClaimPermission).
func addClaims(mgr manager.Manager, p *pool.Pool, addr string, log *slog.Logger) error {
	clientset, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("claims: kubernetes client: %w", err)
	}
	kube, err := auth.NewKubernetes(clientset, auth.KubernetesConfig{Logger: log})
	if err != nil {
		return fmt.Errorf("claims: %w", err)
	}
	h := kube.Authenticate(p.Handler(func(r *http.Request, namespace, name string) error {
		// The permission for every Function (the chart's ClusterRole) is
		// checked first: its answer is cached per caller, so that a
		// Function's first wake waits for no SubjectAccessReview of its
		// own; a caller granted some namespaces only is checked for the
		// Function's.
		checked := time.Now()
		err := kube.Allow(r, ClaimPermission("", ""))
		if err != nil {
			err = kube.Allow(r, ClaimPermission(namespace, name))
		}
		if namespace != "" && err == nil {
			// How long the caller's checks took, for a wake's timeline
			// (a review not cached is tens of milliseconds of it).
			arrived, _ := r.Context().Value(arrivedKey{}).(time.Time)
			log.Info("claim allowed", "namespace", namespace, "function", name,
				"authenticated", checked.Sub(arrived), "allowed", time.Since(checked))
		}
		return err
	}))
	return mgr.Add(&claimServer{addr: addr, handler: arrivedAt(h), kube: kube, log: log})
}

// arrivedKey is the context key of when a claim arrived (arrivedAt).
type arrivedKey struct{}

// arrivedAt notes in each request's context when it arrived, before its
// caller is authenticated.
func arrivedAt(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), arrivedKey{}, time.Now())))
	})
}

// claimServer serves the claims in the leader only: the pool runs there,
// and a replica that does not listen refuses a claim's connection at once,
// so that the event bridge tries the next.
type claimServer struct {
	addr    string
	handler http.Handler
	kube    *auth.Kubernetes
	log     *slog.Logger
}

// NeedLeaderElection serves the claims in the leader only.
func (s *claimServer) NeedLeaderElection() bool { return true }

// Start serves until ctx ends.
func (s *claimServer) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("claims: listen on %s: %w", s.addr, err)
	}
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: claimReadHeaderTimeout, IdleTimeout: claimIdleTimeout,
		MaxHeaderBytes: claimMaxHeaderBytes}
	go func() { _ = s.kube.Run(ctx) }()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	s.log.Info("serving the warm pool's claims", "address", ln.Addr().String())
	if err := srv.Serve(netutil.LimitListener(ln, claimMaxConns)); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("claims: %w", err)
	}
	return nil
}
