package store

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Defaults for the options.
const (
	// DefaultMaxFileSize caps one file write: 64 MiB.
	DefaultMaxFileSize = 64 << 20
	// DefaultMaxTurns caps the turns kept per conversation; older ones are dropped.
	DefaultMaxTurns = 1000
	// DefaultMaxTurnBytes caps the content of one conversation turn: 1 MiB.
	DefaultMaxTurnBytes = 1 << 20
	// DefaultLockTimeout is how long Open waits for the lock on state.db
	// before it fails with ErrInUse.
	DefaultLockTimeout = time.Second
	// DefaultMaxStore is the quota on the files directory: 10 GiB. It bounds
	// what many sender identities (each within DefaultMaxPartial) can fill;
	// an existing directory over it keeps its files, and only new writes
	// are refused.
	DefaultMaxStore = 10 << 30
	// DefaultAuditMaxBytes is the size at which audit.jsonl is rotated:
	// 64 MiB.
	DefaultAuditMaxBytes = 64 << 20
	// DefaultAuditKeep is how many rotated audit logs are kept
	// (audit.jsonl.1 to audit.jsonl.5).
	DefaultAuditKeep = 5
	// DefaultMaxConversations caps the conversations kept; the least
	// recently used are dropped first.
	DefaultMaxConversations = 10000
	// DefaultConversationTTL is how long a conversation is kept after its
	// last turn: 30 days.
	DefaultConversationTTL = 30 * 24 * time.Hour
)

// Names inside the data dir.
const (
	filesDirName = "files"
	dbFileName   = "state.db"
	auditName    = "audit.jsonl"
)

// Sentinel errors. Every error of this package reads "store: op: ..." and
// wraps one of these where one applies; test with errors.Is. An operation on
// a closed Store, Files or finished Partial wraps net.ErrClosed (the one
// closed sentinel of this package, as of every owner in mcpv2), and a second
// Close of a Store or Partial returns it.
var (
	// ErrInvalidName is wrapped when a file name is not a plain name, or names
	// something that is not a regular file (a symlink, a directory).
	ErrInvalidName = errors.New("invalid file name")
	// ErrNotFound is wrapped when a file does not exist.
	ErrNotFound = errors.New("file not found")
	// ErrTooLarge is wrapped when a file write or a conversation turn exceeds
	// its size limit; the message names the limit.
	ErrTooLarge = errors.New("too large")
	// ErrInvalidKey is wrapped when a conversation key is empty or longer
	// than MaxKeyLen bytes.
	ErrInvalidKey = errors.New("invalid conversation key")
	// ErrInUse is wrapped by Open when another process (another mcpv2 node)
	// holds the data dir's lock.
	ErrInUse = errors.New("data dir in use by another mcpv2 node")
)

// config is what the options set.
type config struct {
	filesDir         string
	maxFileSize      int64
	maxTurns         int
	maxTurnBytes     int
	lockTimeout      time.Duration
	maxPartial       int64
	partialTTL       time.Duration
	maxStore         int64
	auditMaxBytes    int64
	auditKeep        int
	maxConversations int
	conversationTTL  time.Duration
	taskTTL          time.Duration
	maxTasks         int
	maxTasksBytes    int64
	now              func() time.Time
}

// Option configures Open. An option returns an error for a value it cannot
// take; Open fails with it.
type Option func(*config) error

// positive sets v through set when it is above zero; its error names the
// option and the value refused.
func positive[T int | int64 | time.Duration](name string, v T, set func(T)) error {
	if v <= 0 {
		return fmt.Errorf("%s(%v): not positive", name, v)
	}
	set(v)
	return nil
}

// notNegative sets v through set when it is not below zero; its error
// names the option and the value refused.
func notNegative[T int | int64 | time.Duration](name string, v T, set func(T)) error {
	if v < 0 {
		return fmt.Errorf("%s(%v): negative", name, v)
	}
	set(v)
	return nil
}

// WithFilesDir sets the file skills' directory; relative paths are resolved
// against the working directory. The empty string, the default, means
// "<data-dir>/files". The directory is created 0700 if missing, and must not
// be the data dir itself.
func WithFilesDir(dir string) Option {
	return func(c *config) error { c.filesDir = dir; return nil }
}

// WithMaxFileSize sets the largest file Files.Write accepts, in bytes
// (default DefaultMaxFileSize). It must be positive.
func WithMaxFileSize(n int64) Option {
	return func(c *config) error {
		return positive("WithMaxFileSize", n, func(v int64) { c.maxFileSize = v })
	}
}

// WithMaxTurns sets how many turns a conversation keeps (default
// DefaultMaxTurns); the oldest are dropped first. It must be positive.
func WithMaxTurns(n int) Option {
	return func(c *config) error {
		return positive("WithMaxTurns", n, func(v int) { c.maxTurns = v })
	}
}

// WithMaxTurnBytes sets the largest content of one turn, in bytes (default
// DefaultMaxTurnBytes). It must be positive.
func WithMaxTurnBytes(n int) Option {
	return func(c *config) error {
		return positive("WithMaxTurnBytes", n, func(v int) { c.maxTurnBytes = v })
	}
}

// WithLockTimeout sets how long Open waits for another process to release
// the data dir (default DefaultLockTimeout). It must be positive: waiting
// forever is not offered.
func WithLockTimeout(d time.Duration) Option {
	return func(c *config) error {
		return positive("WithLockTimeout", d, func(v time.Duration) { c.lockTimeout = v })
	}
}

// WithMaxPartial caps the total bytes of one sender's unfinished uploads
// (Files.OpenPartial), counting each open upload at its declared size
// (default DefaultMaxPartial; 0: no cap). When a new upload does not fit,
// that sender's oldest partial uploads are dropped. It must not be negative.
func WithMaxPartial(n int64) Option {
	return func(c *config) error {
		return notNegative("WithMaxPartial", n, func(v int64) { c.maxPartial = v })
	}
}

// WithPartialTTL sets how long a partial upload is kept without a write
// (default DefaultPartialTTL). It must be positive.
func WithPartialTTL(d time.Duration) Option {
	return func(c *config) error {
		return positive("WithPartialTTL", d, func(v time.Duration) { c.partialTTL = v })
	}
}

// WithMaxStore sets the quota on the files directory in bytes: committed
// files, partial uploads and writes in progress together (default
// DefaultMaxStore; 0: no quota). A write that would exceed it is refused
// with a *QuotaError. It must not be negative.
func WithMaxStore(n int64) Option {
	return func(c *config) error {
		return notNegative("WithMaxStore", n, func(v int64) { c.maxStore = v })
	}
}

// WithAuditRotation rotates audit.jsonl when a line would take it over
// maxBytes: it becomes audit.jsonl.1 (the older ones shift up by one, and
// the one beyond keep is removed) and a fresh audit.jsonl is started
// (default DefaultAuditMaxBytes and DefaultAuditKeep). maxBytes 0 never
// rotates; keep 0 keeps no rotated file. Neither may be negative.
func WithAuditRotation(maxBytes int64, keep int) Option {
	return func(c *config) error {
		if maxBytes < 0 || keep < 0 {
			return fmt.Errorf("WithAuditRotation(%d, %d): neither may be negative", maxBytes, keep)
		}
		c.auditMaxBytes, c.auditKeep = maxBytes, keep
		return nil
	}
}

// WithMaxConversations caps the conversations kept (default
// DefaultMaxConversations; 0: no cap): starting one more drops the least
// recently appended to. It must not be negative.
func WithMaxConversations(n int) Option {
	return func(c *config) error {
		return notNegative("WithMaxConversations", n, func(v int) { c.maxConversations = v })
	}
}

// WithConversationTTL sets how long a conversation is kept after its last
// turn (default DefaultConversationTTL; 0: forever). Older ones are removed
// by Sweep. It must not be negative.
func WithConversationTTL(d time.Duration) Option {
	return func(c *config) error {
		return notNegative("WithConversationTTL", d, func(v time.Duration) { c.conversationTTL = v })
	}
}

// WithTaskTTL sets how long a finished task (SaveTask) is kept after its
// last update (default DefaultTaskTTL; 0 keeps them until the cap). It must
// not be negative.
func WithTaskTTL(d time.Duration) Option {
	return func(c *config) error {
		return notNegative("WithTaskTTL", d, func(v time.Duration) { c.taskTTL = v })
	}
}

// WithMaxTasks caps the tasks kept (default DefaultMaxTasks; 0: no cap). It
// must not be negative.
func WithMaxTasks(n int) Option {
	return func(c *config) error {
		return notNegative("WithMaxTasks", n, func(v int) { c.maxTasks = v })
	}
}

// WithClock sets the clock of conversation use times (default time.Now).
// Partial uploads age by the file system's clock. It must not be nil.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("WithClock(nil): nil clock")
		}
		c.now = now
		return nil
	}
}

// Store is a node's embedded store. Create it with Open; it is safe for
// concurrent use, and Close releases it.
type Store struct {
	dir              string
	maxTurns         int
	maxTurnBytes     int
	maxConversations int
	conversationTTL  time.Duration
	taskTTL          time.Duration
	maxTasks         int
	maxTasksBytes    int64 // 0: no cap
	now              func() time.Time

	db    *bolt.DB
	files *Files

	auditMu       sync.Mutex // guards audit, auditSize, auditClosed and auditSubs: every write, rotation, the final Sync and Close
	audit         *os.File   // nil once closed, or after a failed rotation until the next line reopens it
	auditSize     int64      // bytes in the current audit.jsonl
	auditClosed   bool
	auditMaxBytes int64 // 0: never rotate
	auditKeep     int
	auditSubs     map[*auditSub]struct{} // SubscribeAudit's, at most MaxAuditSubscribers

	closed atomic.Bool
}

// Open opens (creating as needed, mode 0700) the store in dataDir and takes
// its lock; it fails with an error wrapping ErrInUse if another process holds
// it for longer than the lock timeout. It removes stale temp files left in
// the files directory by a crash, and partial uploads (Files.OpenPartial)
// untouched for the partial TTL, and counts the bytes in the directory for
// its quota. A failed Open leaves nothing open.
func Open(dataDir string, opts ...Option) (_ *Store, err error) {
	cfg := config{
		maxFileSize:  DefaultMaxFileSize,
		maxTurns:     DefaultMaxTurns,
		maxTurnBytes: DefaultMaxTurnBytes,
		lockTimeout:  DefaultLockTimeout,

		maxPartial:       DefaultMaxPartial,
		partialTTL:       DefaultPartialTTL,
		maxStore:         DefaultMaxStore,
		auditMaxBytes:    DefaultAuditMaxBytes,
		auditKeep:        DefaultAuditKeep,
		maxConversations: DefaultMaxConversations,
		conversationTTL:  DefaultConversationTTL,
		taskTTL:          DefaultTaskTTL,
		maxTasks:         DefaultMaxTasks,
		maxTasksBytes:    DefaultMaxTasksBytes,
		now:              time.Now,
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("store: open: %w", err)
		}
	}
	if dataDir == "" {
		return nil, errors.New("store: open: empty data dir")
	}
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	filesDir := filepath.Join(dir, filesDirName)
	if cfg.filesDir != "" {
		if filesDir, err = filepath.Abs(cfg.filesDir); err != nil {
			return nil, fmt.Errorf("store: open: files dir: %w", err)
		}
		if filesDir == dir {
			return nil, fmt.Errorf("store: open: files dir %s is the data dir; use a subdirectory", filesDir)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}

	s := &Store{dir: dir, maxTurns: cfg.maxTurns, maxTurnBytes: cfg.maxTurnBytes,
		maxConversations: cfg.maxConversations, conversationTTL: cfg.conversationTTL, now: cfg.now,
		taskTTL: cfg.taskTTL, maxTasks: cfg.maxTasks, maxTasksBytes: cfg.maxTasksBytes,
		auditMaxBytes: cfg.auditMaxBytes, auditKeep: cfg.auditKeep}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.release())
		}
	}()

	// The lock comes first: nothing else in the data dir is touched by a
	// second node.
	s.db, err = bolt.Open(filepath.Join(dir, dbFileName), 0o600, &bolt.Options{Timeout: cfg.lockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("store: open %s: %w", dir, ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", dbFileName, err)
	}
	if err = s.db.Update(func(tx *bolt.Tx) error { return errors.Join(s.initConversations(tx), s.initTasks(tx)) }); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", dbFileName, err)
	}

	if s.files, err = openFiles(filesDir, filesConfig{
		maxSize: cfg.maxFileSize, maxPartial: cfg.maxPartial, partialTTL: cfg.partialTTL, quota: cfg.maxStore,
	}); err != nil {
		return nil, err
	}
	if _, err = s.files.RemoveStaleParts(time.Now()); err != nil {
		return nil, err
	}

	if err = s.openAudit(); err != nil {
		return nil, err
	}
	return s, nil
}

// Dir returns the data dir as an absolute path.
func (s *Store) Dir() string { return s.dir }

// Files returns the file skills' store. It is never nil for an open Store.
func (s *Store) Files() *Files { return s.files }

// Close fsyncs and closes the audit log, closes the files directory and the
// database, and releases the data dir's lock. It waits for running database
// transactions. It is idempotent: a second call returns net.ErrClosed.
// Files already returned by Files.Open stay readable until their caller
// closes them.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return net.ErrClosed
	}
	return s.release()
}

// release closes whatever is open; it serves Close and a failed Open.
func (s *Store) release() error {
	var errs []error
	s.auditMu.Lock()
	s.auditClosed = true
	for sub := range s.auditSubs {
		delete(s.auditSubs, sub)
		close(sub.ch)
	}
	if s.audit != nil {
		if err := s.audit.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("store: close %s: %w", auditName, err))
		}
		if err := s.audit.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close %s: %w", auditName, err))
		}
		s.audit = nil
	}
	s.auditMu.Unlock()
	if s.files != nil {
		if err := s.files.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.db != nil {
		if err := s.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close %s: %w", dbFileName, err))
		}
	}
	return errors.Join(errs...)
}
