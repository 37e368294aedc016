package eventbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/kfn-dev/kfn/contract/activation"
	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/internal/natsconn"
)

// Run runs the parts until ctx ends, then stops them and returns nil: the
// dispatcher settles or gives back the events it holds (within its
// ShutdownGrace), the Environment stops (a Kubernetes manager). The
// handlers are the host's to stop, after Run returns or later (kfn dev
// serves its publisher until its functions drained). Run ends early with
// an error when a part fails, or when the NATS connection closes for good
// (it wraps natsconn.ErrLost: nothing on the connection would work again;
// the host starts anew on a new one).
func (b *Bridge) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	// The environment runs the dispatcher and what serves the
	// Subscriptions (in a cluster, the manager: the reconciler, the
	// feeder, the EndpointSlice watcher).
	g.Go(func() error { return b.env.Run(ctx) })
	if b.Gateway != nil {
		g.Go(func() error { return b.Gateway.Run(ctx) })
	}
	// Replays are made by the admin API; consumers made by a release
	// that always filtered on the replay subject lose it too.
	if b.DeadLetters != nil || b.env.MakesConsumers() {
		g.Go(func() error { return b.applier().SweepReplays(ctx, b.cfg.ReplaySweep, b.component("replay")) })
	}
	// The dependency cache's bucket is made now, not at the first
	// pod's request.
	if b.DependencyCache != nil {
		g.Go(func() error { b.DependencyCache.Run(ctx, 2*time.Second); return nil })
	}
	if b.pathReplicas != nil {
		g.Go(func() error { return b.pathReplicas.Run(ctx) })
	}
	// A stream NATS lost is reported, not only made anew (package
	// streamloss): looked at every resync and before each re-creation.
	g.Go(func() error { b.lossGuard.Run(ctx, b.cfg.Resync); return nil })
	if b.sharer != nil {
		g.Go(func() error { return b.sharer.Run(ctx) })
	}
	if b.opts.reconnected != nil {
		g.Go(func() error { b.followNATS(ctx); return nil })
	}
	for _, a := range b.opts.access.distinct() {
		g.Go(func() error { return a.Run(ctx) })
	}
	if w, ok := b.env.(Waker); ok && b.cfg.Claims.Controller != "" && b.cfg.Claims.ActivationSubject != "" {
		sub, err := b.nc.Subscribe(b.cfg.Claims.ActivationSubject, func(m *nats.Msg) {
			fn, err := activation.Decode(m.Data)
			if err != nil {
				b.log.Debug("dropping an activation that does not decode", "subject", m.Subject, "error", err)
				return
			}
			// The scalers hold KEDA's scale-up until a bridge says the
			// claim ended (their -claim-hold); after a granted claim, once
			// the first deliveries to the pod had claimSettle to start.
			w.WakeThen(fn.Namespace, fn.Name, func(claimed bool) {
				subject := b.cfg.Claims.ClaimedSubject
				if subject == "" {
					return
				}
				say := func() {
					if err := b.nc.Publish(subject, activation.Encode(fn)); err != nil {
						b.log.Debug("publishing a claim's end failed: the scalers tell KEDA after their hold", "namespace", fn.Namespace, "function", fn.Name, "error", err)
					}
				}
				if claimed {
					time.AfterFunc(claimSettle, say)
					return
				}
				say()
			})
		})
		if err != nil {
			return fmt.Errorf("subscribe to the scalers' activations on %s: %w", b.cfg.Claims.ActivationSubject, err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	g.Go(func() error { return natsconn.UntilLost(ctx, b.nc) })
	return g.Wait()
}

// claimSettle is how long after a granted claim the bridge says it
// ended: KEDA's scale-up, which the scalers start then, takes the node's
// CPU (the API server's, the controllers', the kubelet's work behind it),
// and the first deliveries to the claimed pod, made the moment the claim
// was answered, end within it. The scalers' hold bounds it.
const claimSettle = 50 * time.Millisecond

// distinct are the checks of a that are set, each once (a field may be
// another itself).
func (a Access) distinct() []*auth.Kubernetes {
	var out []*auth.Kubernetes
	senders, _ := a.Senders.(*auth.Kubernetes)
	for _, k := range []*auth.Kubernetes{a.Admin, a.Gateway, senders} {
		if k != nil && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// followNATS recreates, after each reconnect (NATS may be a new, empty
// server), the streams first, then every consumer (Environment.Reapply);
// a stream that was lost is reported first. An event stream made anew is
// closed until the opener (in this replica or the reconciler's leader)
// made every consumer in it.
func (b *Bridge) followNATS(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.opts.reconnected:
		}
		if _, err := b.lossGuard.Check(ctx); err != nil {
			b.log.Warn("looking for lost streams after a reconnect failed; the next resync looks again", "error", err)
		}
		if err := ensureStreams(ctx, b.js, b.cfg.Streams, b.env.MakesConsumers(), b.log); err != nil {
			b.log.Error("recreating streams after a reconnect failed; the next resync retries", "error", err)
			continue
		}
		b.env.Reapply(ctx)
	}
}

// EnsureStreams makes kfn's streams exist as c says, retrying with backoff
// until it works or ctx ends; a configuration NATS refuses is an error at
// once (stream.ErrInvalidConfig). A missing event stream is made open; a
// closed one stays closed (see stream.ClosedSubjectPrefix).
func EnsureStreams(ctx context.Context, js jetstream.JetStream, c stream.Config, log *slog.Logger) error {
	return ensureStreams(ctx, js, c, false, log)
}

// ensureStreams is EnsureStreams; with closed, a missing event stream is
// made closed (stream.EnsureClosed), for an Opener to open.
func ensureStreams(ctx context.Context, js jetstream.JetStream, c stream.Config, closed bool, log *slog.Logger) error {
	for wait := 100 * time.Millisecond; ; wait = min(wait*2, 5*time.Second) {
		var err error
		if closed {
			_, err = jsstream.EnsureClosed(ctx, js, c)
		} else {
			err = jsstream.Ensure(ctx, js, c)
		}
		if err == nil || errors.Is(err, stream.ErrInvalidConfig) {
			return err
		}
		log.Warn("creating streams failed, retrying", "error", err, "retryIn", wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("create streams: %w", err)
		case <-time.After(wait):
		}
	}
}
