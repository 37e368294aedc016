package deadletter

import (
	"encoding/base64"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// Letter is one dead letter as the admin API shows it.
type Letter struct {
	// Sequence identifies the dead letter in the dead-letter stream.
	Sequence     uint64    `json:"sequence"`
	Namespace    string    `json:"namespace"`
	Subscription string    `json:"subscription"`
	Status       int       `json:"status"`
	Error        string    `json:"error"`
	Attempts     int       `json:"attempts"`
	FailedAt     time.Time `json:"failedAt"`
	// Subject is the event's subject in the event stream.
	Subject string `json:"subject"`
	// ID, Source and Type are the event's CloudEvent attributes.
	ID     string `json:"id"`
	Source string `json:"source"`
	Type   string `json:"type"`
	// ContentType and Data are the event's data; with Filter.Preview,
	// Data is only its start (at most MaxPreview bytes).
	ContentType string `json:"contentType,omitempty"`
	Data        []byte `json:"data,omitempty"`
	// DataSize is the size of the whole data in bytes.
	DataSize int `json:"dataSize"`
}

func letter(seq uint64, h nats.Header, data []byte) Letter {
	status, _ := strconv.Atoi(h.Get(HeaderStatus))
	attempts, _ := strconv.Atoi(h.Get(HeaderAttempts))
	at, _ := time.Parse(time.RFC3339Nano, h.Get(HeaderFailedAt))
	return Letter{
		Sequence: seq, Namespace: h.Get(HeaderNamespace), Subscription: h.Get(HeaderSubscription),
		Status: status, Error: h.Get(HeaderError), Attempts: attempts, FailedAt: at,
		Subject: h.Get(HeaderSubject),
		ID:      eventstore.Attribute(h, "id"), Source: eventstore.Attribute(h, "source"), Type: eventstore.Attribute(h, "type"),
		ContentType: h.Get(eventstore.HeaderContentType), Data: data, DataSize: len(data),
	}
}

// headerMsgSize is the header in which JetStream gives the size of a
// message's data when it sends the headers only.
const headerMsgSize = "Nats-Msg-Size"

// preview is the letter of a message sent without its data (a consumer
// with HeadersOnly): Data is the preview its header kept.
func preview(seq uint64, h nats.Header) Letter {
	data, err := base64.StdEncoding.DecodeString(h.Get(HeaderDataPreview))
	if err != nil {
		data = nil
	}
	l := letter(seq, h, data)
	l.DataSize, _ = strconv.Atoi(h.Get(headerMsgSize))
	return l
}
