package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// FileInfo describes a stored file, as the file skills report it.
type FileInfo struct {
	// Filename is the file's plain name.
	Filename string `json:"filename"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the lowercase hex SHA-256 of the content. Open and List
	// always give it; a Partial committed by BLAKE3, and OpenHash asked for
	// BLAKE3, give it only when the store knows it already (see Hash).
	SHA256 string `json:"sha256"`
	// BLAKE3 is the lowercase hex BLAKE3-256 of the content when the store
	// knows it (the file was received over blob 1.2.0, or a reader asked
	// for it since it last changed); empty, and left out of the JSON,
	// otherwise.
	BLAKE3 string `json:"blake3,omitempty"`
	// Modified is the file's modification time, in UTC.
	Modified time.Time `json:"modified"`
}

// Sum returns the digest of h in i, empty when i does not carry it or h is
// not Known.
func (i FileInfo) Sum(h Hash) string {
	if p := h.Pick(&i.SHA256, &i.BLAKE3); p != nil {
		return *p
	}
	return ""
}

// setSum sets the digest of h, which must be Known, in i.
func (i *FileInfo) setSum(h Hash, sum string) { *h.Pick(&i.SHA256, &i.BLAKE3) = sum }

// Files is the file skills' directory. Every access goes through one
// *os.Root, so nothing outside the directory is reachable. Get it from
// Store.Files; it is safe for concurrent use. Concurrent writes of one name
// each land atomically and the last rename wins.
type Files struct {
	root       *os.Root
	dir        string
	maxSize    int64
	maxPartial int64         // one sender's unfinished uploads, in bytes; 0: no cap
	partialTTL time.Duration // partial uploads untouched this long are stale
	quota      int64         // the whole directory, in bytes; 0: no quota
	closed     atomic.Bool

	mu    sync.Mutex           // guards cache
	cache map[string]cacheItem // file name -> the digests known of it

	// hashes runs one computation of a digest the cache lacks per name,
	// hash and file version, however many readers ask for it at once
	// (digest).
	hashes singleflight.Group
	// hashHook, when set (by tests), is called as a computation of a
	// missing digest starts.
	hashHook func(name string, h Hash)

	// qmu guards used, and makes each rename or removal one step with the
	// stat of the file it replaces or removes, so that used stays exact.
	qmu  sync.Mutex
	used int64 // bytes of the regular files in the directory, plus reservations

	// partMu serializes the admission of partial uploads (the per-sender
	// cap: scan, drop, reserve) and guards partMeta.
	partMu   sync.Mutex
	partMeta map[string]partMeta // partial file name -> what it uploads, as far as known

	chMu    sync.Mutex    // guards changed; taken last (renameCounted holds qmu)
	changed chan struct{} // closed, and replaced, at each change of the listed files
}

// filesConfig is what openFiles needs from the options.
type filesConfig struct {
	maxSize    int64
	maxPartial int64
	partialTTL time.Duration
	quota      int64
}

// cacheItem remembers a file's digests while its identity, size and mtime
// are unchanged: those it was verified with, and those computed since for a
// reader. An empty one is not known.
type cacheItem struct {
	st   os.FileInfo
	sums FileInfo // SHA256 and BLAKE3 only
}

// openFiles creates (0700) and opens dir, removes stale temp files, and
// counts the bytes in it for the quota.
func openFiles(dir string, c filesConfig) (*Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: open files dir: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("store: open files dir: %w", err)
	}
	f := &Files{root: root, dir: dir, maxSize: c.maxSize, maxPartial: c.maxPartial, partialTTL: c.partialTTL, quota: c.quota,
		cache: make(map[string]cacheItem), partMeta: make(map[string]partMeta), changed: make(chan struct{})}
	if err := f.removeStale(); err != nil {
		return nil, errors.Join(err, root.Close())
	}
	return f, nil
}

// removeStale removes temp files left by a process killed mid-write, and
// sets the quota count from the sizes of the regular files that remain, in
// the same pass over the directory. openFiles calls it once, before the
// Files is shared.
func (f *Files) removeStale() error {
	names, err := f.readDir()
	if err != nil {
		return fmt.Errorf("store: open files dir: %w", err)
	}
	var errs []error
	var total int64
	for _, name := range names {
		if strings.HasPrefix(name, tempPrefix) {
			if err := f.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("store: remove stale temp file %s: %w", quote(name), scrub(err)))
			}
			continue
		}
		st, err := f.root.Lstat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			errs = append(errs, fmt.Errorf("store: open files dir: %w", scrub(err)))
		case st.Mode().IsRegular():
			total += st.Size()
		}
	}
	f.used = total
	return errors.Join(errs...)
}

// Dir returns the directory's absolute path, for the operator; it never
// appears in errors.
func (f *Files) Dir() string { return f.dir }

// MaxSize returns the largest file Write accepts, in bytes.
func (f *Files) MaxSize() int64 { return f.maxSize }

// Write stores the content of r under name, atomically: readers see the old
// file or the new one, never a part, and a crash at any point leaves no
// partial file. It hashes while writing. Content longer than MaxSize gives an
// error wrapping ErrTooLarge and leaves nothing behind. A name that is not a
// plain name, or that names a symlink or a directory, gives ErrInvalidName.
// Content that would take the directory over its quota (WithMaxStore; the
// bytes of a file it replaces are credited) gives a *QuotaError, wrapping
// ErrQuota, as soon as the first byte over it arrives, and leaves nothing
// behind. An error from r is returned wrapped.
func (f *Files) Write(name string, r io.Reader) (_ FileInfo, err error) {
	const op = "write"
	if err := f.check(op, name); err != nil {
		return FileInfo{}, err
	}
	var credit int64
	if st, err := f.lstatRegular(op, name); err == nil {
		credit = st.Size()
	} else if !errors.Is(err, ErrNotFound) {
		return FileInfo{}, err
	}
	gate := &quotaGate{f: f, credit: credit}
	defer func() {
		if err != nil {
			f.release(gate.reserved)
		}
	}()

	tmp := tempPrefix + rand.Text()
	tf, err := f.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return FileInfo{}, f.errorf(op, name, "%w", scrub(err))
	}
	defer func() {
		if err != nil {
			if tf != nil {
				_ = tf.Close()
			}
			_ = f.root.Remove(tmp)
		}
	}()

	h := sha256.New()
	limit := f.maxSize + 1 // one byte more than allowed tells "too large" from "exactly the cap"
	if limit <= 0 {
		limit = math.MaxInt64
	}
	n, err := io.Copy(io.MultiWriter(gate, tf, h), io.LimitReader(r, limit))
	if err != nil {
		return FileInfo{}, f.errorf(op, name, "%w", scrub(err))
	}
	if n > f.maxSize {
		return FileInfo{}, f.errorf(op, name, "over the %d-byte limit: %w", f.maxSize, ErrTooLarge)
	}
	if err = tf.Sync(); err != nil {
		return FileInfo{}, f.errorf(op, name, "%w", scrub(err))
	}
	st, err := tf.Stat()
	if err != nil {
		return FileInfo{}, f.errorf(op, name, "%w", scrub(err))
	}
	err = tf.Close()
	tf = nil
	if err != nil {
		return FileInfo{}, f.errorf(op, name, "%w", scrub(err))
	}
	if err = f.renameCounted(tmp, name, credit, n); err != nil {
		return FileInfo{}, f.errorf(op, name, "%w", scrub(err))
	}
	gate.reserved = 0 // the reservation is the file's now
	if err = f.syncDir(); err != nil {
		return FileInfo{}, f.errorf(op, name, "sync directory: %w", scrub(err))
	}
	sum := hex.EncodeToString(h.Sum(nil))
	f.remember(name, st, HashSHA256, sum)
	return FileInfo{Filename: name, Size: n, SHA256: sum, Modified: st.ModTime().UTC()}, nil
}

// Open opens name for reading, with its FileInfo. The caller must close the
// file. The file's Name, and the errors its methods return, carry the host
// path: do not pass them verbatim to a remote caller. The SHA-256 comes from
// the in-memory cache when the file is unchanged, otherwise it is computed
// without moving the file's offset; the BLAKE3 is given when known.
// Errors wrap ErrInvalidName or ErrNotFound where they apply. It is OpenHash
// with HashSHA256 and a context that never ends; a caller that may go away
// (a skill) uses OpenHash.
func (f *Files) Open(name string) (*os.File, FileInfo, error) {
	return f.OpenHash(context.Background(), name, HashSHA256)
}

// OpenHash is Open for a reader that needs the digest of h (SHA-256 or
// BLAKE3): it computes only that one when the store does not know it, and
// gives the other when known. Concurrent readers of one file version share
// one computation of a digest. When ctx ends while this caller computes a
// digest, it stops and returns ctx's error; one that waits for another
// reader's computation waits for it (it would otherwise hash the same bytes
// itself). HashNone computes none; another hash that is not Known is an
// error.
func (f *Files) OpenHash(ctx context.Context, name string, h Hash) (_ *os.File, _ FileInfo, err error) {
	const op = "open"
	if h != HashNone && !h.Known() {
		return nil, FileInfo{}, f.errorf(op, name, "unknown hash %.20q", h)
	}
	if err := f.check(op, name); err != nil {
		return nil, FileInfo{}, err
	}
	if _, err := f.lstatRegular(op, name); err != nil {
		return nil, FileInfo{}, err
	}
	// os.Root keeps even a racing swap of name for a symlink inside the
	// directory; the fstat below makes sure a regular file was opened.
	file, err := f.root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, FileInfo{}, f.errorf(op, name, "%w", ErrNotFound)
	}
	if err != nil {
		return nil, FileInfo{}, f.errorf(op, name, "%w", scrub(err))
	}
	defer func() {
		if err != nil {
			_ = file.Close()
		}
	}()
	st, err := file.Stat()
	if err != nil {
		return nil, FileInfo{}, f.errorf(op, name, "%w", scrub(err))
	}
	if !st.Mode().IsRegular() {
		return nil, FileInfo{}, f.errorf(op, name, "not a regular file: %w", ErrInvalidName)
	}
	info, err := f.describe(ctx, name, st, file, h)
	if err != nil {
		return nil, FileInfo{}, f.errorf(op, name, "%w", scrub(err))
	}
	return file, info, nil
}

// Stat returns name's FileInfo without reading the file: its size and
// modification time, and the digests the store knows of it (either may be
// empty; Open and OpenHash compute them). Errors are Open's.
func (f *Files) Stat(name string) (FileInfo, error) {
	const op = "stat"
	if err := f.check(op, name); err != nil {
		return FileInfo{}, err
	}
	st, err := f.lstatRegular(op, name)
	if err != nil {
		return FileInfo{}, err
	}
	info, _ := f.cached(name, st)
	info.Filename, info.Size, info.Modified = name, st.Size(), st.ModTime().UTC()
	return info, nil
}

// List returns the stored files sorted by name. Temp files, symlinks,
// directories and names ValidateName refuses are not listed. Each has its
// SHA-256, and its BLAKE3 when known. Digests come from the in-memory cache
// when a file's identity, size and mtime are unchanged, so listing is cheap
// after the first time (a file received by BLAKE3 is hashed by SHA-256 on
// the first List after it arrived). It is ListContext with a context that
// never ends.
func (f *Files) List() ([]FileInfo, error) { return f.ListContext(context.Background()) }

// ListContext is List for a caller that may go away: when ctx ends it stops,
// also in the middle of hashing a file, and returns ctx's error. Digests
// are computed as OpenHash computes them, shared with concurrent readers.
func (f *Files) ListContext(ctx context.Context) ([]FileInfo, error) {
	const op = "list"
	if f.closed.Load() {
		return nil, fmt.Errorf("store: %s: %w", op, net.ErrClosed)
	}
	names, err := f.readDir()
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, scrub(err))
	}
	out := make([]FileInfo, 0, len(names))
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		if nameProblem(name) != "" {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("store: %s: %w", op, err)
		}
		info, ok, err := f.listOne(ctx, name)
		if err != nil {
			return nil, f.errorf(op, name, "%w", scrub(err))
		}
		if ok {
			out = append(out, info)
			seen[name] = true
		}
	}
	f.prune(seen)
	slices.SortFunc(out, func(a, b FileInfo) int { return strings.Compare(a.Filename, b.Filename) })
	return out, nil
}

// prune drops the cache entries of files that are gone or changed (removed
// or replaced behind the store's back) among those whose names a listing
// did not see. An entry is kept when its file is still there, unchanged:
// it was committed after the listing read the directory.
func (f *Files) prune(seen map[string]bool) {
	type entry struct {
		name string
		st   os.FileInfo
	}
	var unseen []entry
	f.mu.Lock()
	for name, c := range f.cache {
		if !seen[name] {
			unseen = append(unseen, entry{name, c.st})
		}
	}
	f.mu.Unlock()
	for _, e := range unseen {
		if st, err := f.root.Lstat(e.name); err == nil && sameVersion(st, e.st) {
			continue // the file of the entry is there
		}
		f.mu.Lock()
		if c, ok := f.cache[e.name]; ok && sameVersion(c.st, e.st) { // not replaced meanwhile
			delete(f.cache, e.name)
		}
		f.mu.Unlock()
	}
}

// listOne describes one directory entry; ok is false when it vanished or is
// not a regular file.
func (f *Files) listOne(ctx context.Context, name string) (_ FileInfo, ok bool, _ error) {
	lst, err := f.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return FileInfo{}, false, nil
	}
	if err != nil {
		return FileInfo{}, false, err
	}
	if !lst.Mode().IsRegular() {
		return FileInfo{}, false, nil
	}
	if sums, ok := f.cached(name, lst); ok && sums.SHA256 != "" {
		return FileInfo{Filename: name, Size: lst.Size(), SHA256: sums.SHA256, BLAKE3: sums.BLAKE3, Modified: lst.ModTime().UTC()}, true, nil
	}
	file, err := f.root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return FileInfo{}, false, nil
	}
	if err != nil {
		return FileInfo{}, false, err
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return FileInfo{}, false, err
	}
	if !st.Mode().IsRegular() {
		return FileInfo{}, false, nil
	}
	info, err := f.describe(ctx, name, st, file, HashSHA256)
	return info, err == nil, err
}

// Delete removes name. A missing file gives an error wrapping ErrNotFound; a
// name that is not a plain name, or names a symlink or a directory, gives
// ErrInvalidName.
func (f *Files) Delete(name string) error {
	const op = "delete"
	if err := f.check(op, name); err != nil {
		return err
	}
	if _, err := f.lstatRegular(op, name); err != nil {
		return err
	}
	_, err := f.removeCounted(name)
	if errors.Is(err, fs.ErrNotExist) {
		return f.errorf(op, name, "%w", ErrNotFound)
	}
	if err != nil {
		return f.errorf(op, name, "%w", scrub(err))
	}
	f.mu.Lock()
	delete(f.cache, name)
	f.mu.Unlock()
	f.notifyChanged()
	if err := f.syncDir(); err != nil {
		return f.errorf(op, name, "sync directory: %w", scrub(err))
	}
	return nil
}

// Changed returns a channel that is closed at the next change of the
// listed files: a write, a committed upload, a delete. A watcher takes a new
// channel after each close, then lists; a change between the two is seen
// by the list. Safe for concurrent use.
func (f *Files) Changed() <-chan struct{} {
	f.chMu.Lock()
	defer f.chMu.Unlock()
	return f.changed
}

// notifyChanged closes the current Changed channel and makes the next.
func (f *Files) notifyChanged() {
	f.chMu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.chMu.Unlock()
}

// check refuses a closed store and a name that is not plain.
func (f *Files) check(op, name string) error {
	if why := nameProblem(name); why != "" {
		return f.errorf(op, name, "%s: %w", why, ErrInvalidName)
	}
	if f.closed.Load() {
		return f.errorf(op, name, "%w", net.ErrClosed)
	}
	return nil
}

// lstatRegular stats name without following a symlink and refuses anything
// but a regular file; a missing name gives ErrNotFound.
func (f *Files) lstatRegular(op, name string) (os.FileInfo, error) {
	st, err := f.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, f.errorf(op, name, "%w", ErrNotFound)
	}
	if err != nil {
		return nil, f.errorf(op, name, "%w", scrub(err))
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return nil, f.errorf(op, name, "is a symlink: %w", ErrInvalidName)
	}
	if !st.Mode().IsRegular() {
		return nil, f.errorf(op, name, "not a regular file: %w", ErrInvalidName)
	}
	return st, nil
}

// describe returns name's FileInfo from st, with the digests the cache
// knows of it, hashing file by need (without moving its offset) when the
// cache does not know that one (digest).
func (f *Files) describe(ctx context.Context, name string, st os.FileInfo, file *os.File, need Hash) (FileInfo, error) {
	info, _ := f.cached(name, st)
	if need != HashNone && info.Sum(need) == "" {
		sum, err := f.digest(ctx, name, st, file, need)
		if err != nil {
			return FileInfo{}, err
		}
		info.setSum(need, sum)
	}
	info.Filename, info.Size, info.Modified = name, st.Size(), st.ModTime().UTC()
	return info, nil
}

// flight is what one computation of digest gives its callers: the digest,
// and the version of the file it is of.
type flight struct {
	st  os.FileInfo
	sum string
}

// digest computes need's digest of file, the version st of name, and
// remembers it. Concurrent callers for the same name, hash, size and mtime
// share one computation, run by the first of them with its ctx: the others
// wait for it, and compute it anew (the first of them again for all) when
// it stopped because the first one's ctx ended while theirs goes on. The
// rare file of the same size and mtime but another identity is hashed
// alone.
func (f *Files) digest(ctx context.Context, name string, st os.FileInfo, file *os.File, need Hash) (string, error) {
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%d", need, name, st.Size(), st.ModTime().UnixNano())
	for {
		v, err, _ := f.hashes.Do(key, func() (any, error) {
			// A computation that ended just before this one began
			// remembered the digest.
			if c, ok := f.cached(name, st); ok && c.Sum(need) != "" {
				return flight{st, c.Sum(need)}, nil
			}
			if f.hashHook != nil {
				f.hashHook(name, need)
			}
			sum, err := hashSum(ctx, need, file, st.Size())
			if err != nil {
				return nil, err
			}
			f.remember(name, st, need, sum)
			return flight{st, sum}, nil
		})
		if err == nil {
			if r := v.(flight); sameVersion(r.st, st) {
				return r.sum, nil
			}
			sum, err := hashSum(ctx, need, file, st.Size())
			if err == nil {
				f.remember(name, st, need, sum)
			}
			return sum, err
		}
		if ctx.Err() != nil || !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return "", err
		}
		// The caller that computed went away; this one has not.
	}
}

// cached returns the digests the cache knows of name, if it holds them for
// the same file, size and mtime as st (SHA256 and BLAKE3 set, either
// possibly empty).
func (f *Files) cached(name string, st os.FileInfo) (FileInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.cache[name]
	if !ok || !sameVersion(c.st, st) {
		return FileInfo{}, false
	}
	return c.sums, true
}

// sameVersion reports whether a and b describe the same file with the same
// size and mtime.
func sameVersion(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// remember caches name's digest of h for the file st describes, beside the
// digests known of that same file. It replaces the entry of another file of
// the name only when st is the file the name has now: a reader that
// finishes hashing an earlier file after a newer one was committed must
// not make the store forget the digests the newer one was verified with.
func (f *Files) remember(name string, st os.FileInfo, h Hash, sum string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.cache[name]
	if ok && !sameVersion(c.st, st) {
		// Under mu, so that a commit's remember of the file that replaces
		// st's, which runs after its rename, comes after this stat.
		cur, err := f.root.Lstat(name)
		if err != nil || !sameVersion(cur, st) {
			return
		}
	}
	if !ok || !sameVersion(c.st, st) {
		c = cacheItem{st: st}
	}
	c.sums.setSum(h, sum)
	f.cache[name] = c
}

// readDir returns the names in the directory, unsorted.
func (f *Files) readDir() ([]string, error) {
	d, err := f.root.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// syncDir fsyncs the directory so a rename or removal survives a crash.
// Windows cannot fsync a directory; NTFS journals the rename itself.
func (f *Files) syncDir() error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := f.root.Open(".")
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// close closes the root; operations already running finish first.
func (f *Files) close() error {
	if !f.closed.CompareAndSwap(false, true) {
		return nil
	}
	if err := f.root.Close(); err != nil {
		return fmt.Errorf("store: close files dir: %w", err)
	}
	return nil
}

// errorf builds "store: op "name": ..." errors.
func (f *Files) errorf(op, name, format string, args ...any) error {
	return fmt.Errorf("store: %s %s: "+format, append([]any{op, quote(name)}, args...)...)
}

// scrub drops the path from a file system error: files opened through the
// root carry the directory's host path in their name, and errors reach
// remote callers. The underlying error (for errors.Is) is kept.
func scrub(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return fmt.Errorf("%s: %w", le.Op, le.Err)
	}
	return err
}
