package stream

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// Default names of kfn's streams.
const (
	DefaultEventStream      = "kfn-events"
	DefaultDeadLetterStream = "kfn-deadletter"
	// DefaultDependencyBucket is the object store of installed
	// dependencies (the event bridge's dependency cache).
	DefaultDependencyBucket = "kfn-dependencies"
)

// Defaults of the dependency bucket: 2 GiB, objects kept 7 days.
const (
	DefaultDependencyMaxBytes = 2 << 30
	DefaultDependencyMaxAge   = 7 * 24 * time.Hour
)

// Subjects kfn uses besides the event subjects (kyma.<source>.<type>).
const (
	// ReplaySubjectPrefix starts the subject of an event replayed from the
	// dead-letter stream to one consumer: ReplaySubjectPrefix.<consumer>.
	// Only that consumer filters on it, and only while replayed events
	// wait for it (package replay), so a replay reaches only the
	// Subscription the event was dead-lettered from.
	ReplaySubjectPrefix = "kfn.replay"
	// DeadLetterSubjectPrefix starts the subject of a dead letter:
	// DeadLetterSubjectPrefix.ns.<namespace> (DeadLetterSubject), and, for
	// the dead letters of releases before per-namespace bounds,
	// DeadLetterSubjectPrefix.<consumer> (LegacyDeadLetterSubject).
	DeadLetterSubjectPrefix = "kfn.deadletter"
)

// DefaultDeadLetterMaxPerNamespace is the default
// Config.DeadLetterMaxPerNamespace.
const DefaultDeadLetterMaxPerNamespace = 10_000

// DeadLetterShareOfStream divides DeadLetterMaxBytes into the default
// bytes of one namespace's dead letters (Config.DeadLetterNamespaceBytes):
// 15 namespaces at their bound leave a 16th of the dead-letter stream to
// every other (16 MiB of the default 256 MiB).
const DeadLetterShareOfStream = 16

// DefaultMaxConsumers is the default Config.MaxConsumers: ten times what
// NATS 2.15 allows a stream that sets no limit.
const DefaultMaxConsumers = 10_000

// Storage names accepted by Config.Storage.
const (
	StorageFile   = "file"
	StorageMemory = "memory"
)

// ErrInvalidConfig is wrapped by every error of Config.Validate.
var ErrInvalidConfig = errors.New("invalid stream configuration")

// ClosedSubjectPrefix starts the one subject of a closed event stream,
// ClosedSubjectPrefix.<event stream>: nothing publishes on it.
//
// The event stream keeps an event only for the consumers that exist when
// it is published (interest retention): NATS acknowledges an event no
// consumer is interested in and keeps nothing of it. An event stream made
// anew (NATS lost it: a server without its storage, a move from one server
// to a cluster) has no consumer, so it is made closed, without the event
// subjects: a publish finds no stream and is refused (the publisher
// answers 503, and the sender sends again) until the Subscriptions'
// consumers exist in the new stream and it is opened (jsstream.Open).
const ClosedSubjectPrefix = "kfn.closed"

// Config describes the two streams. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// EventStream is the name of the stream holding events until every
	// interested consumer acknowledged them: partition 0's, and the start
	// of the other partitions' names (see PartitionStream).
	EventStream string
	// Partitions is the number of streams events are spread over (see
	// PartitionOf), 1 to MaxPartitions; 0 means 1. MaxBytes and
	// MaxConsumers bound each partition's stream; a Subscription has a
	// consumer in each.
	Partitions int
	// DeadLetterStream is the name of the stream holding dead letters.
	DeadLetterStream string
	// Storage is StorageFile or StorageMemory, for both streams.
	Storage string
	// Replicas is the number of JetStream replicas of both streams (1..5).
	Replicas int
	// MaxBytes bounds the event stream; when full, publishing fails with
	// "storage full" instead of dropping stored events. -1 is unlimited.
	MaxBytes int64
	// MaxMsgSize bounds one stored event, headers included. -1 is unlimited.
	MaxMsgSize int32
	// MaxConsumers bounds the consumers of the event stream: one per
	// Subscription. It must be positive: since NATS 2.15 a stream that sets
	// no limit of its own (0 or -1) gets the server's default_max_consumers,
	// 1,000 unless the server says otherwise, which would refuse the
	// 1,001st Subscription.
	MaxConsumers int
	// Duplicates is the de-duplication window: a publish with a message id
	// already stored within it is acknowledged but not stored again.
	Duplicates time.Duration
	// DeadLetterMaxAge is how long dead letters are kept. 0 keeps them
	// until they are replayed or deleted.
	DeadLetterMaxAge time.Duration
	// DeadLetterMaxBytes bounds the dead-letter stream; when full,
	// JetStream refuses new dead letters, and the dead-letter writer makes
	// room with the oldest of the namespace holding the most, so that each
	// keeps an equal share however many fill it. -1 is unlimited.
	DeadLetterMaxBytes int64
	// DeadLetterMaxPerNamespace bounds the dead letters of one namespace:
	// past it, that namespace's oldest are discarded.
	DeadLetterMaxPerNamespace int64
	// DeadLetterMaxBytesPerNamespace bounds the bytes of one namespace's
	// dead letters (JetStream bounds bytes per stream only: the
	// dead-letter writer keeps this one, see deadletter.Writer): past it,
	// that namespace's oldest are discarded for its newest, and no
	// other's. At most DeadLetterMaxBytes, and at least MaxMsgSize (or
	// DeadLetterMaxBytes if less); 0 means DeadLetterNamespaceBytes's
	// default.
	DeadLetterMaxBytesPerNamespace int64
	// DependencyBucket is the name of the JetStream object store that
	// holds installed dependencies (package eventbridge/depcache), with
	// the streams' Storage and Replicas.
	DependencyBucket string
	// DependencyMaxBytes bounds the dependency bucket as a whole; when
	// full, the cache removes the least read objects of the namespaces
	// that store more than a fair share of it to make room for an upload,
	// else refuses it (507); JetStream itself never discards what is
	// stored. -1 is unlimited.
	DependencyMaxBytes int64
	// DependencyMaxAge is how long an object of the dependency bucket is
	// kept after it was stored, used or not (the next pod that misses it
	// installs and stores it again), so that the sets a namespace no
	// longer uses leave its quota. 0 keeps them until deleted.
	DependencyMaxAge time.Duration
}

// DefaultConfig returns working defaults: file storage, one replica, a
// 1 GiB event stream, 2 MiB per event, up to DefaultMaxConsumers
// Subscriptions, a 2-minute de-duplication window, dead letters kept for
// 7 days within 256 MiB (16 MiB and 10,000 letters per namespace), and a
// 2 GiB dependency bucket whose objects are kept 7 days.
func DefaultConfig() Config {
	return Config{
		EventStream:        DefaultEventStream,
		DeadLetterStream:   DefaultDeadLetterStream,
		Storage:            StorageFile,
		Replicas:           1,
		MaxBytes:           1 << 30,
		MaxMsgSize:         2 << 20,
		MaxConsumers:       DefaultMaxConsumers,
		Duplicates:         2 * time.Minute,
		DeadLetterMaxAge:   7 * 24 * time.Hour,
		DeadLetterMaxBytes: 256 << 20,

		DeadLetterMaxPerNamespace: DefaultDeadLetterMaxPerNamespace,
		DependencyBucket:          DefaultDependencyBucket,
		DependencyMaxBytes:        DefaultDependencyMaxBytes,
		DependencyMaxAge:          DefaultDependencyMaxAge,
	}
}

// Validate returns an error wrapping ErrInvalidConfig that names the first
// invalid field.
func (c Config) Validate() error {
	switch {
	case !validName(c.EventStream):
		return fmt.Errorf("%w: event stream name %q must be non-empty without whitespace, '.', '*', '>', '/' or '\\'", ErrInvalidConfig, c.EventStream)
	case !validBucket(c.LockBucket()):
		return fmt.Errorf("%w: event stream name %q must be made of letters, digits, '-' and '_' only: it also names the lock bucket %q", ErrInvalidConfig, c.EventStream, c.LockBucket())
	case c.Partitions < 0 || c.Partitions > MaxPartitions:
		return fmt.Errorf("%w: partitions must be between 1 and %d, not %d", ErrInvalidConfig, MaxPartitions, c.Partitions)
	case !validName(c.DeadLetterStream):
		return fmt.Errorf("%w: dead-letter stream name %q must be non-empty without whitespace, '.', '*', '>', '/' or '\\'", ErrInvalidConfig, c.DeadLetterStream)
	case c.DeadLetterStream == c.EventStream || c.partitionNamed(c.DeadLetterStream):
		return fmt.Errorf("%w: the dead-letter stream %q must not have the name of an event stream's partition (%s-1 to -%d included: a partition taken away is drained under its name)", ErrInvalidConfig, c.DeadLetterStream, c.EventStream, MaxPartitions-1)
	case c.Storage != StorageFile && c.Storage != StorageMemory:
		return fmt.Errorf("%w: storage must be %q or %q, not %q", ErrInvalidConfig, StorageFile, StorageMemory, c.Storage)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("%w: replicas must be between 1 and 5, not %d", ErrInvalidConfig, c.Replicas)
	case c.MaxBytes == 0 || c.MaxBytes < -1:
		return fmt.Errorf("%w: max bytes must be positive or -1 (unlimited), not %d", ErrInvalidConfig, c.MaxBytes)
	case c.MaxMsgSize == 0 || c.MaxMsgSize < -1:
		return fmt.Errorf("%w: max message size must be positive or -1 (unlimited), not %d", ErrInvalidConfig, c.MaxMsgSize)
	case c.MaxConsumers <= 0:
		return fmt.Errorf("%w: max consumers (Subscriptions) must be positive, not %d: NATS gives a stream without a limit of its own the server's default, 1,000", ErrInvalidConfig, c.MaxConsumers)
	case c.Duplicates <= 0:
		return fmt.Errorf("%w: the de-duplication window must be positive, not %s", ErrInvalidConfig, c.Duplicates)
	case c.DeadLetterMaxAge < 0:
		return fmt.Errorf("%w: dead-letter max age must not be negative, not %s", ErrInvalidConfig, c.DeadLetterMaxAge)
	case c.DeadLetterMaxBytes == 0 || c.DeadLetterMaxBytes < -1:
		return fmt.Errorf("%w: dead-letter max bytes must be positive or -1 (unlimited), not %d", ErrInvalidConfig, c.DeadLetterMaxBytes)
	case c.DeadLetterMaxPerNamespace < 1:
		return fmt.Errorf("%w: dead letters per namespace must be at least 1, not %d", ErrInvalidConfig, c.DeadLetterMaxPerNamespace)
	case c.DeadLetterMaxBytesPerNamespace < 0:
		return fmt.Errorf("%w: dead-letter bytes per namespace must be positive (or 0 for the default), not %d", ErrInvalidConfig, c.DeadLetterMaxBytesPerNamespace)
	case c.DeadLetterMaxBytes > 0 && c.DeadLetterNamespaceBytes() > c.DeadLetterMaxBytes:
		return fmt.Errorf("%w: dead-letter bytes per namespace (%d) must not be above the dead-letter stream's max bytes (%d)",
			ErrInvalidConfig, c.DeadLetterMaxBytesPerNamespace, c.DeadLetterMaxBytes)
	case c.DeadLetterNamespaceBytes() < c.largestLetter():
		return fmt.Errorf("%w: dead-letter bytes per namespace (%d) must hold one event of the largest size (%d)",
			ErrInvalidConfig, c.DeadLetterMaxBytesPerNamespace, c.largestLetter())
	case c.DependencyBucket == "" || !validBucket(c.DependencyBucket):
		return fmt.Errorf("%w: dependency bucket name %q must be non-empty, made of letters, digits, '-' and '_' only", ErrInvalidConfig, c.DependencyBucket)
	case c.DependencyMaxBytes == 0 || c.DependencyMaxBytes < -1:
		return fmt.Errorf("%w: dependency bucket max bytes must be positive or -1 (unlimited), not %d", ErrInvalidConfig, c.DependencyMaxBytes)
	case c.DependencyMaxAge < 0:
		return fmt.Errorf("%w: dependency max age must not be negative (0 keeps objects until deleted), not %s", ErrInvalidConfig, c.DependencyMaxAge)
	}
	return nil
}

// DeadLetterNamespaceBytes is the most bytes of one namespace's dead
// letters: DeadLetterMaxBytesPerNamespace, or by default
// DeadLetterMaxBytes divided by DeadLetterShareOfStream (of an unlimited
// stream, of the default 256 MiB), but at least one event of the largest
// size and at most DeadLetterMaxBytes.
func (c Config) DeadLetterNamespaceBytes() int64 {
	if c.DeadLetterMaxBytesPerNamespace > 0 {
		return c.DeadLetterMaxBytesPerNamespace
	}
	total := c.DeadLetterMaxBytes
	if total <= 0 {
		total = DefaultConfig().DeadLetterMaxBytes
	}
	n := max(total/DeadLetterShareOfStream, c.largestLetter())
	if c.DeadLetterMaxBytes > 0 {
		n = min(n, c.DeadLetterMaxBytes)
	}
	return n
}

// largestLetter is the size of the largest event, as far as the
// dead-letter stream can hold one: what a namespace's dead letters must
// have room for.
func (c Config) largestLetter() int64 {
	n := int64(c.MaxMsgSize)
	if n <= 0 {
		n = 1
	}
	if c.DeadLetterMaxBytes > 0 {
		n = min(n, c.DeadLetterMaxBytes)
	}
	return n
}

func validName(name string) bool {
	return name != "" && !strings.ContainsAny(name, " \t\r\n.*>/\\")
}

// validBucket says whether name is a valid key-value bucket name.
func validBucket(name string) bool {
	return strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == ""
}

// LockTTL is how long a lock in the lock bucket lives at most: a holder
// that dies leaves its lock to expire after it.
const LockTTL = 30 * time.Second

// LockBucket is the name of the key-value bucket that holds the locks of
// the event stream's consumers: the event stream's name and "-locks".
func (c Config) LockBucket() string { return c.EventStream + "-locks" }

// ReplaySubject is the subject on which events replayed to the given
// consumer are published.
func ReplaySubject(consumer string) string {
	return ReplaySubjectPrefix + "." + consumer
}

// DeadLetterSubject is the subject of the dead letters of the given
// namespace: DeadLetterSubjectPrefix.ns.<namespace>.
func DeadLetterSubject(namespace string) string {
	return DeadLetterSubjectPrefix + ".ns." + namespace
}

// LegacyDeadLetterSubject is the subject the dead letters of the given
// consumer had before per-namespace bounds: DeadLetterSubjectPrefix.<consumer>
// (three tokens, where DeadLetterSubject has four). Such letters are
// still listed, replayed and deleted.
func LegacyDeadLetterSubject(consumer string) string {
	return DeadLetterSubjectPrefix + "." + consumer
}

// EventSubjects are the subjects of an open event stream: the event
// subjects (v1alpha2.SubjectPrefix.>) and the replay subjects.
func EventSubjects() []string {
	return []string{v1alpha2.SubjectPrefix + ".>", ReplaySubjectPrefix + ".>"}
}

// ClosedSubject is the one subject of partition p's stream while it is
// closed: ClosedSubjectPrefix.<its stream's name>.
func (c Config) ClosedSubject(p int) string { return ClosedSubjectPrefix + "." + c.PartitionStream(p) }
