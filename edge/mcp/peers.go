package mcp

import (
	"context"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// Faces of mesh peers (PeerPath): an edge serves, for any agent it can
// reach, that agent's tools, resources and card as an MCP server, so that
// an MCP client on plain HTTP uses an agent that has no edge of its own.
const (
	// maxPeerFaces bounds the peers served at once; the one used longest
	// ago is closed (its sessions end) to make room.
	maxPeerFaces = 64
	// peerMaxSessions bounds one peer face's sessions with state.
	peerMaxSessions = 64
)

// peerBackend is the Backend of a peer's face: every message goes to the
// peer through the node's Forward, the gateway, with the caller's own
// grants on this node (never more); finds and audit lines are the node's.
// It is not a FilesWatcher: the peer's files change out of sight.
type peerBackend struct {
	Backend
	peer string
}

// Handle forwards msg to the peer. A peer that cannot be reached refuses
// the whole message, as a node refuses one.
func (p peerBackend) Handle(ctx context.Context, c protocol.Caller, msg []byte) ([]byte, *protocol.Error) {
	return edge.HandleByForward(ctx, p.Backend.Forward, c, p.peer, msg)
}

// newPeerFaces is the cache of the faces of mesh peers that Mount serves:
// at most maxPeerFaces, the least recently used closed first; each made on
// first use over a peerBackend, with its own handlers.
func (f *Face) newPeerFaces(e *edge.Server, o HTTPOptions) *edge.Cache[*Face] {
	return &edge.Cache[*Face]{Max: maxPeerFaces, New: func(peer string) *Face {
		pf := f.child(peerBackend{Backend: f.b, peer: peer})
		pf.mountHTTP(e, o, peerMaxSessions)
		return pf
	}}
}
