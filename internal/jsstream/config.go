package jsstream

import (
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
)

func storage(c stream.Config) jetstream.StorageType {
	if c.Storage == stream.StorageMemory {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// EventStreamConfig returns the JetStream configuration of the event
// stream, partition 0 (PartitionStreamConfig).
func EventStreamConfig(c stream.Config) jetstream.StreamConfig {
	return PartitionStreamConfig(c, 0)
}

// PartitionStreamConfig returns the JetStream configuration of partition
// p's stream: subjects stream.PartitionSubjects(p) (kyma.> and the replay
// subjects for partition 0; for another, its prefix, taken off as the
// event is stored), interest retention (an event is kept until every
// consumer whose filter matches it acknowledged it), and "discard new"
// when full, so that a full stream refuses new events rather than losing
// stored ones. MaxBytes and MaxConsumers are each partition's.
func PartitionStreamConfig(c stream.Config, p int) jetstream.StreamConfig {
	sc := jetstream.StreamConfig{
		Name:         c.PartitionStream(p),
		Description:  "kfn events, kept until every interested Subscription acknowledged them",
		Subjects:     stream.PartitionSubjects(p),
		Retention:    jetstream.InterestPolicy,
		Discard:      jetstream.DiscardNew,
		MaxBytes:     c.MaxBytes,
		MaxMsgs:      -1,
		MaxMsgSize:   c.MaxMsgSize,
		MaxConsumers: c.MaxConsumers,
		Storage:      storage(c),
		Replicas:     c.Replicas,
		Duplicates:   c.Duplicates,
	}
	if p == 0 {
		sc.Metadata = map[string]string{PartitionsMetadata: strconv.Itoa(c.PartitionCount())}
	} else {
		sc.Description = fmt.Sprintf("kfn events of partition %d, kept until every interested Subscription acknowledged them", p)
		// kfn.p.<p>.<event subject> is stored as <event subject>.
		sc.SubjectTransform = &jetstream.SubjectTransformConfig{Source: sc.Subjects[0], Destination: ">"}
	}
	return sc
}

// DeadLetterStreamConfig returns the JetStream configuration of the
// dead-letter stream: limits retention; a namespace's letters on a
// subject of its own, of which it keeps at most DeadLetterMaxPerNamespace
// (its oldest discarded past it, JetStream's per-subject limit); and when
// the stream as a whole is full, new letters refused rather than anyone's
// discarded (the dead-letter writer chooses whose oldest makes room).
func DeadLetterStreamConfig(c stream.Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              c.DeadLetterStream,
		Description:       "kfn dead letters: events that ran out of delivery attempts",
		Subjects:          []string{stream.DeadLetterSubjectPrefix + ".>"},
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardNew,
		MaxBytes:          c.DeadLetterMaxBytes,
		MaxMsgs:           -1,
		MaxMsgsPerSubject: c.DeadLetterMaxPerNamespace,
		MaxAge:            c.DeadLetterMaxAge,
		Storage:           storage(c),
		Replicas:          c.Replicas,
		Duplicates:        c.Duplicates,
	}
}

// LockBucketConfig returns the JetStream configuration of the lock bucket:
// in memory whatever the streams' storage (a lock only matters while its
// holder runs, and moving the streams to another storage, which means
// deleting them, then leaves the bucket as it is), one value per key, and
// every entry gone after stream.LockTTL.
func LockBucketConfig(c stream.Config) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      c.LockBucket(),
		Description: "kfn: locks of the consumers of " + c.EventStream,
		History:     1,
		TTL:         stream.LockTTL,
		Storage:     jetstream.MemoryStorage,
		Replicas:    c.Replicas,
	}
}

// DependencyBucketConfig returns the JetStream configuration of the
// dependency bucket: the streams' storage and replicas, at most
// DependencyMaxBytes in all (JetStream's object store refuses a write
// past it rather than discarding stored objects), each object kept
// DependencyMaxAge after it was stored. The event bridge's dependency cache makes it when it first
// needs it, not Ensure: a bridge without the cache (kfn dev) has none.
func DependencyBucketConfig(c stream.Config) jetstream.ObjectStoreConfig {
	return jetstream.ObjectStoreConfig{
		Bucket:      c.DependencyBucket,
		Description: "kfn: installed dependencies of Functions, by namespace, runtime and dependency hash",
		MaxBytes:    c.DependencyMaxBytes,
		TTL:         c.DependencyMaxAge,
		Storage:     storage(c),
		Replicas:    c.Replicas,
	}
}
