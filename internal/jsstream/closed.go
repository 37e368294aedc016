package jsstream

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
)

// ClosedEventStreamConfig is EventStreamConfig closed: the same stream
// without the event and replay subjects.
func ClosedEventStreamConfig(c stream.Config) jetstream.StreamConfig {
	return ClosedPartitionConfig(c, 0)
}

// ClosedPartitionConfig is PartitionStreamConfig closed: the same stream
// with one subject nothing publishes on, c.ClosedSubject(p), instead of
// the subjects events are published on.
func ClosedPartitionConfig(c stream.Config, p int) jetstream.StreamConfig {
	return closedConfig(PartitionStreamConfig(c, p), c, p, "kfn events (closed until the Subscriptions' consumers exist in it)")
}

// closedConfig is sc, partition p's, closed: its one subject
// c.ClosedSubject(p), no subject transform, and description.
func closedConfig(sc jetstream.StreamConfig, c stream.Config, p int, description string) jetstream.StreamConfig {
	sc.Subjects = []string{c.ClosedSubject(p)}
	sc.SubjectTransform = nil
	sc.Description = description
	return sc
}

// IsOpen reports whether an event stream's configuration takes events:
// its subjects are not the one subject of a closed stream.
func IsOpen(sc jetstream.StreamConfig) bool {
	return len(sc.Subjects) > 0 && !strings.HasPrefix(sc.Subjects[0], stream.ClosedSubjectPrefix+".")
}

// EnsureClosed is Ensure, but a missing partition's stream is made closed
// (ClosedPartitionConfig), for the caller to make the consumers in it and
// then Open it. It reports whether every partition's stream is open:
// false when one was made now or found closed.
func EnsureClosed(ctx context.Context, js jetstream.JetStream, c stream.Config) (open bool, err error) {
	return ensure(ctx, js, c, true)
}

// ensurePartitions makes every partition's stream exist (ensurePartition)
// and reports whether they are all open.
func ensurePartitions(ctx context.Context, js jetstream.JetStream, c stream.Config, closeNew bool) (bool, error) {
	all := true
	for p := range c.PartitionCount() {
		open, err := ensurePartition(ctx, js, c, p, closeNew)
		if err != nil {
			return false, err
		}
		all = all && open
	}
	return all, nil
}

// ensurePartition makes partition p's stream exist: a missing one is made
// closed with closeNew, else open; an existing one is updated to the
// configuration and stays as closed or open as it is. It reports whether
// the stream is open.
func ensurePartition(ctx context.Context, js jetstream.JetStream, c stream.Config, p int, closeNew bool) (bool, error) {
	want := PartitionStreamConfig(c, p)
	for {
		s, err := js.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			made := want
			if closeNew {
				made = ClosedPartitionConfig(c, p)
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
			want = ClosedPartitionConfig(c, p)
		}
		if recorded, ok := s.CachedInfo().Config.Metadata[PartitionsMetadata]; ok && p == 0 {
			// The consumers' leader's count (RecordPartitions), which
			// a replica of another count, while a change of the count
			// rolls out, leaves as it is.
			want.Metadata = map[string]string{PartitionsMetadata: recorded}
		}
		if _, err := js.UpdateStream(ctx, want); err != nil {
			return false, fmt.Errorf("update stream %s: %w", want.Name, err)
		}
		return IsOpen(want), nil
	}
}

// Open opens every partition's stream: from now on they take events. Open
// them only once every Subscription's consumer exists in each, or the
// events published before a consumer exists are acknowledged and never
// delivered. Opening an open stream changes nothing; a missing one is an
// error wrapping jetstream.ErrStreamNotFound.
func Open(ctx context.Context, js jetstream.JetStream, c stream.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	for p := range c.PartitionCount() {
		sc := PartitionStreamConfig(c, p)
		if _, err := js.UpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("open stream %s: %w", sc.Name, err)
		}
	}
	return nil
}

// EventStreamOpen reports whether every partition's stream takes events;
// a missing one is an error wrapping jetstream.ErrStreamNotFound.
func EventStreamOpen(ctx context.Context, js jetstream.JetStream, c stream.Config) (bool, error) {
	for _, name := range c.PartitionStreams() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return false, fmt.Errorf("look up stream %s: %w", name, err)
		}
		if !IsOpen(s.CachedInfo().Config) {
			return false, nil
		}
	}
	return true, nil
}
