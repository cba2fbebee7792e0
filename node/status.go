package node

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	ma "github.com/multiformats/go-multiaddr"
)

// Status is what a running node reports about itself (`mcpv2 status`, the
// local API's /v1/status, the dashboard's Node page). It is a snapshot:
// Node.Status makes a new one from the libp2p host's state and from the
// last value of each event the node watches.
type Status struct {
	// PeerID is the node's PeerID.
	PeerID string `json:"peer_id"`
	// Version is the software version (Version).
	Version string `json:"version"`
	// Started is when New started the node; Uptime is the time since, in
	// whole seconds.
	Started time.Time `json:"started"`
	Uptime  int64     `json:"uptime_seconds"`
	// DataDir is the node's absolute data dir.
	DataDir string `json:"data_dir"`
	// Mesh says whether the DHT, mDNS and NAT traversal run (false with
	// --no-mesh); RelayService whether the node relays for others.
	Mesh         bool `json:"mesh"`
	RelayService bool `json:"relay_service"`
	// Listen are the multiaddrs the node listens on, as bound (a port 0
	// resolved; the relay transport's pseudo-listener left out).
	Listen []string `json:"listen"`
	// Addrs are the addresses the node advertises to peers (its signed
	// peer record): its interface addresses, observed and port-mapped
	// public ones, and relay addresses (/p2p-circuit) while it holds a
	// reservation.
	Addrs []string `json:"addrs"`
	// Observed are the advertised addresses that are not on an interface
	// of this host and not relayed: what peers observed (identify) or a
	// port mapping made, confirmed by libp2p before it advertises them.
	Observed []string `json:"observed"`
	// Reachability is whether others can dial the node, and why.
	Reachability Reachability `json:"reachability"`
	// NAT is the NAT type per transport protocol, as far as known (empty
	// until identify has seen enough observations).
	NAT []NATType `json:"nat"`
	// Peers counts the open connections.
	Peers PeerCounts `json:"peers"`
	// Relays are the relay reservations the node holds (AutoRelay),
	// empty when it holds none.
	Relays []Reservation `json:"relay_reservations"`
}

// Reachability is the node's reachability: State is "public", "private"
// or "unknown"; Source says who decided ("autonat", "forced" by
// --reachability, "relay-service", "no-nat" or "no-mesh") and Why says it
// in a sentence. Since is when State last changed (zero: never since the
// start). Reachable and Unreachable are the addresses that AutoNAT v2
// confirmed or refuted one by one.
type Reachability struct {
	State       string    `json:"state"`
	Source      string    `json:"source"`
	Why         string    `json:"why"`
	Since       time.Time `json:"since,omitzero"`
	Reachable   []string  `json:"reachable,omitempty"`
	Unreachable []string  `json:"unreachable,omitempty"`
}

// NATType is the NAT type identify found for one transport protocol
// ("udp" or "tcp"): "endpoint-independent" (hole punching can work) or
// "endpoint-dependent" (symmetric: it rarely does).
type NATType struct {
	Transport string `json:"transport"`
	Type      string `json:"type"`
}

// PeerCounts counts connections: Peers distinct peers, Conns connections,
// Direct and Relayed by kind (a relayed one goes through a circuit relay:
// its remote address has /p2p-circuit), ByTransport by transport name
// (tcp, quic-v1, …, "relay" for relayed ones).
type PeerCounts struct {
	Peers       int            `json:"peers"`
	Conns       int            `json:"conns"`
	Direct      int            `json:"direct"`
	Relayed     int            `json:"relayed"`
	ByTransport map[string]int `json:"by_transport"`
}

// Reservation is a relay reservation: the relay's PeerID and the circuit
// addresses through it that the node advertises.
type Reservation struct {
	Relay string   `json:"relay"`
	Addrs []string `json:"addrs"`
}

// Conn is one open connection (the local API's /v1/peers, the dashboard's
// Peers page). Peer-supplied text (Agent) is data: print it escaped.
type Conn struct {
	Peer      string    `json:"peer"`
	Direction string    `json:"direction"` // inbound, outbound or unknown
	Transport string    `json:"transport"` // tcp, quic-v1, …, relay
	Relayed   bool      `json:"relayed"`
	Limited   bool      `json:"limited"` // a relay's limited connection (duration and bytes)
	Remote    string    `json:"remote"`  // the remote multiaddr
	Local     string    `json:"local"`
	Opened    time.Time `json:"opened,omitzero"`
	// RTT is the peerstore's latency estimate in milliseconds (0: none
	// measured yet).
	RTT float64 `json:"rtt_ms,omitempty"`
	// Agent is the peer's identify agent version, as it says.
	Agent string `json:"agent,omitempty"`
}

// statusWatch holds the last value of the events Status reports, from
// one subscription to the host's event bus. Every emitter of these is
// stateful, so the subscription starts with the current values.
type statusWatch struct {
	started time.Time

	mu        sync.Mutex
	reach     network.Reachability
	reachAt   time.Time
	reachable []ma.Multiaddr
	unreach   []ma.Multiaddr
	nat       map[network.NATTransportProtocol]network.NATDeviceType
	relays    []ma.Multiaddr
}

// watchStatus subscribes to the events of Status and keeps their last
// values until the node closes.
func (n *Node) watchStatus() error {
	w := &statusWatch{started: n.now(), nat: map[network.NATTransportProtocol]network.NATDeviceType{}}
	sub, err := n.host.EventBus().Subscribe([]any{
		new(event.EvtLocalReachabilityChanged), new(event.EvtHostReachableAddrsChanged),
		new(event.EvtNATDeviceTypeChanged), new(event.EvtAutoRelayAddrsUpdated),
	})
	if err != nil {
		return fmt.Errorf("subscribe to the status events: %w", err)
	}
	n.status = w
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		defer sub.Close()
		for {
			select {
			case <-n.ctx.Done():
				return
			case e := <-sub.Out():
				w.record(e, n.now())
			}
		}
	}()
	return nil
}

// record keeps the value of event e, seen at now.
func (w *statusWatch) record(e any, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch e := e.(type) {
	case event.EvtLocalReachabilityChanged:
		if e.Reachability != w.reach {
			w.reach, w.reachAt = e.Reachability, now
		}
	case event.EvtHostReachableAddrsChanged:
		w.reachable, w.unreach = slices.Clone(e.Reachable), slices.Clone(e.Unreachable)
	case event.EvtNATDeviceTypeChanged:
		w.nat[e.TransportProtocol] = e.NatDeviceType
	case event.EvtAutoRelayAddrsUpdated:
		w.relays = slices.Clone(e.RelayAddrs)
	}
}

// Status returns what the node reports about itself now (see Status).
func (n *Node) Status() Status {
	h := n.host
	now := n.now()
	w := n.status
	s := Status{
		PeerID: h.ID().String(), Version: Version, Started: w.started, DataDir: n.cfg.DataDir,
		Mesh: n.cfg.Mesh != nil, RelayService: n.cfg.Mesh != nil && n.cfg.Mesh.RelayService,
		Listen: []string{}, Addrs: []string{}, Observed: []string{}, NAT: []NATType{}, Relays: []Reservation{},
	}
	if now.After(w.started) {
		s.Uptime = int64(now.Sub(w.started) / time.Second)
	}
	for _, a := range h.Network().ListenAddresses() {
		if !isCircuit(a) {
			s.Listen = append(s.Listen, a.String())
		}
	}
	iface, _ := h.Network().InterfaceListenAddresses() // an error leaves every advertised address "observed"
	for _, a := range h.Addrs() {
		s.Addrs = append(s.Addrs, a.String())
		if !isCircuit(a) && !slices.ContainsFunc(iface, a.Equal) {
			s.Observed = append(s.Observed, a.String())
		}
	}
	slices.Sort(s.Listen)
	slices.Sort(s.Addrs)
	slices.Sort(s.Observed)

	w.mu.Lock()
	s.Reachability = n.reachability(w.reach)
	s.Reachability.Since = w.reachAt
	s.Reachability.Reachable = addrStrings(w.reachable)
	s.Reachability.Unreachable = addrStrings(w.unreach)
	for _, p := range []network.NATTransportProtocol{network.NATTransportUDP, network.NATTransportTCP} {
		if t, ok := w.nat[p]; ok && t != network.NATDeviceTypeUnknown {
			s.NAT = append(s.NAT, NATType{Transport: natProto(p), Type: natType(t)})
		}
	}
	relays := slices.Clone(w.relays)
	w.mu.Unlock()
	s.Relays = reservations(relays)

	s.Peers = CountConns(n.Conns())
	return s
}

// CountConns counts conns by peer, kind and transport.
func CountConns(conns []Conn) PeerCounts {
	pc := PeerCounts{ByTransport: map[string]int{}}
	seen := map[string]bool{}
	for _, c := range conns {
		seen[c.Peer] = true
		pc.Conns++
		if c.Relayed {
			pc.Relayed++
		} else {
			pc.Direct++
		}
		pc.ByTransport[c.Transport]++
	}
	pc.Peers = len(seen)
	return pc
}

// reachability says who decided the reachability r, and why.
func (n *Node) reachability(r network.Reachability) Reachability {
	state := map[network.Reachability]string{network.ReachabilityPublic: "public", network.ReachabilityPrivate: "private"}[r]
	if state == "" {
		state = "unknown"
	}
	m := n.cfg.Mesh
	switch {
	case m == nil:
		return Reachability{State: state, Source: "no-mesh", Why: "the mesh is off (--no-mesh): no AutoNAT, relay or hole punching; peers reach this node only at its listen addresses"}
	case m.RelayService:
		return Reachability{State: state, Source: "relay-service", Why: "a relay service (--relay-service) is public by configuration: it must be reachable at its addresses"}
	case m.NoNAT:
		return Reachability{State: state, Source: "no-nat", Why: "NAT traversal is off (--no-nat): no AutoNAT verdict, relay reservation or hole punching"}
	case m.Reachability == "private" || m.Reachability == "public":
		return Reachability{State: state, Source: "forced", Why: "set by --reachability " + m.Reachability}
	}
	why := map[string]string{
		"public":  "AutoNAT: peers dialled this node back at its addresses",
		"private": "AutoNAT: peers could not dial this node back (or, at the start, every address of it is private while a bootstrap peer is public: behind NAT), so it holds a relay reservation",
		"unknown": "AutoNAT has no verdict yet (it needs peers that can dial back)",
	}[state]
	return Reachability{State: state, Source: "autonat", Why: why}
}

// Conns lists the node's open connections, by peer then opening time.
func (n *Node) Conns() []Conn {
	ps := n.host.Peerstore()
	out := []Conn{}
	for _, c := range n.host.Network().Conns() {
		st := c.Stat()
		remote := c.RemoteMultiaddr()
		cn := Conn{
			Peer: c.RemotePeer().String(), Direction: direction(st.Direction),
			Relayed: isCircuit(remote), Limited: st.Limited,
			Remote: remote.String(), Local: c.LocalMultiaddr().String(), Opened: st.Opened,
		}
		cn.Transport = transportOf(c, cn.Relayed)
		if l := ps.LatencyEWMA(c.RemotePeer()); l > 0 {
			cn.RTT = float64(l) / float64(time.Millisecond)
		}
		if v, err := ps.Get(c.RemotePeer(), "AgentVersion"); err == nil {
			if s, ok := v.(string); ok {
				cn.Agent = s
			}
		}
		out = append(out, cn)
	}
	slices.SortFunc(out, func(a, b Conn) int {
		return cmp.Or(cmp.Compare(a.Peer, b.Peer), a.Opened.Compare(b.Opened))
	})
	return out
}

// transportOf names the transport of c: "relay" for a relayed one, else
// what the connection says (tcp, quic-v1, webtransport…), else the last
// transport protocol of its remote address.
func transportOf(c network.Conn, relayed bool) string {
	if relayed {
		return "relay"
	}
	if t := c.ConnState().Transport; t != "" {
		return t
	}
	name := "unknown"
	for _, p := range c.RemoteMultiaddr() {
		switch p.Protocol().Code {
		case ma.P_TCP, ma.P_UDP, ma.P_QUIC_V1, ma.P_WEBTRANSPORT, ma.P_WEBRTC_DIRECT, ma.P_WS, ma.P_WSS:
			name = p.Protocol().Name
		}
	}
	return name
}

func direction(d network.Direction) string {
	switch d {
	case network.DirInbound:
		return "inbound"
	case network.DirOutbound:
		return "outbound"
	}
	return "unknown"
}

func natProto(p network.NATTransportProtocol) string {
	if p == network.NATTransportTCP {
		return "tcp"
	}
	return "udp"
}

func natType(t network.NATDeviceType) string {
	if t == network.NATDeviceTypeEndpointDependent {
		return "endpoint-dependent"
	}
	return "endpoint-independent"
}

// isCircuit reports whether a goes through a circuit relay.
func isCircuit(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

// reservations groups relay addresses (…/p2p/RELAY/p2p-circuit) by relay.
func reservations(addrs []ma.Multiaddr) []Reservation {
	out := []Reservation{}
	for _, a := range addrs {
		relay, _ := ma.SplitFunc(a, func(c ma.Component) bool { return c.Protocol().Code == ma.P_CIRCUIT })
		id, err := relay.ValueForProtocol(ma.P_P2P)
		if err != nil {
			continue
		}
		i := slices.IndexFunc(out, func(r Reservation) bool { return r.Relay == id })
		if i < 0 {
			out = append(out, Reservation{Relay: id})
			i = len(out) - 1
		}
		out[i].Addrs = append(out[i].Addrs, a.String())
	}
	slices.SortFunc(out, func(a, b Reservation) int { return cmp.Compare(a.Relay, b.Relay) })
	return out
}

func addrStrings(as []ma.Multiaddr) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	slices.Sort(out)
	return out
}
