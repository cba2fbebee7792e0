package a2a

import (
	"context"
	"log/slog"
	"sync"

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

// peerFaces are the faces of mesh peers an edge serves. mu guards faces
// and order.
type peerFaces struct {
	parent *Face

	mu    sync.Mutex
	faces map[string]*Face
	order []string // least recently used first
}

// get returns peer's face, made on first use: the parent's settings over
// a peerBackend, its tasks kept apart by their owner key. It does not fail
// interrupted tasks: the parent did that when it started.
func (p *peerFaces) get(peer string) *Face {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.faces[peer]; ok {
		for i, id := range p.order {
			if id == peer {
				p.order = append(append(p.order[:i:i], p.order[i+1:]...), peer)
				break
			}
		}
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
	par := p.parent
	f := &Face{b: peerBackend{Backend: par.b, peer: peer}, log: par.log.With(slog.String("peer", peer)), e: par.e, hosts: par.hosts,
		maxRunning: par.maxRunning, runs: map[string]*run{}, ownerPrefix: "via " + peer + " "}
	f.ctx, f.cancel = context.WithCancel(par.ctx)
	p.faces[peer] = f
	p.order = append(p.order, peer)
	return f
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
