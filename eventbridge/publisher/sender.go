package publisher

import (
	"fmt"
	"net/http"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// SenderExtension is the CloudEvent extension the publisher sets to the
// namespace of the ServiceAccount that sent an event, when a Senders knows
// it (WithSenders; a Function's host sends its pod's identity token). A
// publish that sets it itself is refused (400) whether or not the
// publisher knows senders, so that a subscriber may trust it
// (eventstore.SenderExtension, package admission).
const SenderExtension = eventstore.SenderExtension

// Senders tells which namespace sends a request: that of the
// ServiceAccount whose bearer token it carries, "" for a request without
// one or from a caller that is no ServiceAccount (a user), and an error
// wrapping auth.ErrUnauthenticated for a token the cluster does not know
// (answered 401). *auth.Kubernetes implements it.
type Senders interface {
	SenderNamespace(r *http.Request) (string, error)
}

// WithSenders makes the publisher record each event's sender namespace
// (SenderExtension) as s tells it.
func WithSenders(s Senders) Option {
	return func(p *Publisher) error {
		if s == nil {
			return fmt.Errorf("%w: nil senders", ErrInvalidOption)
		}
		p.senders = s
		return nil
	}
}

// sender is the namespace that sends r ("" unknown or none).
func (p *Publisher) sender(r *http.Request) (string, error) {
	if p.senders == nil {
		return "", nil
	}
	return p.senders.SenderNamespace(r)
}

// stamp holds an event in its stored form, sent from namespace sender, to
// the admission policy (package admission: sender identity, reserved
// sources, hop limit), which records sender in it when known.
func (p *Publisher) stamp(e *eventstore.Event, sender string) error {
	return p.admission.Admit(e, sender)
}
