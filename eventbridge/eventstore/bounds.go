package eventstore

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// Bounds of a stored event, so that nothing a client sends can make NATS
// refuse it for its form or close the connection that carries it (which
// would stop every publish and delivery of the process). The subject's
// parts, the type and the source, are bounded in package v1alpha2
// (MaxEventTypeLength, MaxEventSourceLength).
//
// The budget, against JetStream's 64 KiB for a message's headers: the
// attributes (at most MaxAttributeBytes, with 4 bytes of framing each),
// the trace context (MaxTraceParentLength, MaxTraceStateLength,
// MaxBaggageLength), the route source and JetStream's own headers come to
// at most about 43 KiB, and a dead letter adds at most about 4 KiB of
// failure to that. Delivered to a sink, the attributes are HTTP headers:
// kfn's runtime hosts read 64 KiB of headers (Node.js's own default is
// 16 KiB, and Python's http.server reads 100 header lines, so a sink of
// its own on those defaults can refuse an event with 431).
const (
	// MaxIDLength bounds an event's id.
	MaxIDLength = 1024
	// MaxAttributes bounds the number of attributes of an event,
	// specification attributes and extensions together (with
	// datacontenttype), so that with HTTP's own headers a delivery stays
	// within the 100 header lines Python's http.server reads.
	MaxAttributes = 64
	// MaxExtensionNameLength bounds an extension's name (CloudEvents
	// asks for at most 20 characters; sdk-go sets no bound).
	MaxExtensionNameLength = 64
	// MaxAttributeBytes bounds the attributes of an event as headers on
	// the wire: the sum over them of name, value as delivered
	// (percent-encoded, CopyToWire: up to three bytes for each stored
	// one) and 4 bytes (": " and the line break). Bounded as stored, an
	// attribute of 32 KiB of bytes that travel encoded took 96 KiB of
	// headers, which kfn's hosts answered with 431.
	MaxAttributeBytes = 32 << 10
	// MaxTraceParentLength, MaxTraceStateLength and MaxBaggageLength
	// bound the W3C trace context stored with an event (traceparent is 55
	// bytes in version 00; W3C asks vendors to pass on 512 bytes of
	// tracestate and 8,192 of baggage). A longer one is not stored: the
	// event goes without it, as W3C lets a vendor do.
	MaxTraceParentLength = 256
	MaxTraceStateLength  = 512
	MaxBaggageLength     = 8192
	// MaxSubjectLength bounds the subject of any message the Store
	// writes, well within NATS's 4 KiB control line (see v1alpha2).
	MaxSubjectLength = 3072
	// maxHeaderBytes is JetStream's bound on a message's headers, as NATS
	// writes them (the server refuses more with error 10097).
	maxHeaderBytes = 65535
)

// CheckAttributes checks the attributes of an event in its stored form
// (its headers) against MaxIDLength,
// MaxExtensionNameLength, MaxAttributes and MaxAttributeBytes (counted
// as the dispatcher sends them, percent-encoded; an OriginalTypeExtension
// equal to the type is not counted). The error
// wraps ErrInvalidEvent for an id or a name too long and ErrTooLarge for
// too many attributes or too many bytes of them; it says which bound, and
// the number of the event.
func CheckAttributes(h nats.Header) error {
	count, size := 0, 0
	for k, v := range h {
		if len(v) == 0 {
			continue
		}
		switch {
		case strings.HasPrefix(k, HeaderPrefix):
			name := k[len(HeaderPrefix):]
			switch name {
			case "id":
				if len(v[0]) > MaxIDLength {
					return fmt.Errorf("%w: the id is %d bytes long, at most %d are allowed", ErrInvalidEvent, len(v[0]), MaxIDLength)
				}
			case "specversion", "source", "type", "subject", "time", "dataschema":
			case OriginalTypeExtension:
				if v[0] == Attribute(h, "type") {
					continue // the publisher's copy of the type, bounded with it
				}
			default:
				if len(name) > MaxExtensionNameLength {
					return fmt.Errorf("%w: extension name %.32q... is %d characters long, at most %d are allowed", ErrInvalidEvent, name, len(name), MaxExtensionNameLength)
				}
			}
		case k == HeaderContentType:
		default:
			continue
		}
		count++
		size += len(k) + len(v[0]) + 4
		if k != HeaderContentType {
			size += 2 * encoded(v[0]) // CopyToWire's %XY for each such byte
		}
	}
	if count > MaxAttributes {
		return fmt.Errorf("%w: the event has %d attributes, at most %d are allowed", ErrTooLarge, count, MaxAttributes)
	}
	if size > MaxAttributeBytes {
		return fmt.Errorf("%w: the event's attributes take %d bytes as headers (percent-encoded, as they are delivered), at most %d are allowed", ErrTooLarge, size, MaxAttributeBytes)
	}
	return nil
}

// checkMsg is the last check before a message goes to NATS, whatever
// wrote it: its subject within MaxSubjectLength (ErrInvalidEvent) and its
// headers, with the ones JetStream's publish adds, within JetStream's
// bound (ErrTooLarge).
func checkMsg(msg *nats.Msg, msgID, stream string) error {
	if len(msg.Subject) > MaxSubjectLength {
		return fmt.Errorf("%w: the subject is %d bytes long, at most %d are allowed", ErrInvalidEvent, len(msg.Subject), MaxSubjectLength)
	}
	size := len("NATS/1.0\r\n\r\n") + len(nats.MsgIdHdr) + len(msgID) + 4 + len(nats.ExpectedStreamHdr) + len(stream) + 4
	for k, vs := range msg.Header {
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
	}
	if size > maxHeaderBytes {
		return fmt.Errorf("%w: the event's headers take %d bytes, JetStream stores at most %d", ErrTooLarge, size, maxHeaderBytes)
	}
	return nil
}
