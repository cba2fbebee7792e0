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
	// maxPeerFaces bounds the peers served at once; the idle one used
	// longest ago is closed to make room, never one with a session or a
	// request in flight (edge.Cache). Callers of one client IP who are not
	// secret holders may have made edge.DefaultFacesPerIP of them, and all
	// such callers together maxPeerFaces-reservedPeerFaces.
	maxPeerFaces = 64
	// reservedPeerFaces are the places only secret holders' faces fill.
	reservedPeerFaces = 8
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
// at most maxPeerFaces, the idle one used longest ago closed first; each
// made on first use, for a peer that answers, over a peerBackend, with its
// own handlers.
func (f *Face) newPeerFaces(e *edge.Server, o HTTPOptions) *edge.Cache[*Face] {
	return &edge.Cache[*Face]{Max: maxPeerFaces, Reserved: reservedPeerFaces, New: func(peer string) *Face {
		pf := f.child(peerBackend{Backend: f.b, peer: peer})
		pf.mountHTTP(e, o, peerMaxSessions)
		return pf
	}}
}

// Busy reports whether the face holds an MCP session (edge.BusyCloser): a
// busy peer face is not closed to make room for another.
func (f *Face) Busy() bool { return f.sessions() > 0 }
