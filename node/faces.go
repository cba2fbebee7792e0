package node

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/protocol"
)

// The methods below are what the HTTP edge and the other faces need from a
// node (their Backend interfaces); they speak only protocol types.

// PeerID returns the node's PeerID as a string.
func (n *Node) PeerID() string { return n.host.ID().String() }

// Audit writes one audit line for a request a face refused before it reached
// Handle (bad session, rate limit, body too large).
func (n *Node) Audit(c protocol.Caller, method string, perr *protocol.Error, start time.Time) {
	n.audit(c, method, "", perr, start)
}

// Forward sends a raw slot or batch message to the mesh peer peerID (the
// edge's gateway) and returns its raw answer, nil when the message holds only
// notifications.
func (n *Node) Forward(ctx context.Context, peerID string, msg []byte) ([]byte, error) {
	pid, err := peer.Decode(peerID)
	if err != nil {
		return nil, fmt.Errorf("node: forward: %w %q: %v", protocol.ErrBadAddress, peerID, err)
	}
	if _, err := n.Connect(ctx, protocol.Address{Kind: protocol.AddrMesh, PeerID: pid.String()}); err != nil {
		return nil, err
	}
	wantReply := true
	if req, perr := protocol.ParseRequest(msg); perr == nil {
		wantReply = false
		for i := range req.Slots {
			wantReply = wantReply || !req.Slots[i].IsNotification()
		}
		if len(n.secret) > 0 {
			msg = n.withMeshSession(req, msg)
		}
	}
	return n.Send(ctx, pid, msg, wantReply)
}

// withMeshSession adds this node's mesh session to every valid slot that
// carries none, so that a gateway call is granted by peers sharing the
// secret, as the node's own calls are. Malformed slots go on untouched for
// the peer to refuse.
func (n *Node) withMeshSession(req protocol.Request, msg []byte) []byte {
	tok, _ := protocol.MintToken(n.secret, n.host.ID().String(), n.now(), 5*time.Minute)
	raws := make([]json.RawMessage, len(req.Slots))
	if req.IsBatch {
		if err := json.Unmarshal(msg, &raws); err != nil {
			return msg
		}
	} else {
		raws[0] = msg
	}
	for i, s := range req.Slots {
		if s.Err != nil || (s.Context != nil && s.Context.Session != "") {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raws[i], &obj); err != nil {
			continue
		}
		ctxObj := map[string]json.RawMessage{}
		if c, ok := obj["context"]; ok {
			if err := json.Unmarshal(c, &ctxObj); err != nil {
				continue
			}
		}
		ctxObj["session"], _ = json.Marshal(tok)
		obj["context"], _ = json.Marshal(ctxObj)
		raws[i], _ = json.Marshal(obj)
	}
	var out []byte
	var err error
	if req.IsBatch {
		out, err = json.Marshal(raws)
	} else {
		out = raws[0]
	}
	if err != nil {
		return msg
	}
	return out
}
