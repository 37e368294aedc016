package jsstream

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
)

// ClosedEventStreamConfig is EventStreamConfig closed: the same stream
// without the event and replay subjects.
func ClosedEventStreamConfig(c stream.Config) jetstream.StreamConfig {
	sc := EventStreamConfig(c)
	sc.Subjects = []string{c.ClosedSubject()}
	sc.Description = "kfn events (closed until the Subscriptions' consumers exist in it)"
	return sc
}

// IsOpen reports whether an event stream's configuration takes events:
// it has the event subjects.
func IsOpen(sc jetstream.StreamConfig) bool {
	return slices.Contains(sc.Subjects, v1alpha2.SubjectPrefix+".>")
}

// EnsureClosed is Ensure, but a missing event stream is made closed
// (ClosedEventStreamConfig), for the caller to make the consumers in it
// and then Open it. It reports whether the event stream is open: false
// when it was made now or found closed.
func EnsureClosed(ctx context.Context, js jetstream.JetStream, c stream.Config) (open bool, err error) {
	return ensure(ctx, js, c, true)
}

// ensureEventStream makes the event stream exist: a missing one is made
// closed with closeNew, else open; an existing one is updated to the
// configuration and stays as closed or open as it is. It reports whether
// the stream is open.
func ensureEventStream(ctx context.Context, js jetstream.JetStream, c stream.Config, closeNew bool) (bool, error) {
	want := EventStreamConfig(c)
	for {
		s, err := js.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			made := want
			if closeNew {
				made = ClosedEventStreamConfig(c)
			}
			_, err := js.CreateStream(ctx, made)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue // another replica made it meanwhile: update that one
			}
			if err != nil {
				return false, fmt.Errorf("create stream %s: %w", made.Name, err)
			}
			return !closeNew, nil
		}
		if err != nil {
			return false, fmt.Errorf("look up stream %s: %w", want.Name, err)
		}
		if !IsOpen(s.CachedInfo().Config) {
			want = ClosedEventStreamConfig(c)
		}
		if _, err := js.UpdateStream(ctx, want); err != nil {
			return false, fmt.Errorf("update stream %s: %w", want.Name, err)
		}
		return IsOpen(want), nil
	}
}

// Open opens the event stream: from now on it takes events. Open it only
// once every Subscription's consumer exists in it, or the events published
// before a consumer exists are acknowledged and never delivered. Opening
// an open stream changes nothing; a missing one is an error wrapping
// jetstream.ErrStreamNotFound.
func Open(ctx context.Context, js jetstream.JetStream, c stream.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if _, err := js.UpdateStream(ctx, EventStreamConfig(c)); err != nil {
		return fmt.Errorf("open stream %s: %w", c.EventStream, err)
	}
	return nil
}

// EventStreamOpen reports whether the event stream takes events; a
// missing one is an error wrapping jetstream.ErrStreamNotFound.
func EventStreamOpen(ctx context.Context, js jetstream.JetStream, c stream.Config) (bool, error) {
	s, err := js.Stream(ctx, c.EventStream)
	if err != nil {
		return false, fmt.Errorf("look up stream %s: %w", c.EventStream, err)
	}
	return IsOpen(s.CachedInfo().Config), nil
}
