package deadletter

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kfn-dev/kfn/contract/stream"
)

// Headers a dead letter carries besides the event's own.
const (
	HeaderNamespace    = "Kfn-Namespace"
	HeaderSubscription = "Kfn-Subscription"
	HeaderConsumer     = "Kfn-Consumer"
	HeaderStatus       = "Kfn-Status"
	HeaderError        = "Kfn-Error"
	HeaderAttempts     = "Kfn-Attempts"
	HeaderSubject      = "Kfn-Subject"
	HeaderSequence     = "Kfn-Sequence"
	// HeaderStream names the partition's stream the event was in, when
	// not partition 0's (stream.Config.PartitionStream).
	HeaderStream   = "Kfn-Stream"
	HeaderFailedAt = "Kfn-Failed-At"
	// HeaderDataPreview holds the start of the event's data, at most
	// MaxPreview bytes, in base64 (standard encoding): what a listing with
	// Filter.Preview gives without reading the data.
	HeaderDataPreview = "Kfn-Data-Preview"
)

// MaxPreview bounds the start of a dead letter's data kept in
// HeaderDataPreview.
const MaxPreview = 256

// maxErrorLen bounds the stored error text.
const maxErrorLen = 1024

// Failure says why an event is dead-lettered.
type Failure struct {
	// Namespace and Subscription name the Subscription.
	Namespace, Subscription string
	// Status is the sink's last HTTP status, 0 for a network error.
	Status int
	// Error is the last error in words.
	Error string
	// Attempts is the number of delivery attempts made.
	Attempts int
	// Subject is the event's subject in the event stream.
	Subject string
	// Sequence is the event's sequence in the event stream.
	Sequence uint64
	// Stream is the event stream's partition the event was in (its
	// stream's name); empty for partition 0 (stream.Config.EventStream).
	Stream string
	// At is when the event was given up.
	At time.Time
}

// NewMsg returns the dead letter of an event: the event's headers and data
// (JetStream's own Nats-* headers left out) plus the failure, on the
// dead-letter subject of the Subscription's namespace (whose letters the
// stream bounds together, see stream.Config.DeadLetterMaxPerNamespace).
func NewMsg(h nats.Header, data []byte, f Failure) *nats.Msg {
	out := make(nats.Header, len(h)+10)
	for k, v := range h {
		if !strings.HasPrefix(k, "Nats-") {
			out[k] = v
		}
	}
	consumer := stream.ConsumerName(f.Namespace, f.Subscription)
	out.Set(HeaderNamespace, f.Namespace)
	out.Set(HeaderSubscription, f.Subscription)
	out.Set(HeaderConsumer, consumer)
	out.Set(HeaderStatus, strconv.Itoa(f.Status))
	out.Set(HeaderError, clean(f.Error))
	out.Set(HeaderAttempts, strconv.Itoa(f.Attempts))
	out.Set(HeaderSubject, f.Subject)
	out.Set(HeaderSequence, strconv.FormatUint(f.Sequence, 10))
	if f.Stream != "" {
		out.Set(HeaderStream, f.Stream)
	}
	out.Set(HeaderFailedAt, f.At.UTC().Format(time.RFC3339Nano))
	out.Set(HeaderDataPreview, base64.StdEncoding.EncodeToString(data[:min(len(data), MaxPreview)]))
	return &nats.Msg{Subject: stream.DeadLetterSubject(f.Namespace), Header: out, Data: data}
}

// MsgID is the message id of a dead letter: a dispatcher that dies after
// storing one and before settling the event stores it only once. The
// consumer and the event's sequence in its partition name it (sequences
// of two partitions are not the same events).
func MsgID(f Failure) string {
	id := "dlq:" + stream.ConsumerName(f.Namespace, f.Subscription) + ":"
	if f.Stream != "" {
		id += f.Stream + ":"
	}
	return id + strconv.FormatUint(f.Sequence, 10)
}

// clean makes text fit in a header: control characters become spaces and
// the length is bounded.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxErrorLen {
		s = s[:maxErrorLen]
	}
	return s
}
