package keys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"

	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// FileName is the name of the keys file in a node's data dir.
const FileName = "keys.json"

// lockSuffix names the lock file of a keys file: keys.json.lock.
const lockSuffix = ".lock"

// DefaultLockTimeout is how long Add and Revoke wait for another writer's
// lock on the keys file before they give up (WithLockTimeout).
const DefaultLockTimeout = 10 * time.Second

// racyWindow is how recently modified a keys file must be for VerifyKey to
// read it again on every call, its stat not being trusted to show a second
// change (see the package comment).
const racyWindow = 2 * time.Second

// The refusals of VerifyKey. Their texts are meant for the caller who
// presented the key (the edge puts them in its 401 answer), so they carry
// no package prefix and never quote the secret.
var (
	// ErrUnknownKey is the error of a secret that is no key's of the ring,
	// or has not the shape of a key at all.
	ErrUnknownKey = errors.New("unknown key")
	// ErrRevoked is the error of a revoked key; the wrapping error says
	// when it was revoked.
	ErrRevoked = errors.New("key revoked")
	// ErrExpired is the error of an expired key; the wrapping error says
	// when it expired.
	ErrExpired = errors.New("key expired")
	// ErrUnreadable is the error of every key while the keys file cannot
	// be read or parsed; the reason goes to the Ring's logger, not to the
	// caller.
	ErrUnreadable = errors.New("the node's key file is unreadable")
)

// The errors of Add and Revoke.
var (
	// ErrNameInUse is the error of Add with the name of an active key.
	ErrNameInUse = errors.New("key name in use")
	// ErrNoKey is the error of Revoke with a name no key has.
	ErrNoKey = errors.New("no such key")
	// ErrAlreadyRevoked is the error of Revoke with the name of a revoked
	// key.
	ErrAlreadyRevoked = errors.New("key already revoked")
	// ErrLocked is the error of Add and Revoke when another writer held
	// the keys file's lock for longer than the lock timeout.
	ErrLocked = errors.New("keys file locked by another writer")
)

// The statuses of a key (Key.Status).
const (
	StatusActive  = "active"
	StatusRevoked = "revoked"
	StatusExpired = "expired"
)

// Key is an API key as the ring keeps it: everything but its secret.
type Key struct {
	// Name names the key; the policy grants it skills as "key:<Name>".
	Name string
	// Grants are the skills the key grants on top of the policy's ("*":
	// every skill); nil for none.
	Grants []string
	// Created is when the key was added (UTC, whole seconds when Add made
	// it).
	Created time.Time
	// Expires is when the key stops being valid; zero: never.
	Expires time.Time
	// Revoked is when the key was revoked; zero: it is not.
	Revoked time.Time

	// sum is the SHA-256 of the secret.
	sum [32]byte
}

// Status says whether k is StatusActive, StatusRevoked or StatusExpired at
// now. A key that is both revoked and expired is revoked.
func (k Key) Status(now time.Time) string {
	switch {
	case !k.Revoked.IsZero():
		return StatusRevoked
	case !k.Expires.IsZero() && !now.Before(k.Expires):
		return StatusExpired
	}
	return StatusActive
}

// clone returns k with its own Grants.
func (k Key) clone() Key {
	k.Grants = slices.Clone(k.Grants)
	return k
}

// Option configures Open.
type Option func(*config) error

// config is what the options set.
type config struct {
	clock       func() time.Time
	logger      *slog.Logger
	lockTimeout time.Duration
}

// WithClock sets the clock that decides expiry and stamps Add and Revoke
// (default time.Now). A nil clock is an error.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("WithClock: nil clock")
		}
		c.clock = now
		return nil
	}
}

// WithLogger sets where the ring logs: at Error when the keys file turns
// unreadable (once per change of the file), at Debug when it is read
// again. It never logs a secret. Default: nothing is logged; a nil logger
// is an error.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("WithLogger: nil logger")
		}
		c.logger = l
		return nil
	}
}

// WithLockTimeout sets how long Add and Revoke wait for the keys file's
// lock held by another writer (default DefaultLockTimeout); it must be
// positive.
func WithLockTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithLockTimeout(%s): want a positive duration", d)
		}
		c.lockTimeout = d
		return nil
	}
}

// Ring is the set of API keys of one keys file. The node verifies keys with
// it; the CLI adds and revokes them, each in its own process, with a Ring
// of its own on the same file.
//
// Every method is safe for concurrent use. VerifyKey, ActiveKeys and List
// see the file as it is at the call (see the package comment); Add and
// Revoke hold the file's lock (keys.json.lock) across read, change and
// write, so that concurrent writers, in this process or others, do not
// lose each other's changes.
type Ring struct {
	path     string
	lockPath string
	cfg      config

	// snap is the file as last read, nil when it must be read again.
	// Readers load it without a lock.
	snap atomic.Pointer[snapshot]
	// mu serializes the reads of the file that replace snap, and guards
	// lastErr.
	mu sync.Mutex
	// lastErr is the text of the last read's error ("" if it succeeded),
	// so that an unreadable file is logged once per change.
	lastErr string
	// wmu serializes this Ring's writers (Add, Revoke) in front of the
	// file lock.
	wmu sync.Mutex
}

// snapshot is the keys file as one read saw it.
type snapshot struct {
	// fi describes the file read; nil when there was none (or it could not
	// be opened).
	fi os.FileInfo
	// racy: the file was modified less than racyWindow before it was read,
	// so an unchanged stat does not prove an unchanged file.
	racy bool
	// err is why the file could not be read or parsed; keys is then empty.
	err error
	// data is the text read (nil when there was none, or on error), to
	// tell a file read again unchanged without parsing it.
	data  []byte
	keys  []Key
	bySum map[[32]byte]int // index into keys by the SHA-256 of the secret
}

// Open returns the ring of the keys file at path (<data-dir>/keys.json for
// a node; see FileName). A missing file (or directory) is an empty ring,
// and Add creates it. A file that cannot be read or parsed is an error
// that names it and says what is wrong.
func Open(path string, opts ...Option) (*Ring, error) {
	if path == "" {
		return nil, errors.New("keys: open: empty path")
	}
	cfg := config{clock: time.Now, logger: slog.New(slog.DiscardHandler), lockTimeout: DefaultLockTimeout}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("keys: open: %w", err)
		}
	}
	r := &Ring{path: path, lockPath: path + lockSuffix, cfg: cfg}
	if s := r.current(); s.err != nil {
		return nil, fmt.Errorf("keys: open: %w", s.err)
	}
	return r, nil
}

// Path returns the path of the ring's keys file.
func (r *Ring) Path() string { return r.path }

// current returns the snapshot of the file as it is now: the last one when
// the file's stat has not changed since it was read (and it was not racy),
// else a new read.
func (r *Ring) current() *snapshot {
	fi, err := os.Stat(r.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return r.reload(nil, false) // cannot stat: read it, which says why
	}
	if s := r.snap.Load(); s != nil && s.fresh(fi) {
		return s
	}
	return r.reload(fi, true)
}

// reload reads the file again, unless (when check) a concurrent call did
// so while this one waited and its snapshot is fresh for fi.
func (r *Ring) reload(fi os.FileInfo, check bool) *snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.snap.Load(); check && s != nil && s.fresh(fi) {
		return s
	}
	data, rfi, err := readRaw(r.path)
	s := &snapshot{fi: rfi, data: data}
	if rfi != nil {
		// time.Since (not the ring's clock): the file system's clock is
		// the machine's.
		s.racy = time.Since(rfi.ModTime()) < racyWindow
	}
	if prev := r.snap.Load(); err == nil && prev != nil && prev.err == nil && prev.data != nil && bytes.Equal(prev.data, data) {
		// The same text read again (a recent file, or one touched): keep
		// what was parsed from it.
		s.keys, s.bySum = prev.keys, prev.bySum
		r.snap.Store(s)
		return s
	}
	var keys []Key
	if err == nil && data != nil {
		keys, err = parse(r.path, data)
	}
	if err != nil {
		s.err, s.data = err, nil
		if msg := err.Error(); msg != r.lastErr {
			r.cfg.logger.Error("keys: the keys file is unreadable; every API key is refused until it is mended",
				"path", r.path, "err", err)
			r.lastErr = msg
		}
		r.snap.Store(s)
		return s
	}
	r.lastErr = ""
	s.keys = keys
	s.bySum = make(map[[32]byte]int, len(keys))
	for i, k := range keys {
		s.bySum[k.sum] = i
	}
	r.cfg.logger.Debug("keys: read the keys file", "path", r.path, "keys", len(keys))
	r.snap.Store(s)
	return s
}

// fresh reports whether s still describes the file whose stat is fi (nil:
// there is none).
func (s *snapshot) fresh(fi os.FileInfo) bool {
	if s.racy {
		return false
	}
	if s.fi == nil || fi == nil {
		return s.fi == nil && fi == nil && s.err == nil
	}
	return s.fi.Size() == fi.Size() && s.fi.ModTime().Equal(fi.ModTime()) && os.SameFile(s.fi, fi)
}

// VerifyKey returns the name and grants of the key whose secret is
// presented. It refuses, with an error wrapping ErrUnknownKey, ErrRevoked,
// ErrExpired or ErrUnreadable, a secret that is not a key's, and a key
// that is revoked or expired at the ring's clock; the error never quotes
// the secret. It sees the keys file as it is at the call: a revocation
// written by another process is seen by the next call. The grants returned
// are the caller's to keep. A revoked or expired key's name is returned
// with its error, for the audit line.
func (r *Ring) VerifyKey(secret string) (name string, grants []string, err error) {
	if !LooksLikeKey(secret) {
		return "", nil, fmt.Errorf("%w: an API key is %s and 43 base64url characters", ErrUnknownKey, protocol.KeyPrefix)
	}
	s := r.current()
	if s.err != nil {
		return "", nil, fmt.Errorf("%w: every key is refused until its operator mends it", ErrUnreadable)
	}
	i, ok := s.bySum[hashSecret(secret)]
	if !ok {
		return "", nil, fmt.Errorf("%w: no key of this node has this secret", ErrUnknownKey)
	}
	k := &s.keys[i]
	switch k.Status(r.cfg.clock()) {
	case StatusRevoked:
		return k.Name, nil, fmt.Errorf("%w at %s (key %q)", ErrRevoked, k.Revoked.Format(time.RFC3339), k.Name)
	case StatusExpired:
		return k.Name, nil, fmt.Errorf("%w at %s (key %q)", ErrExpired, k.Expires.Format(time.RFC3339), k.Name)
	}
	return k.Name, slices.Clone(k.Grants), nil
}

// ActiveKeys counts the keys that are neither revoked nor expired at the
// ring's clock, in the file as it is at the call; 0 while the file is
// unreadable (every key is then refused).
func (r *Ring) ActiveKeys() int {
	s := r.current()
	now := r.cfg.clock()
	n := 0
	for _, k := range s.keys {
		if k.Status(now) == StatusActive {
			n++
		}
	}
	return n
}

// List returns every key of the file as it is at the call, revoked and
// expired ones too, sorted by name; or the error that makes the file
// unreadable.
func (r *Ring) List() ([]Key, error) {
	s := r.current()
	if s.err != nil {
		return nil, fmt.Errorf("keys: list: %w", s.err)
	}
	out := make([]Key, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, k.clone())
	}
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Add adds a key named name that grants grants (nil: none beyond what the
// policy grants "key:<name>"; repeats are dropped) and expires after
// expires (0: never), and returns its secret, which is shown nowhere else:
// the file keeps only its SHA-256. name must follow the rules of
// protocol.ValidKeyName, each grant be a skill name or "*", and expires lie
// in [0, MaxExpires].
//
// A name may not be that of an active key (ErrNameInUse). The name of a
// revoked or expired key may be used again: the new key replaces that
// record, so the old one's history is lost but its secret stays refused
// (its hash is gone with it). The file and its directory are created when
// missing (the directory 0700).
func (r *Ring) Add(name string, grants []string, expires time.Duration) (secret string, k Key, err error) {
	if err := checkName(name); err != nil {
		return "", Key{}, fmt.Errorf("keys: add: %w", err)
	}
	if err := checkGrants(grants); err != nil {
		return "", Key{}, fmt.Errorf("keys: add: %w", err)
	}
	if expires < 0 || expires > MaxExpires {
		return "", Key{}, fmt.Errorf("keys: add: expiry %s: want 0 (never) up to %s", expires, MaxExpires)
	}
	if err := os.MkdirAll(filepath.Dir(r.path), 0o700); err != nil {
		return "", Key{}, fmt.Errorf("keys: add: %w", err)
	}
	err = r.update("add", func(keys []Key, now time.Time) ([]Key, error) {
		i := slices.IndexFunc(keys, func(k Key) bool { return k.Name == name })
		if i >= 0 && keys[i].Status(now) == StatusActive {
			return nil, fmt.Errorf("%w: %q is the name of an active key; revoke it first (mcpv2 key revoke %s), or pick another name", ErrNameInUse, name, name)
		}
		secret = newSecret()
		k = Key{Name: name, Created: now, sum: hashSecret(secret)}
		for _, g := range grants {
			if !slices.Contains(k.Grants, g) {
				k.Grants = append(k.Grants, g)
			}
		}
		if expires > 0 {
			k.Expires = now.Add(expires)
		}
		if i >= 0 {
			keys[i] = k
		} else {
			keys = append(keys, k)
		}
		return keys, nil
	})
	if err != nil {
		return "", Key{}, err
	}
	return secret, k.clone(), nil
}

// Revoke revokes the key named name at the ring's clock. A running node
// refuses it from its next request on. A name no key has is ErrNoKey; a key
// already revoked is ErrAlreadyRevoked (with when). An expired key may be
// revoked.
func (r *Ring) Revoke(name string) error {
	if _, err := os.Stat(filepath.Dir(r.path)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("keys: revoke: %w named %q (there is no %s)", ErrNoKey, name, r.path)
	}
	return r.update("revoke", func(keys []Key, now time.Time) ([]Key, error) {
		i := slices.IndexFunc(keys, func(k Key) bool { return k.Name == name })
		switch {
		case i < 0:
			return nil, fmt.Errorf("%w named %q in %s", ErrNoKey, name, r.path)
		case !keys[i].Revoked.IsZero():
			return nil, fmt.Errorf("%w: %q was revoked at %s", ErrAlreadyRevoked, name, keys[i].Revoked.Format(time.RFC3339))
		}
		keys[i].Revoked = now
		return keys, nil
	})
}

// update changes the file under its lock: it reads the file, passes its
// keys and the time (the ring's clock, UTC, whole seconds) to change, and
// writes what change returns. op names the operation in errors.
func (r *Ring) update(op string, change func(keys []Key, now time.Time) ([]Key, error)) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	unlock, err := r.lock()
	if err != nil {
		return fmt.Errorf("keys: %s: %w", op, err)
	}
	defer unlock()
	keys, _, err := readFile(r.path)
	if err != nil {
		return fmt.Errorf("keys: %s: %w", op, err)
	}
	keys, err = change(keys, r.cfg.clock().UTC().Truncate(time.Second))
	if err != nil {
		return fmt.Errorf("keys: %s: %w", op, err)
	}
	data, err := encode(keys)
	if err != nil {
		return fmt.Errorf("keys: %s: %w", op, err)
	}
	if len(data) > MaxFileSize {
		return fmt.Errorf("keys: %s: %s would grow past %d bytes: remove revoked and expired keys from it", op, r.path, MaxFileSize)
	}
	if err := transport.WriteFile(r.path, data); err != nil {
		return fmt.Errorf("keys: %s: write %s: %w", op, r.path, err)
	}
	r.snap.Store(nil) // the next reader reads what was written
	return nil
}

// lock takes the exclusive lock of the keys file, waiting up to the lock
// timeout, and returns its release. It locks a file of its own
// (keys.json.lock), never keys.json, which writers replace by rename. The
// lock is gofrs/flock's (flock(2) on Unix, LockFileEx on Windows): it is
// released by the kernel when a process dies holding it, and, being a lock
// of the open file, excludes other Rings of this process too.
func (r *Ring) lock() (func(), error) {
	fl := flock.New(r.lockPath, flock.SetPermissions(0o600))
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.lockTimeout)
	defer cancel()
	ok, err := fl.TryLockContext(ctx, 10*time.Millisecond)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		_ = fl.Close()
		return nil, fmt.Errorf("lock %s: %w", r.lockPath, err)
	}
	if !ok {
		_ = fl.Close()
		return nil, fmt.Errorf("%w: %s has been locked for over %s (by another mcpv2 key command?)", ErrLocked, r.lockPath, r.cfg.lockTimeout)
	}
	return func() { _ = fl.Close() }, nil
}
