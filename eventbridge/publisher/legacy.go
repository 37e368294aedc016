package publisher

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// LegacyRequest is the body of Kyma's POST /{app}/v1/events.
type LegacyRequest struct {
	EventType        string          `json:"event-type,omitempty"`
	EventTypeVersion string          `json:"event-type-version,omitempty"`
	EventID          string          `json:"event-id,omitempty"`
	EventTime        string          `json:"event-time,omitempty"`
	Data             json.RawMessage `json:"data,omitempty"`
}

// LegacyResponse is the body of a successful legacy publish (200).
type LegacyResponse struct {
	EventID string `json:"event-id,omitempty"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
}

// LegacyError is the body of a failed legacy publish, Kyma's APIError.
type LegacyError struct {
	Status   int                 `json:"status,omitempty"`
	Type     string              `json:"type,omitempty"`
	Message  string              `json:"message,omitempty"`
	MoreInfo string              `json:"moreInfo,omitempty"`
	Details  []LegacyErrorDetail `json:"details,omitempty"`
}

// LegacyErrorDetail names the field a LegacyError is about.
type LegacyErrorDetail struct {
	Field    string `json:"field,omitempty"`
	Type     string `json:"type,omitempty"`
	Message  string `json:"message,omitempty"`
	MoreInfo string `json:"moreInfo,omitempty"`
}

// Kyma's legacy error types and messages.
const (
	legacyTypeBadPayload          = "bad_payload_syntax"
	legacyTypeRequestBodyTooLarge = "request_body_too_large"
	legacyTypeValidationViolation = "validation_violation"
	legacyTypeMissingField        = "missing_field"
	legacyTypeInvalidField        = "invalid_field"
	legacyMessageBadPayload       = "Bad payload syntax"
	legacyMessageTooLarge         = "Request body too large"
	legacyMessageMissingField     = "Missing field"
	legacyMessageInvalidField     = "Invalid field"
)

var (
	// Kyma matches this unanchored: a version needs one letter or digit.
	legacyVersion = regexp.MustCompile(`[a-zA-Z0-9]+`)
	legacyEventID = regexp.MustCompile(`^[a-fA-F0-9]{8}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{12}$`)
	nonAlnumDot   = regexp.MustCompile(`[^a-zA-Z0-9.]+`)
)

func newUUID() string { return uuid.NewString() }

func legacyBadPayload(moreInfo string) *LegacyError {
	return &LegacyError{Status: http.StatusBadRequest, Type: legacyTypeBadPayload, Message: legacyMessageBadPayload, MoreInfo: moreInfo}
}

func legacyFieldError(field string, missing bool) *LegacyError {
	typ, msg := legacyTypeInvalidField, legacyMessageInvalidField
	if missing {
		typ, msg = legacyTypeMissingField, legacyMessageMissingField
	}
	return &LegacyError{
		Status:  http.StatusBadRequest,
		Type:    legacyTypeValidationViolation,
		Message: msg,
		Details: []LegacyErrorDetail{{Field: field, Type: typ, Message: msg}},
	}
}

// ValidateLegacy checks a legacy request as Kyma does, in Kyma's order, and
// returns the error body to answer with, or nil.
func ValidateLegacy(req *LegacyRequest) *LegacyError {
	switch {
	case req.EventType == "":
		return legacyFieldError("event-type", true)
	case req.EventTypeVersion == "":
		return legacyFieldError("event-type-version", true)
	case !legacyVersion.MatchString(req.EventTypeVersion):
		return legacyFieldError("event-type-version", false)
	case req.EventTime == "":
		return legacyFieldError("event-time", true)
	}
	if _, err := time.Parse(time.RFC3339, req.EventTime); err != nil {
		return legacyFieldError("event-time", false)
	}
	if req.EventID != "" && !legacyEventID.MatchString(req.EventID) {
		return legacyFieldError("event-id", false)
	}
	data := bytes.TrimSpace(req.Data)
	if len(data) == 0 || string(data) == "null" || string(data) == `""` {
		return legacyFieldError("data", true)
	}
	return nil
}

// legacyEvents builds the two CloudEvents Kyma makes of a legacy request,
// with the source each is routed by ("" for its own): one for standard
// matching (source: the application, type: <event-type>.<version>, routed
// by the Application's type when an Application of that name has one) and
// one for exact matching (source: LegacySource, type: <prefix>.<clean app
// or its type>.<businessobject>.<operation>.<version>). Both have the same
// id, time and eventtypeversion; the standard one has the extension
// OriginalTypeExtension too, as in Kyma.
func (p *Publisher) legacyEvents(app string, req *LegacyRequest) ([]event.Event, []string, error) {
	t, err := time.Parse(time.RFC3339, req.EventTime)
	if err != nil {
		return nil, nil, err
	}
	id := req.EventID
	if id == "" {
		id = p.newID()
	}
	mk := func(source, typ string) (event.Event, error) {
		e := event.New(event.CloudEventsVersionV1)
		e.SetID(id)
		e.SetSource(source)
		e.SetType(typ)
		e.SetTime(t)
		e.SetExtension("eventtypeversion", req.EventTypeVersion)
		e.SetDataContentType(event.ApplicationJSON)
		e.DataEncoded = []byte(req.Data)
		return e, e.Validate()
	}
	standard, err := mk(app, req.EventType+"."+req.EventTypeVersion)
	if err != nil {
		return nil, nil, err
	}
	// Kyma builds the standard copy as a CloudEvent published with that
	// type; the exact copy is not built so and has no original type.
	standard.SetExtension(OriginalTypeExtension, standard.Type())
	appType, found := p.applicationType(app)
	route, exactApp := "", app
	if found {
		route, exactApp = appType, appType
	}
	exactType := v1alpha2.LegacyEventType(p.cfg.LegacyPrefix, exactApp, combineSegments(nonAlnumDot.ReplaceAllString(req.EventType, "")), req.EventTypeVersion)
	exact, err := mk(p.cfg.LegacySource, exactType)
	if err != nil {
		return nil, nil, err
	}
	events := []event.Event{standard, exact}
	routes := []string{route, ""}
	for i := range events {
		if err := checkSubject(cmp.Or(routes[i], events[i].Source()), events[i].Type()); err != nil {
			return nil, nil, err
		}
	}
	return events, routes, nil
}

// combineSegments joins all but the last dot-separated segment of an event
// name into one: Account.Order.Created -> AccountOrder.Created.
func combineSegments(name string) string {
	parts := strings.Split(name, ".")
	if len(parts) < 2 {
		return name
	}
	return strings.Join(parts[:len(parts)-1], "") + "." + parts[len(parts)-1]
}

// serveLegacy serves /{app}/v1/events and returns the status it answered.
func (p *Publisher) serveLegacy(w http.ResponseWriter, r *http.Request) int {
	app := r.PathValue("app")
	sender, err := p.sender(r)
	if err != nil {
		return p.legacyFail(w, r, &LegacyError{Status: http.StatusUnauthorized, Message: err.Error()})
	}
	if err := p.publishing.enter(sender); err != nil {
		return p.legacyFail(w, r, &LegacyError{Status: http.StatusTooManyRequests, Message: err.Error()})
	}
	defer p.publishing.leave(sender)
	body, err := p.readBody(w, r, sender)
	if errors.Is(err, errTooLarge) {
		return p.legacyFail(w, r, &LegacyError{Status: http.StatusRequestEntityTooLarge, Type: legacyTypeRequestBodyTooLarge, Message: legacyMessageTooLarge, MoreInfo: err.Error()})
	}
	if err != nil {
		return p.legacyFail(w, r, legacyBadPayload(err.Error()))
	}
	if err := p.takeTurn(r, sender); err != nil {
		return p.legacyFail(w, r, &LegacyError{Status: StatusCode(err), Message: err.Error()})
	}
	defer p.giveTurn(sender)
	if len(bytes.TrimSpace(body)) == 0 {
		return p.legacyFail(w, r, legacyBadPayload(legacyMessageBadPayload))
	}
	var req LegacyRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return p.legacyFail(w, r, legacyBadPayload(err.Error()))
	}
	if e := ValidateLegacy(&req); e != nil {
		return p.legacyFail(w, r, e)
	}
	events, routes, err := p.legacyEvents(app, &req)
	if err != nil {
		return p.legacyFail(w, r, legacyBadPayload(err.Error()))
	}
	annotate(r, events[:1]) // the second is the same event for exact matching
	tp, ts := p.traceContext(r)
	stored, err := p.encode(events, routes, tp, ts, sender)
	if err == nil {
		err = p.rates.Take(sender, len(stored))
	}
	if err == nil {
		err = p.storeAll(r.Context(), stored)
	}
	if err != nil {
		return p.legacyFail(w, r, &LegacyError{Status: StatusCode(err), Message: err.Error()})
	}
	writeJSON(w, http.StatusOK, LegacyResponse{EventID: events[0].ID()})
	return http.StatusOK
}

// legacyFail answers a legacy request with e, as Kyma's JSON error; a 503 or
// a 429 says when to try again, as fail's does.
func (p *Publisher) legacyFail(w http.ResponseWriter, r *http.Request, e *LegacyError) int {
	p.logFailure(r, e.Status, errors.New(e.Message+" "+e.MoreInfo))
	if e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, e)
	return e.Status
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}

// SubscribedEvent is one entry of GET /{app}/v1/events/subscribed.
type SubscribedEvent struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// SubscribedEvents is the body of GET /{app}/v1/events/subscribed.
type SubscribedEvents struct {
	EventsInfo []SubscribedEvent `json:"eventsInfo"`
}

// subscribedIndex is what GET /{app}/v1/events/subscribed answers from,
// made once per list of the Subscriptions: their types by application, so
// that an answer costs a look at the types that can be the application's,
// not at every Subscription's. It holds one entry per type, as the list
// does: an exact type <prefix>.<app>.<name>.<version> is kept under the
// first part after the prefix, since app may hold dots (a.b.order.created.v1
// is both application a's b.order.created and application a.b's
// order.created), and indexing it under every reading would make a
// Subscription's 64 types of 512 characters 16,000 entries.
type subscribedIndex struct {
	// standard holds the types of standard Subscriptions by source.
	standard map[string][]string
	// exact holds, by the first part after <prefix>., what follows it
	// in exact Subscriptions' types.
	exact map[string][]string
}

// subscribedByApp indexes subs' types for subscribedIndex.events.
func subscribedByApp(prefix string, subs []v1alpha2.Subscription) subscribedIndex {
	x := subscribedIndex{standard: map[string][]string{}, exact: map[string][]string{}}
	for i := range subs {
		s := &subs[i]
		for _, t := range s.Spec.Types {
			switch s.Matching() {
			case v1alpha2.TypeMatchingStandard:
				x.standard[s.Spec.Source] = append(x.standard[s.Spec.Source], t)
			case v1alpha2.TypeMatchingExact:
				if rest, ok := strings.CutPrefix(t, prefix+"."); ok {
					if first, after, ok := strings.Cut(rest, "."); ok {
						x.exact[first] = append(x.exact[first], after)
					}
				}
			}
		}
	}
	return x
}

// events lists, as Kyma does, the legacy events of application app that
// some Subscription asks for: standard Subscriptions whose source is app,
// and exact ones whose types start with <prefix>.<app>. The result is
// sorted and de-duplicated; nil when there is none.
func (x subscribedIndex) events(app string) []SubscribedEvent {
	var out []SubscribedEvent
	add := func(t string) {
		if i := strings.LastIndex(t, "."); i > 0 {
			out = append(out, SubscribedEvent{Name: t[:i], Version: t[i+1:]})
		}
	}
	for _, t := range x.standard[app] {
		add(t)
	}
	first, more, dotted := strings.Cut(app, ".")
	for _, t := range x.exact[first] {
		if !dotted {
			add(t)
		} else if t, ok := strings.CutPrefix(t, more+"."); ok {
			add(t)
		}
	}
	slices.SortFunc(out, SubscribedEvent.compare)
	return slices.Compact(out)
}

// compare orders events by name, then version.
func (e SubscribedEvent) compare(o SubscribedEvent) int {
	if c := strings.Compare(e.Name, o.Name); c != 0 {
		return c
	}
	return strings.Compare(e.Version, o.Version)
}
