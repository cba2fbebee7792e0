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
)

// Names inside the data dir.
const (
	filesDirName = "files"
	dbFileName   = "state.db"
	auditName    = "audit.jsonl"
)

// Sentinel errors. Every error of this package reads "store: op: ..." and
// wraps one of these where one applies; test with errors.Is.
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
	filesDir     string
	maxFileSize  int64
	maxTurns     int
	maxTurnBytes int
	lockTimeout  time.Duration
}

// Option configures Open.
type Option func(*config)

// WithFilesDir sets the file skills' directory; relative paths are resolved
// against the working directory. The empty string, the default, means
// "<data-dir>/files". The directory is created 0700 if missing, and must not
// be the data dir itself.
func WithFilesDir(dir string) Option { return func(c *config) { c.filesDir = dir } }

// WithMaxFileSize sets the largest file Files.Write accepts, in bytes
// (default DefaultMaxFileSize). It must be positive.
func WithMaxFileSize(n int64) Option { return func(c *config) { c.maxFileSize = n } }

// WithMaxTurns sets how many turns a conversation keeps (default
// DefaultMaxTurns); the oldest are dropped first. It must be positive.
func WithMaxTurns(n int) Option { return func(c *config) { c.maxTurns = n } }

// WithMaxTurnBytes sets the largest content of one turn, in bytes (default
// DefaultMaxTurnBytes). It must be positive.
func WithMaxTurnBytes(n int) Option { return func(c *config) { c.maxTurnBytes = n } }

// WithLockTimeout sets how long Open waits for another process to release
// the data dir (default DefaultLockTimeout). It must be positive: waiting
// forever is not offered.
func WithLockTimeout(d time.Duration) Option { return func(c *config) { c.lockTimeout = d } }

// Store is a node's embedded store. Create it with Open; it is safe for
// concurrent use, and Close releases it.
type Store struct {
	dir          string
	maxTurns     int
	maxTurnBytes int

	db    *bolt.DB
	files *Files

	auditMu sync.Mutex // guards audit: every write, the final Sync and Close
	audit   *os.File   // nil once closed

	closed atomic.Bool
}

// Open opens (creating as needed, mode 0700) the store in dataDir and takes
// its lock; it fails with an error wrapping ErrInUse if another process holds
// it for longer than the lock timeout. It removes stale temp files left in
// the files directory by a crash, and partial uploads (Files.OpenPartial)
// untouched for PartialTTL. A failed Open leaves nothing open.
func Open(dataDir string, opts ...Option) (_ *Store, err error) {
	cfg := config{
		maxFileSize:  DefaultMaxFileSize,
		maxTurns:     DefaultMaxTurns,
		maxTurnBytes: DefaultMaxTurnBytes,
		lockTimeout:  DefaultLockTimeout,
	}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case dataDir == "":
		return nil, errors.New("store: open: empty data dir")
	case cfg.maxFileSize <= 0:
		return nil, fmt.Errorf("store: open: max file size %d is not positive", cfg.maxFileSize)
	case cfg.maxTurns <= 0:
		return nil, fmt.Errorf("store: open: max turns %d is not positive", cfg.maxTurns)
	case cfg.maxTurnBytes <= 0:
		return nil, fmt.Errorf("store: open: max turn bytes %d is not positive", cfg.maxTurnBytes)
	case cfg.lockTimeout <= 0:
		return nil, fmt.Errorf("store: open: lock timeout %v is not positive", cfg.lockTimeout)
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

	s := &Store{dir: dir, maxTurns: cfg.maxTurns, maxTurnBytes: cfg.maxTurnBytes}
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
	if err = s.db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(convBucket)
		return err
	}); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", dbFileName, err)
	}

	if s.files, err = openFiles(filesDir, cfg.maxFileSize); err != nil {
		return nil, err
	}
	if _, err = s.files.RemoveStaleParts(time.Now()); err != nil {
		return nil, err
	}

	if s.audit, err = os.OpenFile(filepath.Join(dir, auditName), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", auditName, err)
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
