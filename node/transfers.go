package node

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpv2/mcpv2/node/store"
)

// maxTransfers bounds the transfers one registry lists (a node's incoming
// ones, a client's outgoing ones). Incoming ones are bounded below it by
// the blob protocols' stream limits (64 each); a transfer over the bound
// still runs, unlisted.
const maxTransfers = 256

// Transfer is a blob transfer in progress (the dashboard's Activity page,
// the local API's /v1/transfers).
type Transfer struct {
	// ID names the transfer while it runs ("in-N" or "out-N").
	ID string `json:"id"`
	// Direction is "in" (a peer sends to this node) or "out" (this node's
	// client sends to a peer).
	Direction string `json:"direction"`
	// Peer is the other side's PeerID.
	Peer string `json:"peer"`
	// Name is the file's name at the receiver.
	Name string `json:"name"`
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
	// Done is the bytes at the receiver so far, Resumed included ("out":
	// the bytes sent).
	Done int64 `json:"done"`
	// Resumed is the offset the current attempt started at: the bytes the
	// receiver already held (0: from the start).
	Resumed int64 `json:"resumed"`
	// Attempt counts the sender's attempts from 1 ("out"); 0 for "in",
	// whose sender's attempts are not seen (a resumed one has Resumed > 0).
	Attempt int `json:"attempt"`
	// Started is when the transfer began (for "out", its first attempt);
	// Updated when its last bytes moved or its attempt changed.
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
}

// transfer is a registry's entry: the fixed fields, and the moving ones as
// atomics, so that a transfer updates it per chunk without a lock.
type transfer struct {
	t                      Transfer // ID, Direction, Peer, Name, Size, Started
	now                    func() time.Time
	done, resumed, updated atomic.Int64
	attempt                atomic.Int32
}

// progress records that the receiver holds done bytes. Nil-safe.
func (e *transfer) progress(done int64) {
	if e == nil {
		return
	}
	e.done.Store(done)
	e.updated.Store(e.now().UnixNano())
}

// attemptAt records that attempt started at offset off. Nil-safe.
func (e *transfer) attemptAt(attempt int, off int64) {
	if e == nil {
		return
	}
	e.attempt.Store(int32(attempt))
	e.resumed.Store(off)
	e.progress(off)
}

// transfers is a registry of the transfers in progress, at most
// maxTransfers.
type transfers struct {
	dir string // "in" or "out"
	now func() time.Time

	mu  sync.Mutex
	seq uint64
	m   map[*transfer]struct{}
}

func newTransfers(dir string, now func() time.Time) *transfers {
	return &transfers{dir: dir, now: now, m: map[*transfer]struct{}{}}
}

// add registers a transfer and returns its entry, or nil when the registry
// is full (or nil itself). The caller removes it when the transfer ends.
func (r *transfers) add(peer, name string, size int64) *transfer {
	if r == nil {
		return nil
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= maxTransfers {
		return nil
	}
	r.seq++
	e := &transfer{now: r.now, t: Transfer{ID: fmt.Sprintf("%s-%d", r.dir, r.seq), Direction: r.dir, Peer: peer, Name: name, Size: size, Started: now}}
	e.updated.Store(now.UnixNano())
	r.m[e] = struct{}{}
	return e
}

// remove drops e (nil: nothing).
func (r *transfers) remove(e *transfer) {
	if r == nil || e == nil {
		return
	}
	r.mu.Lock()
	delete(r.m, e)
	r.mu.Unlock()
}

// list returns the transfers in progress.
func (r *transfers) list() []Transfer {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Transfer, 0, len(r.m))
	for e := range r.m {
		t := e.t
		t.Done, t.Resumed, t.Attempt = e.done.Load(), e.resumed.Load(), int(e.attempt.Load())
		t.Updated = time.Unix(0, e.updated.Load())
		out = append(out, t)
	}
	return out
}

// sortTransfers orders ts oldest first.
func sortTransfers(ts []Transfer) []Transfer {
	slices.SortFunc(ts, func(a, b Transfer) int {
		return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(a.ID, b.ID))
	})
	return ts
}

// Transfers returns the blob transfers of this client in progress now
// (all "out"), oldest first; at most maxTransfers (256) are listed.
func (n *Client) Transfers() []Transfer { return sortTransfers(n.transfers.list()) }

// Transfers returns the blob transfers in progress now, oldest first: the
// files peers send to this node ("in") and those its client sends ("out").
// Each direction lists at most maxTransfers (256); incoming ones are
// bounded further by the blob streams the node admits.
func (n *Node) Transfers() []Transfer {
	return sortTransfers(append(n.inTransfers.list(), n.client.transfers.list()...))
}

// PartialUploads returns the unfinished uploads peers left in this node's
// file store, which they resume by sending the same file again (see
// store.Files.Partials).
func (n *Node) PartialUploads() []store.PartialInfo { return n.store.Files().Partials() }
