package eventstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
)

// Header names of a stored event. Attributes are stored as in the CloudEvents
// HTTP binary mode, so delivering an event copies headers.
const (
	HeaderPrefix      = "ce-"
	HeaderContentType = "Content-Type"
	// HeaderTraceParent and HeaderTraceState carry the publisher's W3C trace
	// context to the sink.
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
	// HeaderBaggage carries the W3C baggage of the publishing request to
	// the sink (stored when the event bridge traces, see Store).
	HeaderBaggage = "baggage"
)

// HeaderRouteSource holds the source an event is routed by when it is not
// the event's own: Kyma's publisher routes an event whose source names a
// Kyma Application by that Application's application-type label, while
// the subscriber still sees the event's source. It is kfn's, not an
// attribute: CopyToHTTP does not deliver it.
const HeaderRouteSource = "Kfn-Route-Source"

// OriginalTypeExtension is the CloudEvents extension that holds the type
// an event was published with. Kyma's publisher sets it on every event
// whose type does not have the legacy prefix (overwriting one the
// producer set), its dispatcher delivers the event with that type and the
// extension, and so does kfn's publisher: a subscriber reads
// ce-originaltype as on Kyma. Holding a copy of the type, it is not
// counted in the bounds of CheckAttributes.
const OriginalTypeExtension = "originaltype"

// HopsExtension is the CloudEvents extension that counts how many sinks
// an event passed through as a reply: an event a sink answers with gets
// the hops of the event it answered plus one.
const HopsExtension = "kfnhops"

// SenderExtension is the CloudEvents extension that names the namespace
// an event was sent from: the event bridge sets it (package admission) on
// the events of a publisher that knows its senders and on sinks' replies,
// and refuses an event that sets it itself, so that a subscriber may
// trust it. MsgID scopes de-duplication by it.
const SenderExtension = "kfnsendernamespace"

// ErrInvalidEvent is wrapped by every error about an event that cannot be
// stored: invalid CloudEvent, a type or source that maps to no subject, an
// attribute value that cannot travel in a header.
var ErrInvalidEvent = errors.New("invalid event")

// MsgID returns the JetStream message id of an event: its sender's
// namespace (SenderExtension), source and id, so that JetStream stores
// once what one sender sends again within the de-duplication window
// (Kyma's idempotent publish), while the same source and id from another
// namespace is another event: one tenant cannot suppress another's events
// by sending their ids first. Without a sender it is the source and id,
// length-prefixed, as it was before replies and publishes were scoped
// by sender; with one, "<sender>/" before that. No two
// (sender, source, id) share a message id: a namespace has no "/" and a
// sender-less id has ":" after its leading digits.
func MsgID(sender, source, id string) string {
	unscoped := strconv.Itoa(len(source)) + ":" + source + id
	if sender == "" {
		return unscoped
	}
	return sender + "/" + unscoped
}

// Event is an event in its stored form, the one every path that stores an
// event hands the Store (Put): its CloudEvents attributes and extensions
// as ce-* headers (as the CloudEvents HTTP binary mode has them, so that
// delivering it copies headers) beside its data, its content type, the
// W3C trace context of the request that carried it, and what the event
// bridge records with it: the namespace that sent it (SetSender), its hop
// count (SetHops), the source it is routed by (SetRoute). Encode makes one
// of a CloudEvent, EncodeBinary of a binary-mode request, Restore of a
// message stored before; only this package writes its headers.
//
// The zero Event is no event. An Event is a small value: its copies share
// the headers, which its methods change in place.
type Event struct {
	h     nats.Header
	data  []byte
	route string
	// subject and msgID are those of a Restored message; "" for a new
	// event, whose subject and message id follow from its attributes.
	subject, msgID string
}

// Restore returns a message stored before, as it is to be stored again
// (a dead letter, the event and its failure; a replayed one): Put stores
// it as it is, on msg.Subject under message id msgID, checked only against
// what NATS would close the connection for (see Put).
func Restore(msg *nats.Msg, msgID string) Event {
	return Event{h: msg.Header, data: msg.Data, subject: msg.Subject, msgID: msgID}
}

// Encode returns the stored form of a valid CloudEvent. traceParent and
// traceState, when not empty, are the W3C trace context of the request
// that carried it; the event's own traceparent extension, when it has
// one, is kept instead. The error wraps ErrInvalidEvent.
func Encode(e *event.Event, traceParent, traceState string) (Event, error) {
	if err := e.Validate(); err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	ext := e.Extensions()
	h := make(nats.Header, 10+len(ext))
	// One array holds every value: a header's value is a slice of it.
	values := make([]string, 0, 10+len(ext))
	set := func(key, value string) error {
		if i := strings.IndexFunc(value, isControl); i >= 0 {
			return fmt.Errorf("%w: attribute %s contains a control character at byte %d", ErrInvalidEvent, strings.TrimPrefix(key, HeaderPrefix), i)
		}
		values = append(values, value)
		h[key] = values[len(values)-1 : len(values) : len(values)]
		return nil
	}
	attrs := [...]struct{ key, value string }{
		{HeaderPrefix + "specversion", e.SpecVersion()},
		{HeaderPrefix + "id", e.ID()},
		{HeaderPrefix + "source", e.Source()},
		{HeaderPrefix + "type", e.Type()},
		{HeaderPrefix + "subject", e.Subject()},
		{HeaderPrefix + "dataschema", e.DataSchema()},
		{HeaderPrefix + "time", ""},
	}
	if !e.Time().IsZero() {
		attrs[len(attrs)-1].value = types.FormatTime(e.Time())
	}
	for _, a := range attrs {
		if a.value == "" {
			continue
		}
		if err := set(a.key, a.value); err != nil {
			return Event{}, err
		}
	}
	for name, v := range ext {
		s, err := types.Format(v)
		if err != nil {
			return Event{}, fmt.Errorf("%w: extension %s: %w", ErrInvalidEvent, name, err)
		}
		if err := set(HeaderPrefix+name, s); err != nil {
			return Event{}, err
		}
	}
	if ct := e.DataContentType(); ct != "" {
		if strings.IndexFunc(ct, isControl) >= 0 {
			return Event{}, fmt.Errorf("%w: datacontenttype contains a control character", ErrInvalidEvent)
		}
		_ = set(HeaderContentType, ct)
	}
	if _, ok := ext[HeaderTraceParent]; !ok && storableTraceParent(traceParent) {
		_ = set(HeaderTraceParent, traceParent)
		if storableTraceState(traceState) {
			_ = set(HeaderTraceState, traceState)
		}
	}
	return Event{h: h, data: e.Data()}, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// storableTraceParent and storableTraceState report whether a request's
// trace context is stored with its event: not empty, within its bound and
// without control characters. One that is not is left out, and the event
// goes on without it.
func storableTraceParent(v string) bool {
	return v != "" && len(v) <= MaxTraceParentLength && strings.IndexFunc(v, isControl) < 0
}

func storableTraceState(v string) bool {
	return v != "" && len(v) <= MaxTraceStateLength && strings.IndexFunc(v, isControl) < 0
}
