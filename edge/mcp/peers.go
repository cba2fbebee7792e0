package mcp

import (
	"context"
	"sync"

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
	out, err := p.Backend.Forward(ctx, c, p.peer, msg)
	if err != nil {
		perr := protocol.AsError(err)
		if perr.Code == protocol.CodeInternal {
			perr = protocol.Errorf(protocol.CodeToolExecution, "could not reach peer %s: %s", p.peer, clip(err.Error(), 300))
		}
		o, _ := protocol.EncodeResponses(false, []protocol.Response{protocol.ErrorResponse(nil, perr)})
		return o, perr
	}
	return out, nil
}

// peerFaces are the faces of mesh peers that Mount serves, at most
// maxPeerFaces, the least recently used closed first. mu guards faces and
// order.
type peerFaces struct {
	parent *Face
	e      *edge.Server
	o      HTTPOptions

	mu    sync.Mutex
	faces map[string]*Face
	order []string // PeerIDs, least recently used first
}

// get returns the face of peer, made on first use.
func (p *peerFaces) get(peer string) *Face {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.faces[peer]; ok {
		p.touch(peer)
		return f
	}
	if p.faces == nil {
		p.faces = map[string]*Face{}
	}
	if len(p.order) >= maxPeerFaces {
		old := p.order[0]
		p.order = p.order[1:]
		_ = p.faces[old].Close()
		delete(p.faces, old)
	}
	f := p.parent.child(peerBackend{Backend: p.parent.b, peer: peer})
	f.mountHTTP(p.e, p.o, peerMaxSessions)
	p.faces[peer] = f
	p.order = append(p.order, peer)
	return f
}

// touch moves peer to the end of the order; p.mu is held.
func (p *peerFaces) touch(peer string) {
	for i, id := range p.order {
		if id == peer {
			p.order = append(append(p.order[:i:i], p.order[i+1:]...), peer)
			return
		}
	}
}

// close closes every peer face.
func (p *peerFaces) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.faces {
		_ = f.Close()
	}
	p.faces, p.order = nil, nil
}
