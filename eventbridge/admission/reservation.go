package admission

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kfn-dev/kfn/internal/auth"
)

// Reservation keeps a source for the senders of some namespaces: an event
// routed by Source (its route source: the application of the publisher's
// /{app}/... paths, or its own source), or of a legacy type naming Source
// as its application, and whose type (after the application, for a legacy
// type) starts with TypePrefix when set, is taken only from a sender of
// one of Namespaces (a ServiceAccount of one of them at the publisher, a
// Subscription of one of them for a sink's reply). Events of sources no
// Reservation names are taken from anyone, as Kyma takes them.
type Reservation struct {
	Source     string
	TypePrefix string
	Namespaces []string
}

// ParseReservation reads SOURCE[:TYPEPREFIX]=NAMESPACE[,NAMESPACE...], the
// form of the event bridge's -reserve-source flag. The error wraps
// ErrInvalidPolicy.
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
		return Reservation{}, fmt.Errorf("%w: reservation %q: want SOURCE[:TYPEPREFIX]=NAMESPACE[,NAMESPACE...]: %w", ErrInvalidPolicy, s, err)
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
