package node

import (
	"context"
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
	}
	return n.Send(ctx, pid, msg, wantReply)
}

// Find returns agents that offer skillOrTag, ranked (SPEC §4). Without the
// DHT it fails with protocol.ErrNoDiscovery.
func (n *Node) Find(ctx context.Context, skillOrTag string, limit int) ([]protocol.FindResult, error) {
	return nil, protocol.ErrNoDiscovery
}
