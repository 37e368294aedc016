package schedule

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/budget"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/delivery"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/observe"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/slots"
	"github.com/kfn-dev/kfn/eventbridge/pull"
	"github.com/kfn-dev/kfn/internal/jsstream"
)

// Config is what the scheduling needs of the dispatcher's Config (the
// fields of the same names there), defaults applied.
type Config struct {
	Streams stream.Config
	// Defaults are the delivery settings of the spec.config keys a
	// Subscription does not set.
	Defaults                                  v1alpha2.Delivery
	PullExpiry, BudgetInterval, ShutdownGrace time.Duration
	MaxHeldBytes, MaxHeldBytesPerSubscription int64
	DeliverySlots, DeliverySlotsPerNamespace  int
	SlotTime                                  time.Duration
	// RetryRate and RetryBurst bound each namespace's retries a second
	// (retryTurns); a rate of 0 or less bounds nothing.
	RetryRate  float64
	RetryBurst int
	// StreamingPerNamespace and ConsumerTurn are pull.Config's
	// MaxStreamingPerGroup and Turn, a namespace being a group.
	StreamingPerNamespace int
	ConsumerTurn          time.Duration
	Budget                budget.Config
	// PartitionLook is how often the partitions to serve are looked for
	// (followPartitions); jsstream.DefaultPartitionLook when zero.
	PartitionLook time.Duration
}

// Parts are what the workers deliver, record, log and ask readiness with.
type Parts struct {
	Sender    *delivery.Sender
	Recorder  *observe.Recorder
	Endpoints Endpoints
	Log       *slog.Logger
}

// Scheduler serves a changing set of Subscriptions, a worker each in each
// partition of the event stream (each pulling the Subscription's consumer
// in that partition, with its own budget and, for an ordered
// Subscription, its own order: a key's events are all in one). Tell
// it the Subscriptions with Upsert and Remove (any time, from any
// goroutine); Run runs the deliveries.
//
// One pull.Puller serves all the Subscriptions over one subscription of
// the NATS connection; each Subscription has a goroutine that follows
// its sink's readiness and a pull.Heartbeat while it holds events; each
// event in flight is delivered on one of the Scheduler's pull.Goroutines,
// in a turn of the delivery slots. Backlog budgets are checked by one
// loop for all (budget.go).
type Scheduler struct {
	cfg   Config
	js    jetstream.JetStream
	parts Parts
	// goroutines run the deliveries and budget checks of every worker,
	// the deliveries in the turns slots gives them.
	goroutines *pull.Goroutines
	slots      *slots.Shares
	retryTurns *retryTurns

	mu sync.Mutex
	// partitions are the partitions of the event stream served, in order
	// (SetPartitions).
	partitions []int
	// start starts a worker within Run's context; nil until Run.
	start   func(*worker)
	puller  *pull.Puller // set by Run
	workers map[key]*worker
	wg      sync.WaitGroup
}

// key names a worker: a Subscription's in one partition of the event
// stream.
type key struct {
	namespace, name string
	partition       int
}

// New returns a Scheduler that pulls through js.
func New(js jetstream.JetStream, cfg Config, parts Parts) *Scheduler {
	s := &Scheduler{cfg: cfg, js: js, parts: parts, workers: map[key]*worker{}, goroutines: pull.NewGoroutines(pull.DefaultIdle)}
	for p := range cfg.Streams.PartitionCount() {
		s.partitions = append(s.partitions, p)
	}
	s.slots = slots.New(cfg.DeliverySlots, cfg.SlotTime, s.goroutines.Go, slots.WithPerNamespace(cfg.DeliverySlotsPerNamespace))
	s.retryTurns = newRetryTurns(cfg.RetryRate, cfg.RetryBurst)
	return s
}

// Upsert starts serving the Subscription, or restarts its worker if what
// matters for delivery changed (the dispatcher's Upsert). A Subscription
// whose spec cannot be served (the error says why) gets a worker that
// delivers nothing and holds its consumer's events within the backlog
// budget: its own maxBacklog when its spec.config can be read, the last
// one served otherwise, else the default.
func (s *Scheduler) Upsert(sub *v1alpha2.Subscription) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.upsertLocked(sub)
}

// upsertLocked is Upsert in every served partition. The mu is held.
func (s *Scheduler) upsertLocked(sub *v1alpha2.Subscription) error {
	served, err := newTarget(sub, s.cfg.Defaults)
	shared := len(s.partitions) > 1
	var gate inFlightGate
	for _, p := range s.partitions {
		k := key{sub.Namespace, sub.Name, p}
		old, ok := s.workers[k]
		t := served
		if err != nil {
			t = holdTarget(sub, err, s.cfg.Defaults, old)
		}
		t = t.in(s.cfg.Streams, p)
		if ok && sameTarget(old.target, t) && (old.gate != nil) == shared {
			continue
		}
		if gate == nil && shared {
			gate = s.gateFor(k, t)
		}
		w := &worker{s: s, target: t, gate: gate, done: make(chan struct{})}
		s.workers[k] = w
		if s.start != nil {
			// The new worker's pull takes over the consumer's events
			// before the old one stops: none arrives with no worker to
			// take it.
			s.start(w)
		}
		if ok {
			old.stop()
		}
	}
	return err
}

// SetPartitions serves the partitions ps of the event stream (in order,
// 0 first; jsstream.ServedPartitions): every Subscription gets a worker
// in a partition added, and its worker in a partition no longer served
// (one taken away, drained and deleted) stops. Its deliveries in
// progress finish.
func (s *Scheduler) SetPartitions(ps []int) {
	s.mu.Lock()
	if slices.Equal(ps, s.partitions) {
		s.mu.Unlock()
		return
	}
	s.partitions = slices.Clone(ps)
	var stop []*worker
	var subs []*v1alpha2.Subscription
	for k, w := range s.workers {
		switch {
		case !slices.Contains(ps, k.partition):
			stop = append(stop, w)
			delete(s.workers, k)
		case k.partition == 0:
			subs = append(subs, w.target.sub)
		}
	}
	for _, sub := range subs {
		_ = s.upsertLocked(sub) // its error was the Upsert's, and is the same
	}
	s.mu.Unlock()
	for _, w := range stop {
		w.stop()
	}
}

// followPartitions looks for the partitions to serve (partitions taken
// away and not yet drained, see jsstream.DrainTakenAway) every
// PartitionLook until ctx is done.
func (s *Scheduler) followPartitions(ctx context.Context) {
	every := s.cfg.PartitionLook
	if every <= 0 {
		every = jsstream.DefaultPartitionLook
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ps, err := jsstream.ServedPartitions(ctx, s.js, s.cfg.Streams)
		if err == nil {
			s.SetPartitions(ps)
		} else if ctx.Err() == nil {
			s.parts.Log.Debug("looking for the partitions to serve failed; the next look retries", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// inFlightGate holds a Subscription's deliveries in progress to its
// maxInFlightMessages across its workers of every partition (each
// partition's consumer holds its own to it in JetStream, MaxAckPending):
// a seat is taken while the sink has the event. Nil with one partition,
// where the consumer's bound is the Subscription's.
type inFlightGate chan struct{}

// tryEnter takes a seat if one is free, and reports whether it did; a
// nil gate always has one.
func (g inFlightGate) tryEnter() bool {
	if g == nil {
		return true
	}
	select {
	case g <- struct{}{}:
		return true
	default:
		return false
	}
}

// enter takes a seat, waiting while every one is taken; it reports false,
// having taken none, when ctx ends first.
func (g inFlightGate) enter(ctx context.Context) bool {
	select {
	case g <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// leave gives back the seat enter took.
func (g inFlightGate) leave() {
	if g != nil {
		<-g
	}
}

// gateFor is the gate of the workers of target t (k, partition 0's key,
// names its Subscription): the one its workers have when they keep its
// maxInFlightMessages, so that the deliveries of the workers being
// replaced count with the new ones', else a new one. The mu is held.
func (s *Scheduler) gateFor(k key, t target) inFlightGate {
	k.partition = 0
	if old, ok := s.workers[k]; ok && old.gate != nil && cap(old.gate) == max(t.delivery.MaxInFlight, 1) {
		return old.gate
	}
	return make(inFlightGate, max(t.delivery.MaxInFlight, 1))
}

// Remove stops serving the Subscription and forgets its counts and
// metrics. Deliveries in progress finish.
func (s *Scheduler) Remove(namespace, name string) {
	s.mu.Lock()
	var stop []*worker
	for k, w := range s.workers {
		if k.namespace == namespace && k.name == name {
			stop = append(stop, w)
			delete(s.workers, k)
		}
	}
	s.mu.Unlock()
	for _, w := range stop {
		w.stop()
	}
	if len(stop) > 0 {
		s.parts.Recorder.Forget(namespace, name)
	}
}

// Serving reports whether the Subscription is being served: its events
// delivered (not only held while its spec is invalid).
func (s *Scheduler) Serving(namespace, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.workers[key{namespace, name, 0}]
	return ok && w.target.invalid == nil
}

// Holding reports whether the Subscription's events are held, not
// delivered, because its spec cannot be served (see Upsert).
func (s *Scheduler) Holding(namespace, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.workers[key{namespace, name, 0}]
	return ok && w.target.invalid != nil
}

// Served is a Subscription the Scheduler serves, as its metrics name it:
// its consumer, and its maxBacklog held to its namespace's total.
type Served struct {
	Namespace, Name, Consumer string
	MaxBacklog                int
}

// Served returns the Subscriptions served, by consumer, and whether Run
// runs.
func (s *Scheduler) Served() (running bool, served map[string]Served) {
	s.mu.Lock()
	defer s.mu.Unlock()
	served = make(map[string]Served, len(s.workers))
	for _, w := range s.workers {
		t := w.target
		served[t.consumer] = Served{
			Namespace: t.sub.Namespace, Name: t.sub.Name, Consumer: t.consumer,
			MaxBacklog: min(t.delivery.MaxBacklog, s.cfg.Budget.NamespaceMaxBacklog),
		}
	}
	return s.start != nil, served
}

// Run serves the Subscriptions until ctx is done, then stops pulling and
// waits for the deliveries in progress, at most Config.ShutdownGrace (the
// dispatcher's Start). It may be called once.
func (s *Scheduler) Run(ctx context.Context) error {
	p, err := s.begin(ctx)
	if err != nil {
		return err
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.holdBudgets(ctx) }()
	go func() { defer s.wg.Done(); s.followPartitions(ctx) }()
	<-ctx.Done()
	p.Stop() // events on their way come again after the ack wait
	stopped := make(chan struct{})
	go func() { s.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(s.cfg.ShutdownGrace):
		// Deliveries still in flight end now; their events come again
		// after the ack wait, to this or another replica.
		s.parts.Sender.EndRequests()
		<-stopped
	}
	<-p.Closed()
	s.parts.Sender.EndRequests() // no delivery is in flight any more
	return nil
}

// begin starts the puller and the workers of the Subscriptions upserted
// so far, and has Upsert start the others, within ctx.
func (s *Scheduler) begin(ctx context.Context) (*pull.Puller, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start != nil {
		return nil, errors.New("dispatcher already started")
	}
	p, err := pull.Start(s.js.Conn(), pull.Config{
		Stream: s.cfg.Streams.EventStream, Expiry: s.cfg.PullExpiry,
		MaxHeldBytes: s.cfg.MaxHeldBytes, MaxHeldBytesPerPull: s.cfg.MaxHeldBytesPerSubscription,
		MaxStreamingPerGroup: s.cfg.StreamingPerNamespace, Turn: s.cfg.ConsumerTurn,
	})
	if err != nil {
		return nil, err
	}
	s.puller = p
	s.start = func(w *worker) { s.startLocked(ctx, w) }
	for _, w := range s.workers {
		s.start(w)
	}
	return p, nil
}

// startLocked starts w within ctx: it joins its namespace's slots, adds
// its pull and runs. The mu is held.
func (s *Scheduler) startLocked(ctx context.Context, w *worker) {
	ctx, w.cancel = context.WithCancel(ctx)
	w.init(ctx)
	w.space = s.slots.Join(w.target.sub.Namespace)
	priority := ""
	if w.order != nil {
		priority = stream.PriorityGroup // one replica at a time (order.go)
	}
	w.pl = s.puller.AddIn(w.target.stream, w.target.sub.Namespace, w.target.consumer, priority, w.target.delivery.AckPending(), w)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(w.done)
		w.run(ctx)
	}()
}

// Unpulled is a Subscription's worker that no puller feeds and that
// never runs: events are handed to it with Deliver. It measures what a
// delivery costs the dispatcher without JetStream (BenchmarkDeliver).
type Unpulled struct{ w *worker }

// Unpulled returns a worker of sub, handed its events with Deliver.
func (s *Scheduler) Unpulled(sub *v1alpha2.Subscription) (*Unpulled, error) {
	t, err := newTarget(sub, s.cfg.Defaults)
	if err != nil {
		return nil, err
	}
	w := &worker{s: s, target: t.in(s.cfg.Streams, 0), done: make(chan struct{})}
	w.init(context.Background())
	return &Unpulled{w: w}, nil
}

// Deliver delivers m on one of the Scheduler's goroutines, outside the
// delivery slots (Handle), then calls done.
func (u *Unpulled) Deliver(m *pull.Msg, done func()) {
	w := u.w
	if !w.startBusy() {
		return
	}
	w.s.goroutines.Go(pull.TaskFunc(func() {
		w.Handle(m)
		done()
	}))
}

// Wait waits for the deliveries Deliver started.
func (u *Unpulled) Wait() { u.w.busy.Wait() }
