package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Resumable uploads (the blob protocol, SPEC §2) write into a partial file
// inside the files directory, under the reserved prefix partPrefix, so that
// the final commit is one rename within one directory through the os.Root:
// a reader sees the old file or the complete new one, never a part.

// partPrefix starts the name of every partial upload. List hides such names,
// users cannot choose them (ValidateName), and they are removed when
// untouched for the partial TTL (RemoveStaleParts). Unlike temp files they
// survive a restart, so that an upload interrupted by a crash of either side
// resumes where it stopped.
const partPrefix = ".mcpv2-part-"

// DefaultPartialTTL is how long a partial upload is kept without a write,
// unless WithPartialTTL says otherwise; older ones are removed when the
// store is opened and by RemoveStaleParts (Store.Sweep).
const DefaultPartialTTL = 24 * time.Hour

// DefaultMaxPartial caps the total of one sender's unfinished uploads
// (WithMaxPartial): 256 MiB, four uploads of the default largest file.
const DefaultMaxPartial = 256 << 20

// ErrHashMismatch is wrapped by Partial.Commit when the received content
// does not hash to the declared digest (the error names the hash and both
// digests). The partial upload is then discarded: nothing of it is
// visible, and a new upload starts from zero.
var ErrHashMismatch = errors.New("hash mismatch")

// ErrIncomplete is wrapped by Partial.Commit when fewer bytes than the
// declared size have been written.
var ErrIncomplete = errors.New("upload incomplete")

// Partial is one resumable upload into Files: the bytes received so far of
// a file whose name and size were declared up front, and its digest (of the
// upload's Hash) either up front too or only at the end (CommitSum). Get it
// from Files.OpenPartial or OpenPartialHash; it must end with exactly one
// of Commit, CommitSum,
// Close (keep the bytes for a later resume) or Discard. Only one Partial of
// a given upload is open at a time in the process (see Superseded). A
// Partial is not safe for concurrent use, except Superseded, Name, Size and
// the channel it returns.
type Partial struct {
	f      *Files
	name   string // target name
	part   string // partial file's name in the directory
	size   int64  // declared size
	alg    Hash   // the hash the upload is checked by
	want   string // declared digest of alg, lowercase hex; empty until CommitSum when not declared
	file   *os.File
	h      hash.Hash // alg's, of the bytes held
	off    int64
	lock   *partLock
	done   bool // set once Commit, Close or Discard has released the file
	closed bool // set by Close: a second Close returns net.ErrClosed

	dropped []DroppedUpload // the sender's older uploads dropped to admit this one
}

// DroppedUpload is an unfinished upload removed to make room for a newer one
// of the same sender (WithMaxPartial).
type DroppedUpload struct {
	// Name is the name the upload was for; empty when this process has not
	// seen the upload opened (it was left by an earlier run).
	Name string `json:"name,omitempty"`
	// Size is the upload's declared size; 0 when Name is empty.
	Size int64 `json:"size,omitempty"`
	// Have is how many of its bytes had arrived and were dropped.
	Have int64 `json:"have"`
}

// partMeta is what the store knows of a partial file it opened.
type partMeta struct {
	owner, name string
	size        int64
}

// partLock serializes the Partials of one upload within the process, and
// keeps sweeps and drops away from an open one.
type partLock struct {
	key        string
	size       int64         // the holder's declared size, once admitted; guarded by partLocks.mu
	superseded chan struct{} // closed when another opener waits for the lock
	once       sync.Once
	released   chan struct{} // closed when the holder lets go
}

// partLocks holds the lock of every open Partial, keyed by the partial
// file's absolute path, so that two Files on one directory share them. mu
// guards m.
var partLocks = struct {
	mu sync.Mutex
	m  map[string]*partLock
}{m: make(map[string]*partLock)}

// acquirePart takes the lock of key. When another Partial holds it, that one
// is told it is superseded and acquirePart waits until it lets go or ctx
// ends: the newest transfer of an upload wins, so a resumed transfer takes
// over from one whose connection died unnoticed.
func acquirePart(ctx context.Context, key string) (*partLock, error) {
	for {
		partLocks.mu.Lock()
		l := partLocks.m[key]
		if l == nil {
			l = &partLock{key: key, superseded: make(chan struct{}), released: make(chan struct{})}
			partLocks.m[key] = l
			partLocks.mu.Unlock()
			return l, nil
		}
		partLocks.mu.Unlock()
		l.once.Do(func() { close(l.superseded) })
		select {
		case <-l.released:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// tryAcquirePart takes the lock of key if no one holds it, without
// superseding a holder; nil means it is held. Sweeps and drops take it so
// that no upload opens the file while it is removed.
func tryAcquirePart(key string) *partLock {
	partLocks.mu.Lock()
	defer partLocks.mu.Unlock()
	if partLocks.m[key] != nil {
		return nil
	}
	l := &partLock{key: key, superseded: make(chan struct{}), released: make(chan struct{})}
	partLocks.m[key] = l
	return l
}

// heldPartSize returns the declared size of the open upload of key, and
// whether one is open (size 0 while it is not yet admitted, or while a
// sweep holds it).
func heldPartSize(key string) (int64, bool) {
	partLocks.mu.Lock()
	defer partLocks.mu.Unlock()
	l := partLocks.m[key]
	if l == nil {
		return 0, false
	}
	return l.size, true
}

// release lets go of the lock; it may be called once.
func (l *partLock) release() {
	partLocks.mu.Lock()
	if partLocks.m[l.key] == l {
		delete(partLocks.m, l.key)
	}
	partLocks.mu.Unlock()
	close(l.released)
}

// PartName returns the name of the partial file of an upload: the reserved
// prefix, a tag of owner (the uploader's identity: the first 8 bytes of its
// SHA-256 in hex, so that one sender's uploads are found by name for
// WithMaxPartial), a dash, and the hex SHA-256 of owner, name, size and the
// declared SHA-256 (empty when none is declared), each length-prefixed. Only
// the same uploader sending under the same name and size, and the same
// declared SHA-256, resumes it; an upload declared without one is keyed by
// owner, name and size alone, and whoever resumes it must check the kept
// bytes (Partial.PrefixSum) against its own. That key is the same whatever
// the upload's Hash, so an upload begun by SHA-256 resumes by BLAKE3 and
// the other way round (the kept bytes are rehashed by the resuming one's).
// A declared BLAKE3 digest d is keyed as "blake3:" + d.
func PartName(owner, name string, size int64, sha256hex string) string {
	return partName(owner, name, size, HashSHA256, sha256hex)
}

// partName is PartName for an upload of alg declared as sum (or not, "").
func partName(owner, name string, size int64, alg Hash, sum string) string {
	key := sum
	if alg != HashSHA256 && sum != "" {
		key = string(alg) + ":" + sum
	}
	h := sha256.New()
	var b [8]byte
	for _, s := range []string{owner, name, key} {
		binary.BigEndian.PutUint64(b[:], uint64(len(s)))
		h.Write(b[:])
		h.Write([]byte(s))
	}
	binary.BigEndian.PutUint64(b[:], uint64(size))
	h.Write(b[:])
	return ownerPrefix(owner) + hex.EncodeToString(h.Sum(nil))
}

// ownerPrefix starts the names of owner's partial files.
func ownerPrefix(owner string) string {
	t := sha256.Sum256([]byte(owner))
	return partPrefix + hex.EncodeToString(t[:8]) + "-"
}

// ValidSHA256 reports whether s is a SHA-256 in lowercase hex (64 digits).
func ValidSHA256(s string) bool { return HashSHA256.Valid(s) }

// OpenPartial opens the upload of name (size bytes hashing to sha256hex,
// lowercase hex, or to a hash given only at the end when sha256hex is empty)
// by owner, creating it or resuming the bytes kept from an earlier attempt:
// Offset says how many, and the running hash is rebuilt from them
// (PrefixSum). It is OpenPartialHash with HashSHA256.
func (f *Files) OpenPartial(ctx context.Context, owner, name string, size int64, sha256hex string) (*Partial, error) {
	return f.OpenPartialHash(ctx, owner, name, size, HashSHA256, sha256hex)
}

// OpenPartialHash opens the upload of name by owner, checked by the hash
// alg: size bytes whose digest is sum (lowercase hex), or is given only at
// the end when sum is empty. It creates the upload or resumes the bytes
// kept from an earlier attempt (by either hash when sum is empty, see
// PartName): Offset says how many, and the running hash is rebuilt from
// them (PrefixSum). A size over MaxSize gives an error wrapping ErrTooLarge; a bad
// name, or a name that is a symlink or directory, ErrInvalidName. When a
// Partial of the same upload is open in this process, it is superseded (its
// Superseded channel closes) and OpenPartial waits for it to let go, or for
// ctx to end.
//
// Quotas: the whole declared size counts against owner's cap on unfinished
// uploads (WithMaxPartial) from the start. When it does not fit, owner's
// oldest partial uploads that are not open are removed until it does
// (Dropped reports them); an upload larger than the cap alone, or one that
// does not fit beside owner's uploads in progress, gives a *QuotaError
// (QuotaPartial). The bytes still to come are then reserved against the
// directory's quota (WithMaxStore), or the upload is refused with a
// *QuotaError (QuotaStore). Safe for concurrent use.
func (f *Files) OpenPartialHash(ctx context.Context, owner, name string, size int64, alg Hash, sum string) (_ *Partial, err error) {
	const op = "open partial"
	if err := f.check(op, name); err != nil {
		return nil, err
	}
	switch {
	case !alg.Known():
		return nil, f.errorf(op, name, "unknown hash %.20q", alg)
	case size < 0:
		return nil, f.errorf(op, name, "negative size %d", size)
	case size > f.maxSize:
		return nil, f.errorf(op, name, "%d bytes is over the %d-byte limit: %w", size, f.maxSize, ErrTooLarge)
	case sum != "" && !alg.Valid(sum):
		return nil, f.errorf(op, name, "the declared %s is not 64 lowercase hex digits", alg)
	case f.maxPartial > 0 && size > f.maxPartial:
		return nil, f.errorf(op, name, "%w", &QuotaError{Quota: QuotaPartial, Limit: f.maxPartial, Need: size})
	}
	// The target must be a regular file or missing (a symlink is refused).
	// No credit for the file a commit would replace (unlike Write): an
	// upload may stop half-way and be kept for a resume while that file
	// stays, and both must fit the quota then. So replacing a file by a
	// blob upload needs room for both until the commit.
	if _, err := f.lstatRegular(op, name); err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	part := partName(owner, name, size, alg, sum)
	lock, err := acquirePart(ctx, filepath.Join(f.dir, part))
	if err != nil {
		return nil, f.errorf(op, name, "waiting for an earlier transfer of this upload: %w", err)
	}
	defer func() {
		if err != nil {
			lock.release()
		}
	}()
	if f.closed.Load() {
		return nil, f.errorf(op, name, "the store is closed: %w", net.ErrClosed)
	}
	var have int64 // the bytes kept from an earlier transfer, as far as admission counts them
	if st, err := f.root.Lstat(part); err == nil {
		if !st.Mode().IsRegular() {
			return nil, f.errorf(op, name, "partial file is not a regular file: %w", ErrInvalidName)
		}
		if st.Size() <= size { // a longer one is truncated below
			have = st.Size()
		}
	}
	dropped, reserved, err := f.admitPartial(owner, part, name, size, have, lock)
	if err != nil {
		return nil, f.errorf(op, name, "%w", err)
	}
	defer func() {
		if err != nil {
			f.release(reserved)
		}
	}()
	file, err := f.root.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, f.errorf(op, name, "%w", scrub(err))
	}
	defer func() {
		if err != nil {
			_ = file.Close()
		}
	}()
	st, err := file.Stat()
	if err != nil {
		return nil, f.errorf(op, name, "%w", scrub(err))
	}
	if !st.Mode().IsRegular() {
		return nil, f.errorf(op, name, "partial file is not a regular file: %w", ErrInvalidName)
	}
	off := st.Size()
	if off > size { // cannot be ours: start over (admitPartial reserved all of size)
		if err := file.Truncate(0); err != nil {
			return nil, f.errorf(op, name, "%w", scrub(err))
		}
		f.release(off)
		off = 0
	}
	h := alg.New()
	if off > 0 {
		if err := HashPrefix(ctx, h, file, off); err != nil {
			return nil, f.errorf(op, name, "rehash the kept bytes: %w", scrub(err))
		}
	}
	if _, err := file.Seek(off, io.SeekStart); err != nil {
		return nil, f.errorf(op, name, "%w", scrub(err))
	}
	if off+reserved != size { // the file changed between admission and open
		f.release(off + reserved - size)
	}
	return &Partial{f: f, name: name, part: part, size: size, alg: alg, want: sum, file: file, h: h, off: off, lock: lock, dropped: dropped}, nil
}

// admitPartial applies the quotas to the upload whose lock the caller holds:
// it drops owner's oldest partial uploads not open until size fits within
// the per-sender cap, and reserves the bytes still to come against the
// directory's quota. have is the size of the kept partial file (0 when it
// is missing, or longer than size and will be truncated: the caller
// releases what it truncates). It returns the dropped uploads and the bytes
// reserved, size minus have.
func (f *Files) admitPartial(owner, part, name string, size, have int64, lock *partLock) (dropped []DroppedUpload, reserved int64, err error) {
	f.partMu.Lock()
	defer f.partMu.Unlock()
	if f.maxPartial > 0 {
		if dropped, err = f.makeRoom(owner, part, size); err != nil {
			return dropped, 0, err
		}
	}
	reserved = size - have
	if err := f.reserve(reserved, 0); err != nil {
		return dropped, 0, err
	}
	partLocks.mu.Lock()
	lock.size = size
	partLocks.mu.Unlock()
	f.partMeta[part] = partMeta{owner: owner, name: name, size: size}
	return dropped, reserved, nil
}

// makeRoom drops owner's oldest partial uploads that are not open until an
// upload of size fits beside the rest within maxPartial. An open upload
// counts with its declared size, since it may grow to it. Called under
// partMu.
func (f *Files) makeRoom(owner, part string, size int64) ([]DroppedUpload, error) {
	names, err := f.readDir()
	if err != nil {
		return nil, scrub(err)
	}
	type cand struct {
		name string
		size int64
		mod  time.Time
	}
	var cands []cand
	prefix := ownerPrefix(owner)
	total := size
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) || n == part {
			continue
		}
		st, err := f.root.Lstat(n)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if held, open := heldPartSize(filepath.Join(f.dir, n)); open {
			total += max(held, st.Size())
			continue
		}
		total += st.Size()
		cands = append(cands, cand{n, st.Size(), st.ModTime()})
	}
	if total > f.maxPartial {
		least := total // with every upload not in progress dropped
		for _, c := range cands {
			least -= c.size
		}
		if least > f.maxPartial { // refuse without dropping anything
			return nil, &QuotaError{Quota: QuotaPartial, Limit: f.maxPartial, Used: least - size, Need: size}
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if c := a.mod.Compare(b.mod); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	var dropped []DroppedUpload
	for _, c := range cands {
		if total <= f.maxPartial {
			break
		}
		have, ok, err := f.removePart(c.name, nil)
		if err != nil {
			return dropped, err
		}
		if !ok { // opened meanwhile: it stays, with its declared size
			if held, _ := heldPartSize(filepath.Join(f.dir, c.name)); held > c.size {
				total += held - c.size
			}
			continue
		}
		total -= c.size
		meta := f.partMeta[c.name]
		delete(f.partMeta, c.name)
		dropped = append(dropped, DroppedUpload{Name: meta.name, Size: meta.size, Have: have})
	}
	if total > f.maxPartial {
		return dropped, &QuotaError{Quota: QuotaPartial, Limit: f.maxPartial, Used: total - size, Need: size}
	}
	return dropped, nil
}

// removePart removes the partial file name unless an upload holds it open,
// or still (under the lock) remove, when set, says no; ok is false when it
// stays. A file already gone counts as removed.
func (f *Files) removePart(name string, remove func(os.FileInfo) bool) (have int64, ok bool, err error) {
	l := tryAcquirePart(filepath.Join(f.dir, name))
	if l == nil {
		return 0, false, nil
	}
	defer l.release()
	if remove != nil {
		if st, err := f.root.Lstat(name); err == nil && !remove(st) {
			return 0, false, nil
		}
	}
	have, err = f.removeCounted(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, false, fmt.Errorf("store: remove partial upload %s: %w", quote(name), scrub(err))
	}
	return have, true, nil
}

// PartialHeld returns how many bytes of owner's upload of name the store
// keeps, without opening it: the upload OpenPartialHash with the same
// arguments would resume (size bytes checked by alg, declared as sum, or
// undeclared when sum is empty, which is the same upload whatever alg; see
// PartName). It is 0 when there is none, when the kept file is longer than
// size (OpenPartialHash would start it over), or for a hash not Known.
// Safe for concurrent use.
func (f *Files) PartialHeld(owner, name string, size int64, alg Hash, sum string) int64 {
	if !alg.Known() || f.check("stat partial", name) != nil {
		return 0
	}
	st, err := f.root.Lstat(partName(owner, name, size, alg, sum))
	if err != nil || !st.Mode().IsRegular() || st.Size() > size {
		return 0
	}
	return st.Size()
}

// forget drops what the store knew of the partial file part.
func (f *Files) forget(part string) {
	f.partMu.Lock()
	delete(f.partMeta, part)
	f.partMu.Unlock()
}

// Name returns the name the upload is committed under.
func (p *Partial) Name() string { return p.name }

// Size returns the declared size.
func (p *Partial) Size() int64 { return p.size }

// Offset returns how many bytes the upload holds: where the sender resumes.
func (p *Partial) Offset() int64 { return p.off }

// Hash returns the hash the upload is checked by.
func (p *Partial) Hash() Hash { return p.alg }

// PrefixSum returns the lowercase hex digest (of the upload's Hash) of the
// Offset bytes the upload holds: what a sender resuming an upload declared
// without a hash compares with its own first Offset bytes.
func (p *Partial) PrefixSum() string { return hex.EncodeToString(p.h.Sum(nil)) }

// Restart drops the bytes the upload holds and starts it again from zero
// (Offset 0), keeping its place in the quotas: the sender found that they
// are not the start of its file. It is an error on a finished Partial.
func (p *Partial) Restart() error {
	if p.done {
		return fmt.Errorf("store: restart partial %s: the upload is finished: %w", quote(p.name), net.ErrClosed)
	}
	// The dropped bytes were counted as used; they stay reserved for the
	// bytes to come, so the quota count does not change.
	if err := p.file.Truncate(0); err != nil {
		return fmt.Errorf("store: restart partial %s: %w", quote(p.name), scrub(err))
	}
	if _, err := p.file.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("store: restart partial %s: %w", quote(p.name), scrub(err))
	}
	p.h.Reset()
	p.off = 0
	return nil
}

// Dropped returns the same sender's older unfinished uploads that were
// removed to make room for this one (WithMaxPartial), oldest first; nil
// when none were.
func (p *Partial) Dropped() []DroppedUpload { return p.dropped }

// Superseded returns a channel that is closed when another OpenPartial of
// the same upload waits for this one: its owner should stop (Close) soon.
func (p *Partial) Superseded() <-chan struct{} { return p.lock.superseded }

// asyncHashMin is the smallest write that Partial.Write hashes on another
// goroutine while it writes the file.
const asyncHashMin = 64 << 10

// Write appends b, hashing it. Bytes beyond the declared size are refused
// as a whole with an error wrapping ErrTooLarge.
func (p *Partial) Write(b []byte) (int, error) {
	if p.done {
		return 0, fmt.Errorf("store: write partial %s: the upload is finished: %w", quote(p.name), net.ErrClosed)
	}
	if int64(len(b)) > p.size-p.off {
		return 0, fmt.Errorf("store: write partial %s: more than the declared %d bytes: %w", quote(p.name), p.size, ErrTooLarge)
	}
	var n int
	var err error
	if len(b) < asyncHashMin {
		n, err = p.file.Write(b)
		p.h.Write(b[:n])
	} else {
		// Hash beside the write, on another core when there is one. A short
		// write is rare (a full disk): then hash again what landed.
		done := make(chan struct{})
		go func() {
			p.h.Write(b)
			close(done)
		}()
		n, err = p.file.Write(b)
		<-done
		if n < len(b) {
			p.h.Reset()
			if herr := HashPrefix(context.Background(), p.h, p.file, p.off+int64(n)); herr != nil && err == nil {
				err = herr
			}
		}
	}
	p.off += int64(n)
	if err != nil {
		return n, fmt.Errorf("store: write partial %s: %w", quote(p.name), scrub(err))
	}
	return n, nil
}

// Commit checks that the upload is complete and hashes to the declared
// digest, then makes it visible under its name atomically (fsync, rename
// within the directory, fsync of the directory), replacing any file of that
// name. On a hash mismatch the partial file is removed and the error wraps
// ErrHashMismatch and names the hash and both digests; an incomplete upload
// gives ErrIncomplete and is kept. Either way the Partial is finished. An
// upload opened without a declared digest commits with CommitSum instead
// (Commit gives an error wrapping ErrHashMismatch and keeps the bytes). The
// FileInfo returned, and the store's record of the file, carry the digest
// of the upload's Hash (see Hash for the other).
func (p *Partial) Commit() (FileInfo, error) { return p.CommitSum("") }

// CommitSum is Commit with the content's digest (of the upload's Hash,
// lowercase hex) given now, as the blob protocol's trailer gives it: the
// upload must hash to sum, and to the digest declared at open when one was
// (so a sum that differs from the declared one is a mismatch). An empty sum
// means the declared one alone.
func (p *Partial) CommitSum(sum string) (_ FileInfo, err error) {
	const op = "commit"
	if p.done {
		return FileInfo{}, p.f.errorf(op, p.name, "the upload is finished: %w", net.ErrClosed)
	}
	if p.off != p.size {
		err := p.f.errorf(op, p.name, "%d of %d bytes received: %w", p.off, p.size, ErrIncomplete)
		return FileInfo{}, errors.Join(err, p.Close())
	}
	if sum == "" && p.want == "" {
		err := p.f.errorf(op, p.name, "no %s was declared to check the content against: %w", p.alg, ErrHashMismatch)
		return FileInfo{}, errors.Join(err, p.Close())
	}
	got := hex.EncodeToString(p.h.Sum(nil))
	for _, want := range []string{p.want, sum} {
		if want != "" && got != want {
			err := p.f.errorf(op, p.name, "the received content's %s is %s, not the declared %s; the partial upload was discarded: %w", p.alg, got, want, ErrHashMismatch)
			return FileInfo{}, errors.Join(err, p.Discard())
		}
	}
	p.done = true
	defer p.lock.release()
	keep := false // on a failure after the checks, the bytes stay for a retry
	defer func() {
		if err != nil && !keep {
			_, _ = p.f.removeCounted(p.part)
			p.f.forget(p.part)
		}
	}()
	if err = p.file.Sync(); err != nil {
		_ = p.file.Close()
		keep = true
		return FileInfo{}, p.f.errorf(op, p.name, "%w", scrub(err))
	}
	st, err := p.file.Stat()
	if cerr := p.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		keep = true
		return FileInfo{}, p.f.errorf(op, p.name, "%w", scrub(err))
	}
	if _, err = p.f.lstatRegular(op, p.name); err != nil && !errors.Is(err, ErrNotFound) {
		return FileInfo{}, err
	}
	if err = p.f.renameCounted(p.part, p.name, 0, p.size); err != nil {
		keep = true // a quota refusal too: the bytes stay, for a retry once there is room
		return FileInfo{}, p.f.errorf(op, p.name, "%w", scrub(err))
	}
	p.f.forget(p.part)
	if err := p.f.syncDir(); err != nil {
		return FileInfo{}, p.f.errorf(op, p.name, "sync directory: %w", scrub(err))
	}
	p.f.remember(p.name, st, p.alg, got)
	info := FileInfo{Filename: p.name, Size: p.size, Modified: st.ModTime().UTC()}
	info.setSum(p.alg, got)
	return info, nil
}

// Close keeps the bytes received so far for a later resume: it fsyncs and
// closes the partial file, so that the next OpenPartial's Offset counts only
// bytes on stable storage. On a Partial already committed or discarded it is
// a no-op (so a deferred Close after Commit is safe); a second Close returns
// net.ErrClosed.
func (p *Partial) Close() error {
	if p.closed {
		return net.ErrClosed
	}
	p.closed = true
	if p.done {
		return nil
	}
	p.done = true
	defer p.lock.release()
	p.f.release(p.size - p.off) // the reservation of the bytes that did not come
	err := p.file.Sync()
	if cerr := p.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: close partial %s: %w", quote(p.name), scrub(err))
	}
	return nil
}

// Discard removes the partial file: the upload starts from zero next time.
// It is a no-op on a finished Partial.
func (p *Partial) Discard() error {
	if p.done {
		return nil
	}
	p.done = true
	defer p.lock.release()
	p.f.release(p.size - p.off)
	_ = p.file.Close()
	p.f.forget(p.part)
	if _, err := p.f.removeCounted(p.part); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: discard partial %s: %w", quote(p.name), scrub(err))
	}
	return nil
}

// RemoveStaleParts removes the partial uploads not written to since
// now minus the partial TTL (WithPartialTTL), except those open in this
// process, and returns how many it removed. Open calls it, and so does
// Store.Sweep, which a running node calls periodically. Safe for concurrent
// use.
func (f *Files) RemoveStaleParts(now time.Time) (int, error) {
	if f.closed.Load() {
		return 0, fmt.Errorf("store: remove stale partial uploads: the store is closed: %w", net.ErrClosed)
	}
	names, err := f.readDir()
	if err != nil {
		return 0, fmt.Errorf("store: remove stale partial uploads: %w", scrub(err))
	}
	removed := 0
	var errs []error
	for _, name := range names {
		if !strings.HasPrefix(name, partPrefix) {
			continue
		}
		st, err := f.root.Lstat(name)
		if err != nil || now.Sub(st.ModTime()) < f.partialTTL {
			continue
		}
		stale := func(st os.FileInfo) bool { return now.Sub(st.ModTime()) >= f.partialTTL }
		_, ok, err := f.removePart(name, stale) // not while an upload holds it, nor once touched
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			f.forget(name)
			removed++
		}
	}
	return removed, errors.Join(errs...)
}
