package jsstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
)

// Ensure creates the event stream's partitions, the dead-letter stream and
// the lock bucket, or updates them to the configuration. It is idempotent
// and safe to call from several replicas at once. It fails if the configuration is invalid or JetStream refuses the
// change (for example a change of storage type, which JetStream cannot make
// in place). A missing partition's stream is made open (taking events at
// once); a closed one (see EnsureClosed) is left closed: only Open opens
// it.
func Ensure(ctx context.Context, js jetstream.JetStream, c stream.Config) error {
	_, err := ensure(ctx, js, c, false)
	return err
}

// ensure is Ensure and EnsureClosed: closeNew makes a missing event stream
// closed. It reports whether the event stream is open.
func ensure(ctx context.Context, js jetstream.JetStream, c stream.Config, closeNew bool) (bool, error) {
	if err := c.Validate(); err != nil {
		return false, err
	}
	open, err := ensurePartitions(ctx, js, c, closeNew)
	if err != nil {
		return false, err
	}
	sc := DeadLetterStreamConfig(c)
	if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
		return false, fmt.Errorf("create or update stream %s: %w", sc.Name, err)
	}
	return open, EnsureLockBucket(ctx, js, c)
}

// EnsureLockBucket creates the lock bucket, or updates it to the
// configuration.
func EnsureLockBucket(ctx context.Context, js jetstream.JetStream, c stream.Config) error {
	if _, err := js.CreateOrUpdateKeyValue(ctx, LockBucketConfig(c)); err != nil {
		return fmt.Errorf("create or update lock bucket %s: %w", c.LockBucket(), err)
	}
	return nil
}

// FewerReplicas reports whether a partition of the event stream, the
// dead-letter stream or the lock bucket has fewer replicas than c asks for, or is missing: one made by an
// event bridge of a smaller configuration (a replica of profile small still
// leading while the chart moves to ha makes a stream NATS lost anew with
// one replica). Ensure then raises them; FewerReplicas never asks for
// fewer, so replicas of two configurations during a rolling update do not
// take turns undoing each other.
func FewerReplicas(ctx context.Context, js jetstream.JetStream, c stream.Config) (bool, error) {
	for _, name := range append(c.PartitionStreams(), c.DeadLetterStream, "KV_"+c.LockBucket()) {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return true, nil // none at all: Ensure makes it
		}
		if err != nil {
			return false, fmt.Errorf("look up stream %s: %w", name, err)
		}
		if s.CachedInfo().Config.Replicas < c.Replicas {
			return true, nil
		}
	}
	return false, nil
}
