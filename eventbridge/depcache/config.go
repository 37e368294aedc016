package depcache

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of Config.
const (
	// DefaultMaxObjectBytes bounds one object: 64 MiB, a large
	// node_modules compressed.
	DefaultMaxObjectBytes = 64 << 20
	// DefaultNamespaceShares makes a namespace's quota a 32nd of the
	// bucket (64 MiB of the default 2 GiB, one largest object): 32
	// namespaces at their quota fill it, where 8 did with a quota of 256
	// MiB.
	DefaultNamespaceShares = 32
	// DefaultMaxNamespaceUploads is how many uploads one namespace takes
	// at once on one server: 1 of DefaultMaxUploads.
	DefaultMaxNamespaceUploads = 1
	// DefaultMaxUploads is how many uploads one server takes at once.
	DefaultMaxUploads = 4
	// DefaultUploadTimeout bounds one upload, from its headers read to
	// its object stored: 64 MiB at about 1 MiB/s.
	DefaultUploadTimeout = time.Minute
	// DefaultMaxNamespaceObjects bounds the objects one namespace stores:
	// 64 dependency sets, its Functions' distinct ones and a few past ones.
	DefaultMaxNamespaceObjects = 64
	// DefaultMaxIdle is how long an object no pod read is kept: 3 days,
	// a long weekend of a Function at zero.
	DefaultMaxIdle = 72 * time.Hour
	// DefaultMaxDownloads is how many downloads one server serves at
	// once: each may hold up to an object (DefaultMaxObjectBytes) of
	// chunks NATS sent ahead of a slow client, 512 MiB at worst.
	DefaultMaxDownloads = 8
	// DefaultMaxNamespaceDownloads is how many downloads one namespace
	// has at once on one server: 2 of DefaultMaxDownloads (a quarter, as
	// for uploads); the pods of a scale-out that are refused ask again
	// after Retry-After.
	DefaultMaxNamespaceDownloads = 2
	// DefaultDownloadWriteTimeout bounds each write of a download to its
	// client: 10 s in which it read nothing ends the download.
	DefaultDownloadWriteTimeout = 10 * time.Second
	// DefaultDownloadTimeout bounds one download: 64 MiB at about
	// 1 MiB/s, as an upload, and as long as a pod waits for one.
	DefaultDownloadTimeout = time.Minute
)

// ErrInvalidConfig is wrapped by the errors of Config.Validate and of
// New's options.
var ErrInvalidConfig = errors.New("invalid dependency cache configuration")

// Config bounds the cache; DefaultConfig has working values.
type Config struct {
	// MaxObjectBytes bounds one object's size, counted as its body
	// streams in: past it the upload is cut and answered 413, nothing
	// stored.
	MaxObjectBytes int64
	// MaxNamespaceBytes bounds the bytes of the objects one namespace
	// stores: an upload that would pass it is answered 507, nothing
	// stored. 0 (the default): a NamespaceShares-th of the bucket. A namespace's usage is the sum of its objects' sizes in the
	// index (Run: a watch of the bucket, so right across the event
	// bridge's replicas, never a listing of the bucket), plus the bytes of
	// the namespace's other uploads under way on the same server; uploads
	// under way on other replicas at the same moment are not seen, so a
	// namespace may pass it by what they carry.
	MaxNamespaceBytes int64
	// MaxUploads is how many uploads one server takes at once; more are
	// answered 429 at once.
	MaxUploads int
	// UploadTimeout bounds one upload, reading its body included: a body
	// slower than that is cut (408), nothing stored.
	UploadTimeout time.Duration
	// MaxNamespaceObjects bounds how many objects one namespace stores
	// (right across the replicas, as MaxNamespaceBytes): an upload past it
	// is answered 507, nothing stored.
	MaxNamespaceObjects int
	// NamespaceShares makes MaxNamespaceBytes, when it is 0, the bucket's
	// size divided by it (2 GiB when the bucket is unlimited): so many
	// namespaces at their quota fill the bucket, never fewer.
	NamespaceShares int
	// MaxNamespaceUploads is how many of MaxUploads one namespace takes
	// at once on one server; more are answered 429 at once, so that a
	// namespace's slow uploads leave the others' slots free.
	MaxNamespaceUploads int
	// MaxIdle is how long an object no pod read is kept: then it is
	// removed (within MaxIdle/16, at most 10 minutes, by every replica),
	// so that the dependency sets no Function of the namespace uses any
	// more leave its quota, and a bad first write does not stay. A read
	// keeps an object (recorded at most every MaxIdle/4); the bucket's
	// max age (stream.Config.DependencyMaxAge) still bounds its life.
	MaxIdle time.Duration
	// MaxDownloads is how many downloads (GET) one server serves at once;
	// more are answered 429 at once (HEAD is not counted). Each holds a
	// JetStream consumer whose chunks NATS sends ahead of a slow client,
	// up to about the object (MaxObjectBytes) in the server's memory, so
	// that MaxDownloads × MaxObjectBytes bounds what downloads hold.
	MaxDownloads int
	// MaxNamespaceDownloads is how many of MaxDownloads one namespace
	// takes at once on one server; more are answered 429 at once, so that
	// a namespace's slow or stalled downloads leave the others' slots free.
	MaxNamespaceDownloads int
	// DownloadWriteTimeout bounds each write of a download to its client:
	// a client that takes nothing for that long has its download ended
	// (the connection closed), its consumer and its slot released.
	DownloadWriteTimeout time.Duration
	// DownloadTimeout bounds one download, from its object opened to its
	// last byte sent: a client slower than that has it ended likewise.
	DownloadTimeout time.Duration
}

// DefaultConfig returns the default bounds.
func DefaultConfig() Config {
	return Config{MaxObjectBytes: DefaultMaxObjectBytes, NamespaceShares: DefaultNamespaceShares,
		MaxUploads: DefaultMaxUploads, MaxNamespaceUploads: DefaultMaxNamespaceUploads, UploadTimeout: DefaultUploadTimeout,
		MaxNamespaceObjects: DefaultMaxNamespaceObjects, MaxIdle: DefaultMaxIdle,
		MaxDownloads: DefaultMaxDownloads, MaxNamespaceDownloads: DefaultMaxNamespaceDownloads,
		DownloadWriteTimeout: DefaultDownloadWriteTimeout, DownloadTimeout: DefaultDownloadTimeout}
}

// Validate returns an error wrapping ErrInvalidConfig that names the
// first bad bound.
func (c Config) Validate() error {
	switch {
	case c.MaxObjectBytes < 1:
		return fmt.Errorf("%w: the object bound must be positive, not %d", ErrInvalidConfig, c.MaxObjectBytes)
	case c.MaxNamespaceBytes < 0:
		return fmt.Errorf("%w: the namespace quota must be positive, or 0 for a share of the bucket, not %d", ErrInvalidConfig, c.MaxNamespaceBytes)
	case c.NamespaceShares < 1:
		return fmt.Errorf("%w: the bucket's shares must be at least 1, not %d", ErrInvalidConfig, c.NamespaceShares)
	case c.MaxNamespaceUploads < 1:
		return fmt.Errorf("%w: a namespace's uploads at once must be at least 1, not %d", ErrInvalidConfig, c.MaxNamespaceUploads)
	case c.MaxUploads < 1:
		return fmt.Errorf("%w: uploads at once must be at least 1, not %d", ErrInvalidConfig, c.MaxUploads)
	case c.UploadTimeout <= 0:
		return fmt.Errorf("%w: the upload timeout must be positive, not %s", ErrInvalidConfig, c.UploadTimeout)
	case c.MaxNamespaceObjects < 1:
		return fmt.Errorf("%w: a namespace's objects must be at least 1, not %d", ErrInvalidConfig, c.MaxNamespaceObjects)
	case c.MaxIdle <= 0:
		return fmt.Errorf("%w: the idle time must be positive, not %s", ErrInvalidConfig, c.MaxIdle)
	case c.MaxDownloads < 1:
		return fmt.Errorf("%w: downloads at once must be at least 1, not %d", ErrInvalidConfig, c.MaxDownloads)
	case c.MaxNamespaceDownloads < 1:
		return fmt.Errorf("%w: a namespace's downloads at once must be at least 1, not %d", ErrInvalidConfig, c.MaxNamespaceDownloads)
	case c.DownloadWriteTimeout <= 0:
		return fmt.Errorf("%w: the download write timeout must be positive, not %s", ErrInvalidConfig, c.DownloadWriteTimeout)
	case c.DownloadTimeout <= 0:
		return fmt.Errorf("%w: the download timeout must be positive, not %s", ErrInvalidConfig, c.DownloadTimeout)
	}
	return nil
}
