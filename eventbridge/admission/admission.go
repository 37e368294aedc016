package admission

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// DefaultMaxHops is the default Policy.MaxHops.
const DefaultMaxHops = 16

// Errors of Admit besides eventstore.ErrInvalidEvent and
// auth.ErrUnauthenticated.
var (
	// ErrReserved: the event's source is reserved to other namespaces
	// (403 at the publisher).
	ErrReserved = errors.New("reserved")
	// ErrHopLimit: the event is further down a chain of events than
	// Policy.MaxHops allows. Admit's error wraps it with
	// eventstore.ErrInvalidEvent (400 at the publisher).
	ErrHopLimit = errors.New("over the hop limit")
	// ErrInvalidPolicy is wrapped by the errors of Validate and
	// ParseReservation.
	ErrInvalidPolicy = errors.New("invalid admission policy")
)

// Policy is what every sender's events are held to. The zero value admits
// every event of at most DefaultMaxHops hops.
type Policy struct {
	// Reserved keeps sources for the senders of some namespaces (see
	// Reservation). None: anyone may send anything, Kyma's model.
	Reserved []Reservation
	// LegacyPrefix is the prefix of Kyma's legacy event types, whose
	// application is held to its reservations too. Default
	// v1alpha2.DefaultLegacyPrefix.
	LegacyPrefix string
	// MaxHops bounds chains of events (eventstore.HopsExtension): a
	// sink's reply, or an event a Function's host emits while it handles
	// another, is one hop further than the event it answers; one further
	// down a chain than MaxHops is refused. Default DefaultMaxHops.
	MaxHops int
}

// Validate says what is wrong with p, wrapping ErrInvalidPolicy.
func (p *Policy) Validate() error {
	if p.MaxHops < 0 {
		return fmt.Errorf("%w: the hop limit must not be negative", ErrInvalidPolicy)
	}
	for _, r := range p.Reserved {
		if err := r.validate(); err != nil {
			return fmt.Errorf("%w: reservation of %q: %w", ErrInvalidPolicy, r.Source, err)
		}
	}
	return nil
}

// Hops returns the hop limit, its default for 0.
func (p *Policy) Hops() int { return cmp.Or(p.MaxHops, DefaultMaxHops) }

// Admit checks an event in its stored form, routed by its route
// (eventstore.Event.SetRoute) and sent on behalf of namespace sender (""
// when unknown or no namespace's), and completes it. It refuses, with an error saying why:
//   - an event that sets eventstore.SenderExtension itself
//     (eventstore.ErrInvalidEvent): only Admit sets it, so that a
//     subscriber may trust it, and the store scopes de-duplication by it;
//   - one routed by a source, or of a legacy type naming an application,
//     reserved to other namespaces (ErrReserved, or auth.ErrUnauthenticated
//     without a sender);
//   - one whose eventstore.HopsExtension is not a decimal count of hops
//     (eventstore.ErrInvalidEvent) or is over the hop limit (ErrHopLimit
//     and eventstore.ErrInvalidEvent).
//
// It then records sender, when known, in eventstore.SenderExtension.
// Admit does not check the bounds of the store (eventstore.CheckAttributes),
// which the store applies to every event it writes.
func (p *Policy) Admit(e *eventstore.Event, sender string) error {
	if _, ok := e.Extension(eventstore.SenderExtension); ok {
		return fmt.Errorf("%w: the extension %s is set by kfn's event bridge only", eventstore.ErrInvalidEvent, eventstore.SenderExtension)
	}
	if err := p.checkHops(e); err != nil {
		return err
	}
	if len(p.Reserved) > 0 { // the hot path without reservations reads no attribute
		if err := p.reservedFor(e, sender); err != nil {
			return err
		}
	}
	if sender != "" {
		e.SetSender(sender)
	}
	return nil
}

// checkHops checks the hop count of e, when it has one, and writes it in
// its plain decimal form.
func (p *Policy) checkHops(e *eventstore.Event) error {
	v, ok := e.Extension(eventstore.HopsExtension)
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	if errors.Is(err, strconv.ErrRange) && n > 0 {
		err = nil // more hops than an int holds: over any limit
	}
	if err != nil || n < 0 {
		return fmt.Errorf("%w: the extension %s counts the events before this one in its chain and is set by kfn's hosts: want a number from 0, not %.16q", eventstore.ErrInvalidEvent, eventstore.HopsExtension, v)
	}
	if n > p.Hops() {
		return fmt.Errorf("%w: %w: the event is %d events down a chain of events (%s), at most %d are allowed: is a function answering or emitting the events it receives?", eventstore.ErrInvalidEvent, ErrHopLimit, n, eventstore.HopsExtension, p.Hops())
	}
	if strconv.Itoa(n) != v {
		e.SetHops(n)
	}
	return nil
}

// reservedFor checks the event in its stored form, sent from namespace
// sender, against the reservations.
func (p *Policy) reservedFor(e *eventstore.Event, sender string) error {
	source, eventType := e.RouteSource(), e.Attribute("type")
	if err := reserved(p.Reserved, source, eventType, sender); err != nil {
		return err
	}
	// A legacy type names its application, which legacy Subscriptions
	// match: it is held to the application's reservations too.
	if app, rest, ok := p.legacyApp(eventType); ok && app != source {
		if err := reserved(p.Reserved, app, rest, sender); err != nil {
			return err
		}
	}
	return nil
}

// legacyApp is the application a legacy type names and the rest of the
// type.
func (p *Policy) legacyApp(eventType string) (app, rest string, ok bool) {
	prefix := cmp.Or(p.LegacyPrefix, v1alpha2.DefaultLegacyPrefix)
	if !strings.HasPrefix(eventType, prefix+".") {
		return "", "", false
	}
	app, event, version, err := v1alpha2.ParseLegacyEventType(prefix, eventType)
	return app, event + "." + version, err == nil
}
