package eventstore

import "github.com/nats-io/nats.go"

// FromHeader is a new event whose stored form is h and data, for tests
// that store what Encode would refuse to make.
func FromHeader(h nats.Header, data []byte) Event { return Event{h: h, data: data} }

// Header is the event's stored headers, for tests to read.
func (e *Event) Header() nats.Header { return e.h }

// Data is the event's data, for tests to read.
func (e *Event) Data() []byte { return e.data }
