package publisher

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/auth"
)

// SenderExtension is the CloudEvent extension the publisher sets to the
// namespace of the ServiceAccount that sent an event, when a Senders knows
// it (WithSenders; a Function's host sends its pod's identity token). A
// publish that sets it itself is refused (400) whether or not the
// publisher knows senders, so that a subscriber may trust it.
const SenderExtension = "kfnsendernamespace"

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

// stamp refuses an event in its stored form h, routed by route ("" its
// own source), that names a sender itself or whose source is reserved to
// other senders, and records sender in it when known.
func (p *Publisher) stamp(h nats.Header, route, sender string) error {
	if _, ok := h[eventstore.HeaderPrefix+SenderExtension]; ok {
		return fmt.Errorf("%w: the extension %s is set by kfn's publisher only", eventstore.ErrInvalidEvent, SenderExtension)
	}
	if len(p.cfg.Reserved) > 0 { // the hot path without reservations reads no attribute
		if err := p.reservedFor(h, route, sender); err != nil {
			return err
		}
	}
	if sender != "" {
		h[eventstore.HeaderPrefix+SenderExtension] = []string{sender}
	}
	return nil
}

// reservedFor checks the event in its stored form h, routed by route, sent
// from namespace sender, against the reservations.
func (p *Publisher) reservedFor(h nats.Header, route, sender string) error {
	source, eventType := cmp.Or(route, eventstore.Attribute(h, "source")), eventstore.Attribute(h, "type")
	if err := reserved(p.cfg.Reserved, source, eventType, sender); err != nil {
		return err
	}
	// A legacy type names its application, which legacy Subscriptions
	// match: it is held to the application's reservations too.
	if app, rest, ok := p.legacyApp(eventType); ok && app != source {
		if err := reserved(p.cfg.Reserved, app, rest, sender); err != nil {
			return err
		}
	}
	return nil
}

// legacyApp is the application a legacy type names and the rest of the
// type.
func (p *Publisher) legacyApp(eventType string) (app, rest string, ok bool) {
	if !strings.HasPrefix(eventType, p.cfg.LegacyPrefix+".") {
		return "", "", false
	}
	app, event, version, err := v1alpha2.ParseLegacyEventType(p.cfg.LegacyPrefix, eventType)
	return app, event + "." + version, err == nil
}

// Reservation keeps a source for the senders of some namespaces: an event
// routed by Source (its route source: the application of /{app}/...
// paths, or its own source), or of a legacy type naming Source as its
// application, and whose type (after the application, for a legacy type)
// starts with TypePrefix when set, is taken only from a ServiceAccount of
// one of Namespaces (401 without a sender, 403 from another namespace).
// Events of sources no Reservation names are taken from anyone, as Kyma
// takes them.
type Reservation struct {
	Source     string
	TypePrefix string
	Namespaces []string
}

// ParseReservation reads SOURCE[:TYPEPREFIX]=NAMESPACE[,NAMESPACE...], the
// form of the event bridge's -reserve-source flag.
func ParseReservation(s string) (Reservation, error) {
	what, namespaces, ok := strings.Cut(s, "=")
	source, prefix, _ := strings.Cut(what, ":")
	r := Reservation{Source: source, TypePrefix: prefix}
	if ok {
		for _, ns := range strings.Split(namespaces, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				r.Namespaces = append(r.Namespaces, ns)
			}
		}
	}
	if err := r.validate(); err != nil {
		return Reservation{}, fmt.Errorf("%w: reservation %q: want SOURCE[:TYPEPREFIX]=NAMESPACE[,NAMESPACE...]: %w", ErrInvalidOption, s, err)
	}
	return r, nil
}

func (r Reservation) validate() error {
	switch {
	case r.Source == "":
		return errors.New("no source")
	case len(r.Namespaces) == 0:
		return errors.New("no namespace")
	}
	for _, ns := range r.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
		}
	}
	return nil
}

// reserved checks an event of eventType from source (its route source)
// sent from namespace sender ("" unknown) against the reservations.
func reserved(rs []Reservation, source, eventType, sender string) error {
	var allowed []string
	for _, r := range rs {
		if r.Source == source && strings.HasPrefix(eventType, r.TypePrefix) {
			allowed = append(allowed, r.Namespaces...)
		}
	}
	switch {
	case allowed == nil || slices.Contains(allowed, sender):
		return nil
	case sender == "":
		return fmt.Errorf("%w: events of source %s and type %s are reserved to namespaces %s: send a ServiceAccount token of one of them", auth.ErrUnauthenticated, source, eventType, strings.Join(allowed, ", "))
	default:
		return fmt.Errorf("%w: events of source %s and type %s are reserved to namespaces %s, not %s", ErrReserved, source, eventType, strings.Join(allowed, ", "), sender)
	}
}

// ErrReserved is wrapped by the refusal (403) of an event whose source a
// Reservation keeps for other namespaces.
var ErrReserved = errors.New("reserved")
