package node

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
)

// Bounds of the peer history.
const (
	// maxHistoryPeers is the most peers PeerHistory keeps; past it the
	// peer seen longest ago is dropped.
	maxHistoryPeers = 256
	// maxPeerEvents is the most connection events kept per peer, the
	// newest.
	maxPeerEvents = 32
)

// PeerEvent is one change of a peer's connections.
type PeerEvent struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"` // "connected" or "disconnected"
	// Relayed says the connection goes through a circuit relay (its
	// remote address has /p2p-circuit, as in Conn).
	Relayed   bool   `json:"relayed"`
	Transport string `json:"transport"` // as Conn.Transport
	Direction string `json:"direction"` // as Conn.Direction
	Remote    string `json:"remote"`    // the remote multiaddr
}

// PunchStats counts the DCUtR hole punches with one peer, whichever side
// started them: one attempt per punch that ended (each of its dial rounds
// included), Successes those that opened a direct connection. Last is
// when the last one ended and LastError its error, if it failed.
type PunchStats struct {
	Attempts  int       `json:"attempts"`
	Successes int       `json:"successes"`
	Last      time.Time `json:"last,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// PeerHistory is what the node saw of one peer since it started: its
// connections opening and closing, and the hole punches with it.
type PeerHistory struct {
	Peer   string      `json:"peer"`
	Events []PeerEvent `json:"events"` // oldest first, the last maxPeerEvents (32)
	Punch  PunchStats  `json:"hole_punch"`
}

// peerHistory records PeerHistory: it is the host's network.Notifiee and
// the tracer of its hole punching. Its methods run on libp2p's goroutines
// and only take its lock.
type peerHistory struct {
	now func() time.Time

	mu    sync.Mutex
	seq   uint64 // counts changes; a peer's seen is the seq of its last
	peers map[peer.ID]*peerRecord
}

type peerRecord struct {
	seen uint64
	h    PeerHistory
}

func newPeerHistory(now func() time.Time) *peerHistory {
	return &peerHistory{now: now, peers: map[peer.ID]*peerRecord{}}
}

// record returns p's record, made when new (dropping the peer seen
// longest ago when full), marked as seen now. Called with mu held.
func (ph *peerHistory) record(p peer.ID) *peerRecord {
	ph.seq++
	r, ok := ph.peers[p]
	if !ok {
		if len(ph.peers) >= maxHistoryPeers {
			var oldest peer.ID
			var min uint64
			for id, o := range ph.peers {
				if min == 0 || o.seen < min {
					oldest, min = id, o.seen
				}
			}
			delete(ph.peers, oldest)
		}
		r = &peerRecord{h: PeerHistory{Peer: p.String(), Events: []PeerEvent{}}}
		ph.peers[p] = r
	}
	r.seen = ph.seq
	return r
}

// conn records that c was opened (kind "connected") or closed.
func (ph *peerHistory) conn(kind string, c network.Conn) {
	remote := c.RemoteMultiaddr()
	e := PeerEvent{At: ph.now(), Kind: kind, Relayed: isCircuit(remote), Direction: direction(c.Stat().Direction)}
	if remote != nil {
		e.Remote = remote.String()
	}
	e.Transport = transportOf(c, e.Relayed)
	ph.mu.Lock()
	defer ph.mu.Unlock()
	r := ph.record(c.RemotePeer())
	if len(r.h.Events) >= maxPeerEvents {
		r.h.Events = slices.Delete(r.h.Events, 0, len(r.h.Events)-maxPeerEvents+1)
	}
	r.h.Events = append(r.h.Events, e)
}

// Connected records a connection opening (network.Notifiee).
func (ph *peerHistory) Connected(_ network.Network, c network.Conn) { ph.conn("connected", c) }

// Disconnected records a connection closing (network.Notifiee).
func (ph *peerHistory) Disconnected(_ network.Network, c network.Conn) {
	ph.conn("disconnected", c)
}

// Listen is part of network.Notifiee.
func (ph *peerHistory) Listen(network.Network, ma.Multiaddr) {}

// ListenClose is part of network.Notifiee.
func (ph *peerHistory) ListenClose(network.Network, ma.Multiaddr) {}

// Trace counts the end of a hole punch (holepunch.EventTracer); other
// events are ignored.
func (ph *peerHistory) Trace(evt *holepunch.Event) {
	if evt == nil {
		return
	}
	end, ok := evt.Evt.(*holepunch.EndHolePunchEvt)
	if !ok {
		return
	}
	at := ph.now()
	ph.mu.Lock()
	defer ph.mu.Unlock()
	r := ph.record(evt.Remote)
	r.h.Punch.Attempts++
	r.h.Punch.Last = at
	r.h.Punch.LastError = end.Error
	if end.Success {
		r.h.Punch.Successes++
		r.h.Punch.LastError = ""
	}
}

// list returns a copy of every peer's history, seen most recently first.
func (ph *peerHistory) list() []PeerHistory {
	ph.mu.Lock()
	recs := make([]*peerRecord, 0, len(ph.peers))
	for _, r := range ph.peers {
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b *peerRecord) int { return cmp.Compare(b.seen, a.seen) })
	out := make([]PeerHistory, len(recs))
	for i, r := range recs {
		out[i] = r.h
		out[i].Events = slices.Clone(r.h.Events)
	}
	ph.mu.Unlock()
	return out
}

// PeerHistory returns what the node saw of each peer since it started,
// the peer seen most recently (a connection opening or closing, a hole
// punch ending) first. It keeps maxHistoryPeers (256) peers: past that the
// one seen longest ago is dropped.
func (n *Node) PeerHistory() []PeerHistory { return n.history.list() }
