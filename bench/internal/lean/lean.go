// Package lean is what the bench's baselines share with its lean baseline
// binary (bench/bare): the libp2p host they run, the frame echo they
// serve, and the ready line and stdin answers they speak to the bench.
//
// It is a leaf: it imports go-libp2p, go-multiaddr and the standard
// library only, never a package of mcpv2 (the bench's TestBareIsLean holds
// it to that), so that the memory rows' baseline binary, which links it,
// carries no page of mcpv2. Where it must agree with mcpv2 (the
// connection manager's watermarks, the frame cap) it repeats mcpv2's
// values, and a test of the bench checks them against mcpv2's constants.
package lean

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	libp2pquic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
)

const (
	// EchoProto is the protocol of the baselines' frame echo.
	EchoProto = "/mcpv2-bench/echo/1.0.0"
	// MaxFrame caps an echoed frame's payload: mcpv2's
	// transport.DefaultMaxMessage (8 MiB).
	MaxFrame = 8 << 20
)

// The connection manager of an mcpv2 node: transport.DefaultConnLow,
// DefaultConnHigh and DefaultConnGrace, which `mcpv2 node` does not change.
const (
	// ConnLow is the low watermark: trimming stops at this many connections.
	ConnLow = 100
	// ConnHigh is the high watermark: trimming starts above it.
	ConnHigh = 400
	// ConnGrace is how long a new connection is safe from trimming.
	ConnGrace = time.Minute
)

// NewHost returns the baselines' libp2p host: libp2p's defaults with the
// transports (TCP, QUIC-v1), security (Noise, TLS) and muxer (yamux) of
// mcpv2's transport.NewHost, listening on loopback TCP and QUIC-v1 when
// listen is set, else nowhere. extra options follow these (see
// [MeshOptions]).
func NewHost(listen bool, extra ...libp2p.Option) (host.Host, error) {
	la := libp2p.NoListenAddrs
	if listen {
		la = libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1")
	}
	opts := []libp2p.Option{la,
		libp2p.Security(noise.ID, noise.New),
		libp2p.Security(libp2ptls.ID, libp2ptls.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(libp2pquic.NewTransport),
	}
	return libp2p.New(append(opts, extra...)...)
}

// MeshOptions are the options that let a host hold a mesh's connections
// as an mcpv2 node does: its connection manager ([ConnLow], [ConnHigh],
// [ConnGrace]; libp2p's default has none, and never trims), and libp2p's
// default resource manager with the system's connection limits raised to
// reach the high watermark, as transport.NewHost raises them (auto-scaled,
// libp2p's default lets in 128 inbound connections at most: a bare host
// would refuse peers that a node accepts). The options own what they make
// until libp2p.New takes it; call NewHost with them once.
func MeshOptions() ([]libp2p.Option, error) {
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	limits.SystemBaseLimit.ConnsInbound = max(limits.SystemBaseLimit.ConnsInbound, ConnHigh)
	limits.SystemBaseLimit.Conns = max(limits.SystemBaseLimit.Conns, 2*ConnHigh)
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits.AutoScale()))
	if err != nil {
		return nil, fmt.Errorf("lean: resource manager: %w", err)
	}
	cm, err := connmgr.NewConnManager(ConnLow, ConnHigh, connmgr.WithGracePeriod(ConnGrace))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("lean: connection manager: %w", err), rm.Close())
	}
	return []libp2p.Option{libp2p.ResourceManager(rm), libp2p.ConnectionManager(cm)}, nil
}

// ReadyPrefix starts a server's ready line: ReadyPrefix, then the JSON of
// a [ReadyInfo].
const ReadyPrefix = "READY "

// ReadyInfo is what a server tells the bench on its ready line.
type ReadyInfo struct {
	// Addrs are a libp2p server's full multiaddrs (with /p2p/).
	Addrs []string `json:"addrs,omitempty"`
	// Addr is an HTTP or TCP server's host:port.
	Addr string `json:"addr,omitempty"`
}

// HostInfo is a listening host's ready line.
func HostInfo(h host.Host) ReadyInfo {
	var info ReadyInfo
	for _, a := range h.Addrs() {
		info.Addrs = append(info.Addrs, a.Encapsulate(ma.StringCast("/p2p/"+h.ID().String())).String())
	}
	return info
}

// AddrOf returns the first of Addrs that contains proto ("/tcp/" or
// "/quic-v1").
func (r ReadyInfo) AddrOf(proto string) (string, error) {
	for _, a := range r.Addrs {
		if strings.Contains(a, proto) {
			return a, nil
		}
	}
	return "", fmt.Errorf("no %s address in %v", proto, r.Addrs)
}

// PrintReady writes info's ready line to w.
func PrintReady(w io.Writer, info ReadyInfo) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s%s\n", ReadyPrefix, b)
	return err
}

// EchoHandler echoes every frame of a stream back on it, in one write per
// frame from a buffer it reuses. A frame is an unsigned varint length and
// that many bytes (mcpv2's transport framing); one over [MaxFrame], or a
// broken stream, resets the stream.
func EchoHandler(s network.Stream) {
	defer s.Close()
	br := bufio.NewReader(s)
	var buf []byte
	for {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = s.Reset()
			}
			return
		}
		if n > MaxFrame {
			_ = s.Reset()
			return
		}
		buf = binary.AppendUvarint(buf[:0], n)
		hdr := len(buf)
		buf = slices.Grow(buf, int(n))[:hdr+int(n)]
		if _, err := io.ReadFull(br, buf[hdr:]); err != nil {
			_ = s.Reset()
			return
		}
		if _, err := s.Write(buf); err != nil {
			_ = s.Reset()
			return
		}
	}
}

// The bench asks a bare host on its stdin with lines "WORD TAG" and reads
// the answers "NAME TAG JSON" on its stdout; TAG (no spaces) is the
// bench's, different for every question, so that an answer to a question
// that timed out is not taken for the answer to the next one.
const (
	// AskStat asks for a [Stat], answered by a line NameStat.
	AskStat, NameStat = "stat", "STAT"
	// AskPeers asks for [PeerLists], answered by a line NamePeers.
	AskPeers, NamePeers = "peers", "PEERS"
)

// Stat is the answer to [AskStat].
type Stat struct {
	// RT is the DHT routing table's size.
	RT int `json:"rt"`
	// Peers is the number of connected peers.
	Peers int `json:"peers"`
}

// PeerLists is the answer to [AskPeers].
type PeerLists struct {
	// RT are the PeerIDs in the DHT routing table.
	RT []peer.ID `json:"rt"`
	// Conns are the PeerIDs of the connected peers.
	Conns []peer.ID `json:"conns"`
}

// Question splits a question line into its word and tag; ok is false for
// a line that is not "WORD TAG".
func Question(line string) (word, tag string, ok bool) {
	word, tag, ok = strings.Cut(line, " ")
	if !ok || word == "" || tag == "" || strings.Contains(tag, " ") {
		return "", "", false
	}
	return word, tag, true
}

// AnswerLine is the line that answers the question tagged tag with name
// and v's JSON, newline included.
func AnswerLine(name, tag string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return name + " " + tag + " " + string(b) + "\n", nil
}
