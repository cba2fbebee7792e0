package a2a

import (
	"context"
	"log/slog"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// maxPeerFaces bounds the mesh peers whose faces an edge keeps; the one
// used longest ago is closed (its running tasks canceled) to make room.
const maxPeerFaces = 64

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

// newPeerFaces is the cache of the faces of mesh peers that Mount serves:
// at most maxPeerFaces, the least recently used closed first (its running
// tasks canceled). A peer's face has f's settings over a peerBackend, its
// tasks kept apart by their owner key; it does not fail interrupted tasks
// (f did that when it started).
func (f *Face) newPeerFaces() *edge.Cache[*Face] {
	return &edge.Cache[*Face]{Max: maxPeerFaces, New: func(peer string) *Face {
		pf := &Face{b: peerBackend{Backend: f.b, peer: peer}, log: f.log.With(slog.String("peer", peer)), e: f.e, hosts: f.hosts,
			maxRunning: f.maxRunning, runs: map[string]*run{}, ownerPrefix: "via " + peer + " "}
		pf.ctx, pf.cancel = context.WithCancel(f.ctx)
		return pf
	}}
}
