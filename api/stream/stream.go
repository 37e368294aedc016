package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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

// Config describes the two streams. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// EventStream is the name of the stream holding events until every
	// interested consumer acknowledged them.
	EventStream string
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
	// DeadLetterMaxBytes bounds the dead-letter stream; when full, new
	// dead letters are refused (and their events retried later), so that
	// no namespace's letters evict another's. -1 is unlimited.
	DeadLetterMaxBytes int64
	// DeadLetterMaxPerNamespace bounds the dead letters of one namespace:
	// past it, that namespace's oldest are discarded, and no other's.
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
	case !validName(c.DeadLetterStream):
		return fmt.Errorf("%w: dead-letter stream name %q must be non-empty without whitespace, '.', '*', '>', '/' or '\\'", ErrInvalidConfig, c.DeadLetterStream)
	case c.EventStream == c.DeadLetterStream:
		return fmt.Errorf("%w: the event and dead-letter streams must have different names", ErrInvalidConfig)
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

func (c Config) storage() jetstream.StorageType {
	if c.Storage == StorageMemory {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// EventStreamConfig returns the JetStream configuration of the event stream:
// subjects kyma.> and the replay subjects, interest retention (an event is
// kept until every consumer whose filter matches it acknowledged it), and
// "discard new" when full, so that a full stream refuses new events rather
// than losing stored ones.
func (c Config) EventStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:         c.EventStream,
		Description:  "kfn events, kept until every interested Subscription acknowledged them",
		Subjects:     []string{v1alpha2.SubjectPrefix + ".>", ReplaySubjectPrefix + ".>"},
		Retention:    jetstream.InterestPolicy,
		Discard:      jetstream.DiscardNew,
		MaxBytes:     c.MaxBytes,
		MaxMsgs:      -1,
		MaxMsgSize:   c.MaxMsgSize,
		MaxConsumers: c.MaxConsumers,
		Storage:      c.storage(),
		Replicas:     c.Replicas,
		Duplicates:   c.Duplicates,
	}
}

// DeadLetterStreamConfig returns the JetStream configuration of the
// dead-letter stream: limits retention; a namespace's letters on a
// subject of its own, of which it keeps at most DeadLetterMaxPerNamespace
// (its oldest discarded past it, JetStream's per-subject limit); and when
// the stream as a whole is full, new letters refused rather than anyone's
// discarded.
func (c Config) DeadLetterStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              c.DeadLetterStream,
		Description:       "kfn dead letters: events that ran out of delivery attempts",
		Subjects:          []string{DeadLetterSubjectPrefix + ".>"},
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardNew,
		MaxBytes:          c.DeadLetterMaxBytes,
		MaxMsgs:           -1,
		MaxMsgsPerSubject: c.DeadLetterMaxPerNamespace,
		MaxAge:            c.DeadLetterMaxAge,
		Storage:           c.storage(),
		Replicas:          c.Replicas,
		Duplicates:        c.Duplicates,
	}
}

// LockTTL is how long a lock in the lock bucket lives at most: a holder
// that dies leaves its lock to expire after it.
const LockTTL = 30 * time.Second

// LockBucket is the name of the key-value bucket that holds the locks of
// the event stream's consumers: the event stream's name and "-locks".
func (c Config) LockBucket() string { return c.EventStream + "-locks" }

// LockBucketConfig returns the JetStream configuration of the lock bucket:
// in memory whatever the streams' storage (a lock only matters while its
// holder runs, and moving the streams to another storage, which means
// deleting them, then leaves the bucket as it is), one value per key, and
// every entry gone after LockTTL.
func (c Config) LockBucketConfig() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      c.LockBucket(),
		Description: "kfn: locks of the consumers of " + c.EventStream,
		History:     1,
		TTL:         LockTTL,
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
func (c Config) DependencyBucketConfig() jetstream.ObjectStoreConfig {
	return jetstream.ObjectStoreConfig{
		Bucket:      c.DependencyBucket,
		Description: "kfn: installed dependencies of Functions, by namespace, runtime and dependency hash",
		MaxBytes:    c.DependencyMaxBytes,
		TTL:         c.DependencyMaxAge,
		Storage:     c.storage(),
		Replicas:    c.Replicas,
	}
}

// Ensure creates both streams and the lock bucket, or updates them to the
// configuration. It is idempotent and safe to call from several replicas at
// once. It fails if the configuration is invalid or JetStream refuses the
// change (for example a change of storage type, which JetStream cannot make
// in place). A missing event stream is made open (taking events at once);
// a closed one (see EnsureClosed) is left closed: only Open opens it.
func Ensure(ctx context.Context, js jetstream.JetStream, c Config) error {
	_, err := ensure(ctx, js, c, false)
	return err
}

// ensure is Ensure and EnsureClosed: closeNew makes a missing event stream
// closed. It reports whether the event stream is open.
func ensure(ctx context.Context, js jetstream.JetStream, c Config, closeNew bool) (bool, error) {
	if err := c.Validate(); err != nil {
		return false, err
	}
	open, err := ensureEventStream(ctx, js, c, closeNew)
	if err != nil {
		return false, err
	}
	sc := c.DeadLetterStreamConfig()
	if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
		return false, fmt.Errorf("create or update stream %s: %w", sc.Name, err)
	}
	return open, EnsureLockBucket(ctx, js, c)
}

// EnsureLockBucket creates the lock bucket, or updates it to the
// configuration.
func EnsureLockBucket(ctx context.Context, js jetstream.JetStream, c Config) error {
	if _, err := js.CreateOrUpdateKeyValue(ctx, c.LockBucketConfig()); err != nil {
		return fmt.Errorf("create or update lock bucket %s: %w", c.LockBucket(), err)
	}
	return nil
}

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

// FewerReplicas reports whether the event stream, the dead-letter stream
// or the lock bucket has fewer replicas than c asks for, or is missing: one made by an
// event bridge of a smaller configuration (a replica of profile small still
// leading while the chart moves to ha makes a stream NATS lost anew with
// one replica). Ensure then raises them; FewerReplicas never asks for
// fewer, so replicas of two configurations during a rolling update do not
// take turns undoing each other.
func FewerReplicas(ctx context.Context, js jetstream.JetStream, c Config) (bool, error) {
	for _, name := range []string{c.EventStream, c.DeadLetterStream, "KV_" + c.LockBucket()} {
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
