package a2a

import (
	"context"
	"log/slog"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// Caps of the peer faces.
const (
	// maxPeerFaces bounds the mesh peers whose faces an edge keeps; the
	// idle one used longest ago is closed to make room, never one with a
	// running task or a request in flight (edge.Cache). Callers of one
	// client IP who are not secret holders may have made
	// edge.DefaultFacesPerIP of them, and all such callers together
	// maxPeerFaces-reservedPeerFaces.
	maxPeerFaces = 64
	// reservedPeerFaces are the places only secret holders' faces fill.
	reservedPeerFaces = 8
)

// peerBackend is the Backend of a mesh peer's face: every skill a task runs
// goes to the peer through the node's Forward, the gateway, with the
// caller's own grants on this node; the tasks live in this node's store.
type peerBackend struct {
	Backend
	peer string
}

// Handle forwards msg to the peer; a peer that cannot be reached refuses
// the whole message.
func (p peerBackend) Handle(ctx context.Context, c protocol.Caller, msg []byte) ([]byte, *protocol.Error) {
	return edge.HandleByForward(ctx, p.Backend.Forward, c, p.peer, msg)
}

// Permits is false: what a caller may run on the peer is the peer's to
// say (its grants to this node's forwarded callers), not this node's. A
// peer's face has no extended card (extcard.go).
func (p peerBackend) Permits(protocol.Caller, string) bool { return false }

// newPeerFaces is the cache of the faces of mesh peers that Mount serves:
// at most maxPeerFaces, the idle one used longest ago closed first, each
// made for a peer that answers. A peer's face has f's settings over a
// peerBackend, its tasks kept apart by their owner key; it does not fail
// interrupted tasks (f did that when it started).
func (f *Face) newPeerFaces() *edge.Cache[*Face] {
	return &edge.Cache[*Face]{Max: maxPeerFaces, Reserved: reservedPeerFaces, New: func(peer string) *Face {
		pf := &Face{b: peerBackend{Backend: f.b, peer: peer}, log: f.log.With(slog.String("peer", peer)), e: f.e,
			maxRunning: f.maxRunning, runs: map[string]*run{}, ownerPrefix: "via " + peer + " ", metrics: f.metrics, push: f.push, grpc: f.grpc}
		pf.ctx, pf.cancel = context.WithCancel(f.ctx)
		return pf
	}}
}

// Busy reports whether a task of the face runs (edge.BusyCloser): a busy
// peer face is not closed to make room for another, which would cancel
// the task. A task waiting for input is kept in the store, not here, and
// goes on in the peer's next face.
func (f *Face) Busy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.runs) > 0
}
