package eventpath

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
)

// DefaultStepsSubject is the core NATS subject on which each event bridge
// replica tells the others the delivery steps its dispatcher took.
const DefaultStepsSubject = "kfn.eventbridge.paths"

// Bounds of what the replicas tell each other.
const (
	// stepsInterval is how often a replica sends the steps it took.
	stepsInterval = 100 * time.Millisecond
	// maxStepsPerReport bounds one report; a replica with more sends
	// several.
	maxStepsPerReport = 256
	// maxQueuedSteps bounds the steps waiting to be sent: past it (NATS
	// slower than the deliveries) the others miss some, never this
	// replica's memory.
	maxQueuedSteps = 16 * maxStepsPerReport
	// maxStepText bounds a step's error text as it is told.
	maxStepText = 1024
	// maxStepRefs bounds the names a told step holds together (the
	// event's id, source and type, its trace context, the sink; the
	// reply's): well above what the publisher stores.
	maxStepRefs = 8 << 10
)

// stepsReport is one replica's steps as they go on the subject (JSON).
type stepsReport struct {
	Replica string            `json:"replica"`
	Steps   []dispatcher.Step `json:"steps"`
}

// Replicas makes the paths of Namespaces the same on every event bridge
// replica: each dispatcher delivers some of the events, and a caller
// reaches one replica. Used as the dispatcher's Observer, it records each
// step and tells it to the other replicas (batched, on a core NATS
// subject), and records theirs (Run). What NATS loses on the way is missing
// on the other replicas only.
type Replicas struct {
	n       *Namespaces
	nc      *nats.Conn
	subject string
	replica string
	log     *slog.Logger

	mu      sync.Mutex
	queue   []dispatcher.Step
	dropped int
}

var _ dispatcher.Observer = (*Replicas)(nil)

// NewReplicas returns a Replicas of n over nc on subject
// (DefaultStepsSubject when empty), logging to log (nil discards).
func NewReplicas(n *Namespaces, nc *nats.Conn, subject string, log *slog.Logger) (*Replicas, error) {
	if n == nil || nc == nil {
		return nil, errors.New("eventpath: Replicas needs the Namespaces and a NATS connection")
	}
	if subject == "" {
		subject = DefaultStepsSubject
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Replicas{n: n, nc: nc, subject: subject, replica: rand.Text(), log: log}, nil
}

// Observe records s and queues it for the other replicas; it implements
// dispatcher.Observer.
func (r *Replicas) Observe(s dispatcher.Step) {
	r.n.Observe(s)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) >= maxQueuedSteps {
		r.dropped++
		return
	}
	if len(s.Error) > maxStepText {
		s.Error = s.Error[:maxStepText]
	}
	r.queue = append(r.queue, s)
}

// Run records the other replicas' steps and sends this one's every
// stepsInterval until ctx ends. The error is the failure to subscribe.
func (r *Replicas) Run(ctx context.Context) error {
	sub, err := r.nc.Subscribe(r.subject, r.receive)
	if err != nil {
		return fmt.Errorf("subscribe to %s: %w", r.subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	tick := time.NewTicker(stepsInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			r.send()
		}
	}
}

// send publishes the queued steps, maxStepsPerReport a report.
func (r *Replicas) send() {
	r.mu.Lock()
	steps, dropped := r.queue, r.dropped
	r.queue, r.dropped = nil, 0
	r.mu.Unlock()
	if dropped > 0 {
		r.log.Warn("delivery steps not told to the other replicas: NATS did not keep up", "steps", dropped)
	}
	for len(steps) > 0 {
		n := min(len(steps), maxStepsPerReport)
		data, err := json.Marshal(stepsReport{Replica: r.replica, Steps: steps[:n]})
		steps = steps[n:]
		if err == nil {
			err = r.nc.Publish(r.subject, data)
		}
		if err != nil {
			r.log.Warn("telling the other replicas the delivery steps failed", "subject", r.subject, "error", err)
			return
		}
	}
}

// receive records another replica's steps; its own and invalid reports
// are skipped.
func (r *Replicas) receive(m *nats.Msg) {
	rep, err := decodeSteps(m.Data)
	if err != nil {
		r.log.Warn("dropping a report of delivery steps", "subject", m.Subject, "error", err)
		return
	}
	if rep.Replica == r.replica {
		return
	}
	for _, s := range rep.Steps {
		r.n.Observe(s)
	}
}

// decodeSteps parses and checks a report: a replica's name, at most
// maxStepsPerReport steps, each of a Subscription (namespace and name
// valid), its error text within maxStepText.
func decodeSteps(data []byte) (stepsReport, error) {
	var rep stepsReport
	if err := json.Unmarshal(data, &rep); err != nil {
		return stepsReport{}, fmt.Errorf("invalid report: %w", err)
	}
	switch {
	case rep.Replica == "" || len(rep.Replica) > 64:
		return stepsReport{}, errors.New("invalid report: a replica name of 1 to 64 bytes is required")
	case len(rep.Steps) > maxStepsPerReport:
		return stepsReport{}, fmt.Errorf("invalid report: %d steps, more than %d", len(rep.Steps), maxStepsPerReport)
	}
	for _, s := range rep.Steps {
		if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
			return stepsReport{}, fmt.Errorf("invalid report: namespace %.70q: %s", s.Namespace, errs[0])
		}
		if errs := validation.IsDNS1123Subdomain(s.Subscription); len(errs) > 0 {
			return stepsReport{}, fmt.Errorf("invalid report: Subscription %.70q: %s", s.Subscription, errs[0])
		}
		if len(s.Event.ID)+len(s.Event.Source)+len(s.Event.Type)+len(s.TraceParent)+len(s.SinkNamespace)+len(s.SinkService) > maxStepRefs ||
			s.Reply != nil && len(s.Reply.ID)+len(s.Reply.Source)+len(s.Reply.Type) > maxStepRefs {
			return stepsReport{}, fmt.Errorf("invalid report: a step's event, sink or reply over %d bytes", maxStepRefs)
		}
		if len(s.Error) > maxStepText {
			return stepsReport{}, fmt.Errorf("invalid report: an error text of %d bytes, more than %d", len(s.Error), maxStepText)
		}
	}
	return rep, nil
}
