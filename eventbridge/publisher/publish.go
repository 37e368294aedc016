package publisher

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// errTooLarge is returned by readBody when the body is over the limit.
var errTooLarge = errors.New("request body too large")

// readBody reads the whole body within MaxRequestBytes, and takes its
// bytes from sender's bytes bucket (admission.Rates.TakeBytes): before
// reading it when its length is told, so that a sender past its rate of
// bytes costs no read of them.
func (p *Publisher) readBody(w http.ResponseWriter, r *http.Request, sender string) ([]byte, error) {
	if r.ContentLength > p.cfg.MaxRequestBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", errTooLarge, r.ContentLength, p.cfg.MaxRequestBytes)
	}
	if r.ContentLength >= 0 {
		if err := p.rates.TakeBytes(sender, r.ContentLength); err != nil {
			return nil, err
		}
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, p.cfg.MaxRequestBytes), r.ContentLength)
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return nil, fmt.Errorf("%w: the limit is %d bytes", errTooLarge, p.cfg.MaxRequestBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	if r.ContentLength < 0 {
		if err := p.rates.TakeBytes(sender, int64(len(body))); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// readAll reads a request body of size bytes (-1: unknown) into one
// buffer of its size when it is known (io.ReadAll would grow its buffer
// three times for a 1 KiB event). A server's request body yields exactly
// its Content-Length.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// servePublish serves /publish and /{app}/v2/events and returns the status
// it answered.
func (p *Publisher) servePublish(w http.ResponseWriter, r *http.Request) int {
	sender, err := p.sender(r)
	if err != nil {
		return p.fail(w, r, err)
	}
	if err := p.publishing.enter(sender); err != nil {
		return p.fail(w, r, err)
	}
	defer p.publishing.leave(sender)
	body, err := p.readBody(w, r, sender)
	if err != nil {
		return p.fail(w, r, err)
	}
	if err := p.takeTurn(r, sender); err != nil {
		return p.fail(w, r, err)
	}
	defer p.giveTurn(sender)
	tp, ts := p.traceContext(r)
	if !cehttp.IsHTTPBatch(r.Header) {
		if e, ok := eventstore.EncodeBinary(r.Header, body, tp, ts); ok {
			return p.publishBinary(w, r, e, sender)
		}
	}
	events, err := p.parse(r.Context(), r.Header, body)
	if err != nil {
		return p.fail(w, r, err)
	}
	annotate(r, events)
	routes := make([]string, len(events))
	for i := range events {
		if routes[i], err = p.prepare(&events[i]); err != nil {
			if len(events) > 1 {
				err = fmt.Errorf("event %d of the batch: %w", i, err)
			}
			return p.fail(w, r, err)
		}
	}
	stored, err := p.encode(events, routes, tp, ts, sender)
	if err == nil {
		err = p.rates.Take(sender, len(stored))
	}
	if err != nil {
		return p.fail(w, r, err)
	}
	if err := p.storeAll(r.Context(), stored); err != nil {
		return p.fail(w, r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// encode puts the events of a request in their stored form and checks
// them against the store's bounds, every one before any is stored, so
// that a batch or a legacy event (stored twice) that the store would
// refuse in part is refused whole. Each names its sender (stamp). The
// error names the event of a batch.
func (p *Publisher) encode(events []event.Event, routes []string, traceParent, traceState, sender string) ([]eventstore.Event, error) {
	out := make([]eventstore.Event, len(events))
	for i := range events {
		e, err := eventstore.Encode(&events[i], traceParent, traceState)
		if err == nil {
			e.SetRoute(routes[i])
			err = p.stamp(&e, sender)
		}
		if err == nil {
			err = e.Check()
		}
		if err != nil {
			if len(events) > 1 {
				err = fmt.Errorf("event %d of the batch: %w", i, err)
			}
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// storeAll stores the events of one request, in order, within one
// StoreTimeout.
func (p *Publisher) storeAll(ctx context.Context, events []eventstore.Event) error {
	ctx = p.stores.Context(ctx)
	for _, e := range events {
		if _, err := p.store.Put(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// publishBinary stores a binary-mode event that eventstore.EncodeBinary
// took (every attribute plainly valid), routed and typed as prepare does,
// and answers. Any other request goes through sdk-go (parse, prepare),
// which stores it alike or says why not.
func (p *Publisher) publishBinary(w http.ResponseWriter, r *http.Request, e eventstore.Event, sender string) int {
	eventType, source := e.Attribute("type"), e.Attribute("source")
	annotateEvent(r, e.Attribute("id"), eventType)
	stored, route, err := p.route(eventType, source)
	if err == nil {
		err = checkSubject(cmp.Or(route, source), stored)
	}
	if err != nil {
		return p.fail(w, r, err)
	}
	if stored != eventType {
		e.SetType(stored)
	} else if !p.legacyType(eventType) {
		e.SetOriginalType(eventType)
	}
	e.SetRoute(route)
	if err := p.stamp(&e, sender); err != nil {
		return p.fail(w, r, err)
	}
	if err := p.rates.Take(sender, 1); err != nil {
		return p.fail(w, r, err)
	}
	if _, err := p.store.Put(p.stores.Context(r.Context()), e); err != nil {
		return p.fail(w, r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// parse reads the CloudEvents of a request: one in binary or structured
// mode, or a batch.
func (p *Publisher) parse(ctx context.Context, h http.Header, body []byte) ([]event.Event, error) {
	if cehttp.IsHTTPBatch(h) {
		var events []event.Event
		if err := json.Unmarshal(body, &events); err != nil {
			return nil, fmt.Errorf("%w: batch: %w", eventstore.ErrInvalidEvent, err)
		}
		if len(events) == 0 {
			return nil, fmt.Errorf("%w: batch: no events", eventstore.ErrInvalidEvent)
		}
		if len(events) > MaxBatchEvents {
			return nil, fmt.Errorf("%w: batch: %d events, at most %d are allowed in one request", eventstore.ErrInvalidEvent, len(events), MaxBatchEvents)
		}
		return events, nil
	}
	// In binary mode the body is the data as it is: the event is read
	// from the headers and takes the body (sdk-go would copy it into a
	// buffer of its own, grown step by step). In structured mode the body
	// is the event.
	msg := cehttp.NewMessage(h, nil)
	binary := msg.ReadEncoding() == binding.EncodingBinary
	if !binary {
		msg = cehttp.NewMessage(h, io.NopCloser(bytes.NewReader(body)))
	}
	e, err := binding.ToEvent(ctx, msg)
	if err != nil {
		return nil, withKymaText(fmt.Errorf("%w: %w", eventstore.ErrInvalidEvent, err), err.Error())
	}
	if binary && len(body) > 0 {
		e.DataEncoded = body
	}
	return []event.Event{*e}, nil
}
