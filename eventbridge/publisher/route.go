package publisher

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// prepare validates a published event as Kyma's publisher does and
// returns the source to route it by ("" for its own). A type with the
// legacy prefix is cleaned, its application replaced by the Application's
// type when an Application of that name has one; any other event whose
// source names an Application is routed by the Application's type.
func (p *Publisher) prepare(e *event.Event) (string, error) {
	if err := e.Validate(); err != nil {
		return "", withKymaText(fmt.Errorf("%w: %w", eventstore.ErrInvalidEvent, err), err.Error())
	}
	source := e.Source()
	eventType, route, err := p.route(e.Type(), source)
	if err != nil {
		return "", err
	}
	if eventType != e.Type() {
		e.SetType(eventType)
	} else if !p.legacyType(eventType) {
		e.SetExtension(OriginalTypeExtension, eventType)
	}
	if err := checkSubject(cmp.Or(route, source), eventType); err != nil {
		return "", err
	}
	return route, nil
}

// route returns the type an event of eventType from source is stored
// with and the source to route it by ("" for its own), as Kyma's publisher
// does: a type with the legacy prefix is cleaned, its application replaced
// by the Application's type when an Application of that name has one; any
// other event whose source names an Application is routed by the
// Application's type.
func (p *Publisher) route(eventType, source string) (string, string, error) {
	if p.legacyType(eventType) {
		app, name, version, err := v1alpha2.ParseLegacyEventType(p.cfg.LegacyPrefix, eventType)
		if err != nil {
			return "", "", withKymaText(fmt.Errorf("%w: %w", eventstore.ErrInvalidEvent, err),
				fmt.Sprintf("failed to parse event-type=%s with prefix=%s: invalid format", eventType, p.cfg.LegacyPrefix))
		}
		if t, ok := p.applicationType(app); ok {
			app = t
		}
		return v1alpha2.LegacyEventType(p.cfg.LegacyPrefix, app, name, version), "", nil
	}
	route, _ := p.applicationType(source)
	return eventType, route, nil
}

// legacyType reports whether eventType has the legacy prefix: Kyma's
// publisher cleans such a type and adds no OriginalTypeExtension.
func (p *Publisher) legacyType(eventType string) bool {
	return strings.HasPrefix(eventType, p.cfg.LegacyPrefix+".")
}

// applicationType returns the application type of the Application called
// name (its application-type label, or its name), when there is one.
func (p *Publisher) applicationType(name string) (string, bool) {
	if p.apps == nil || name == "" {
		return "", false
	}
	return p.apps.TypeOrName(name)
}

// checkSubject checks that an event of eventType routed by routeSource
// maps to a subject.
func checkSubject(routeSource, eventType string) error {
	_, err := v1alpha2.EventSubject(routeSource, eventType)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("%w: %w", eventstore.ErrInvalidEvent, err)
	// Kyma's publisher names the type it built: prefix, clean source,
	// clean type (kfn's subject, but for an empty source).
	final := v1alpha2.SubjectPrefix + "." + v1alpha2.CleanSource(routeSource) + "." + v1alpha2.CleanEventType(eventType)
	if slices.Contains(strings.Split(final, "."), "") {
		return withKymaText(err, "event type cannot have empty segments after cleaning: "+final)
	}
	return err
}
