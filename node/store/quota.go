package store

import (
	"errors"
	"fmt"
	"io"

	"github.com/mcpv2/mcpv2/protocol"
)

// Disk quotas of the files directory.
//
// The store keeps a running count of the bytes in the files directory
// (Files.used): it is initialised by one scan when the store is opened and
// kept up to date by every write, rename and removal the store makes, so no
// write rescans the directory. Space is reserved before it is written:
// Files.Write reserves each chunk as it arrives, and Files.OpenPartial
// reserves the rest of a declared upload up front, so a write is refused
// before the bytes reach the disk and the directory never holds more than
// the quota (WithMaxStore), except that a write replacing a file may
// briefly hold both while the new one is written (its result is checked
// again when it lands). Files put in the
// directory behind the store's back are counted at the next Open.

// The quotas a QuotaError names.
const (
	// QuotaStore is the quota on the whole files directory: committed
	// files, partial uploads and writes in progress (WithMaxStore).
	QuotaStore = "max-store"
	// QuotaPartial is the quota on one sender's unfinished uploads
	// (WithMaxPartial).
	QuotaPartial = "max-partial"
)

// ErrQuota is wrapped (through a *QuotaError) when a write would take the
// files directory over its quota, or one sender's unfinished uploads over
// theirs.
var ErrQuota = errors.New("quota exceeded")

// QuotaError is the error of a write refused by a quota. It wraps ErrQuota,
// and errors.As turns it into a *protocol.Error with code
// protocol.CodeToolExecution (-32004) and data
// {"quota","limit_bytes","used_bytes","need_bytes"}, so that every face
// reports the same clear refusal. Its text names the quota and the current
// use, never a host path.
type QuotaError struct {
	// Quota is QuotaStore or QuotaPartial.
	Quota string
	// Limit is the quota, in bytes.
	Limit int64
	// Used is how many bytes counted against the quota when the write was
	// refused (for QuotaStore, including space reserved by writes in
	// progress; for QuotaPartial, the sender's other unfinished uploads that
	// could not be dropped).
	Used int64
	// Need is how many more bytes the refused write needed.
	Need int64
}

// Error says which quota refused how many bytes, and the current use.
func (e *QuotaError) Error() string {
	switch e.Quota {
	case QuotaPartial:
		if e.Used == 0 {
			return fmt.Sprintf("%v: an upload of %d bytes exceeds this node's %d-byte cap on one sender's unfinished uploads (%s)",
				ErrQuota, e.Need, e.Limit, e.Quota)
		}
		return fmt.Sprintf("%v: this sender's uploads in progress hold %d bytes of this node's %d-byte cap on one sender's unfinished uploads (%s); an upload of %d bytes does not fit: try again when they end",
			ErrQuota, e.Used, e.Limit, e.Quota, e.Need)
	default:
		return fmt.Sprintf("%v: this node's store quota (%s) is %d bytes and %d are in use; %d more bytes do not fit",
			ErrQuota, e.Quota, e.Limit, e.Used, e.Need)
	}
}

// Unwrap returns ErrQuota.
func (e *QuotaError) Unwrap() error { return ErrQuota }

// As sets a **protocol.Error target to the refusal as a JSON-RPC error.
func (e *QuotaError) As(target any) bool {
	p, ok := target.(**protocol.Error)
	if !ok {
		return false
	}
	*p = &protocol.Error{Code: protocol.CodeToolExecution, Message: e.Error(), Data: map[string]any{
		"quota": e.Quota, "limit_bytes": e.Limit, "used_bytes": e.Used, "need_bytes": e.Need,
	}}
	return true
}

// Usage returns the bytes counted in the files directory (committed files,
// partial uploads, and space reserved by writes in progress) and the quota
// (0: none). Safe for concurrent use.
func (f *Files) Usage() (used, quota int64) {
	f.qmu.Lock()
	defer f.qmu.Unlock()
	return f.used, f.quota
}

// reserve counts n more bytes against the quota, or refuses them with a
// *QuotaError. credit is the size of a file the write will replace, whose
// bytes are freed when it lands: the write is refused only if the result
// would exceed the quota.
func (f *Files) reserve(n, credit int64) error {
	f.qmu.Lock()
	defer f.qmu.Unlock()
	if f.quota > 0 && f.used+n-credit > f.quota {
		return &QuotaError{Quota: QuotaStore, Limit: f.quota, Used: f.used, Need: n}
	}
	f.used += n
	return nil
}

// release gives back n reserved or freed bytes.
func (f *Files) release(n int64) {
	f.qmu.Lock()
	f.used -= n
	f.qmu.Unlock()
}

// renameCounted renames from (size bytes) over to, and stops counting the
// regular file it replaces. The stat and the rename are one step for the
// count. A write that was admitted on credit for the file it replaces
// (credit > 0) is checked again here, since that file may have shrunk or
// gone meanwhile: if the result would exceed the quota, nothing is renamed
// and the error is a *QuotaError.
func (f *Files) renameCounted(from, to string, credit, size int64) error {
	f.qmu.Lock()
	defer f.qmu.Unlock()
	var old int64
	if st, err := f.root.Lstat(to); err == nil && st.Mode().IsRegular() {
		old = st.Size()
	}
	if credit > 0 && f.quota > 0 && f.used-old > f.quota {
		return &QuotaError{Quota: QuotaStore, Limit: f.quota, Used: f.used - size, Need: size - old}
	}
	if err := f.root.Rename(from, to); err != nil {
		return err
	}
	f.used -= old
	f.notifyChanged() // every rename makes a listed file: a write or a committed upload
	return nil
}

// removeCounted removes name and stops counting it; it returns the size
// removed. A missing name gives an error wrapping fs.ErrNotExist.
func (f *Files) removeCounted(name string) (int64, error) {
	f.qmu.Lock()
	defer f.qmu.Unlock()
	st, err := f.root.Lstat(name)
	if err != nil {
		return 0, err
	}
	if err := f.root.Remove(name); err != nil {
		return 0, err
	}
	if st.Mode().IsRegular() {
		f.used -= st.Size()
		return st.Size(), nil
	}
	return 0, nil
}

// quotaGate is the first writer of Files.Write's copy: it reserves each
// chunk before the chunk reaches the temp file.
type quotaGate struct {
	f        *Files
	credit   int64 // the size of the file being replaced
	reserved int64
}

func (g *quotaGate) Write(p []byte) (int, error) {
	if err := g.f.reserve(int64(len(p)), g.credit); err != nil {
		var qe *QuotaError
		if errors.As(err, &qe) {
			qe.Need += g.reserved // what the write needed so far
		}
		return 0, err
	}
	g.reserved += int64(len(p))
	return len(p), nil
}

var _ io.Writer = (*quotaGate)(nil)
