package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// Rows 1–6: a mesh call (`ping` with a payload, through node.Client)
// against a raw libp2p stream echo of the same request bytes.

// payloads are the ping payload sizes; the rows are at 1 KiB.
var payloads = []int{16, 1 << 10, 64 << 10}

// judgedPayload is the payload of the issue's own lines.
const judgedPayload = 1 << 10

// pingArgs are ping's arguments with a payload of size bytes.
func pingArgs(size int) json.RawMessage {
	return json.RawMessage(`{"payload":"` + strings.Repeat("x", size) + `"}`)
}

// pingRequest is the message the mesh client puts on the wire for one ping
// call (a slot with id 1, no context): what the echo baseline sends.
func pingRequest(size int) ([]byte, error) {
	params, err := json.Marshal(protocol.CallParams{Name: "ping", Arguments: pingArgs(size)})
	if err != nil {
		return nil, err
	}
	return json.Marshal(protocol.Slot{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: protocol.MethodToolsCall, Params: params})
}

// meshCall returns a callFunc that runs ping with a size-byte payload on
// addr and checks that the payload came back.
func meshCall(c *node.Client, addr protocol.Address, size int) callFunc {
	args, check := pingArgs(size), pingCheck(size)
	return func(ctx context.Context, _ int) error {
		res, err := c.CallSkill(ctx, addr, "ping", args, protocol.CallOptions{})
		if err != nil {
			return fmt.Errorf("mesh ping: %w%s", err, resetHint(err))
		}
		return check(res)
	}
}

// resetHint explains a stream the peer reset because its resource manager
// refused it.
func resetHint(err error) string {
	var se *network.StreamError
	if errors.As(err, &se) && se.Remote && se.ErrorCode == network.StreamResourceLimitExceeded {
		return " (the node's resource manager refused the stream: more /mcpv2/rpc streams from this peer than its per-peer cap, see transport.WithProtocolPeerLimit in node/node.go)"
	}
	return ""
}

// pingCheck returns a check that a ping result says pong and echoes the
// size-byte payload of pingArgs.
func pingCheck(size int) func(res []byte) error {
	payload := []byte(`"payload":"` + strings.Repeat("x", size) + `"`)
	return func(res []byte) error {
		if !bytes.Contains(res, []byte(`"pong":true`)) || !bytes.Contains(res, payload) {
			return fmt.Errorf("mesh ping: the result (%d bytes) lacks pong or the %d-byte payload: %.100s", len(res), size, res)
		}
		return nil
	}
}

// echoStream is a reused stream to the echo role.
type echoStream struct {
	s  network.Stream
	fr *transport.FrameReader
}

// openEchoStreams opens n echo streams from h to pid.
func openEchoStreams(ctx context.Context, h host.Host, pid peer.ID, n int) ([]*echoStream, error) {
	out := make([]*echoStream, 0, n)
	for range n {
		s, err := h.NewStream(ctx, pid, echoProto)
		if err != nil {
			closeEchoStreams(out)
			return nil, fmt.Errorf("open an echo stream: %w", err)
		}
		out = append(out, &echoStream{s: s, fr: transport.NewFrameReader(s, 0)})
	}
	return out, nil
}

func closeEchoStreams(ss []*echoStream) {
	for _, s := range ss {
		_ = s.s.Close()
	}
}

// echoCall returns a callFunc that sends msg as one frame on worker's
// stream and reads the echo, which must be msg.
func echoCall(ss []*echoStream, msg []byte) callFunc {
	return func(ctx context.Context, worker int) error {
		es := ss[worker]
		if dl, ok := ctx.Deadline(); ok {
			_ = es.s.SetDeadline(dl)
		}
		if err := transport.WriteFrame(es.s, msg); err != nil {
			return fmt.Errorf("echo: %w", err)
		}
		got, err := es.fr.ReadFrame()
		if err != nil {
			return fmt.Errorf("echo: %w", err)
		}
		if !bytes.Equal(got, msg) {
			return fmt.Errorf("echo: got %d bytes back for %d sent, not the same", len(got), len(msg))
		}
		return nil
	}
}

// checkTransport fails unless every connection of h to pid runs over the
// transport proto ("/tcp/", "/quic-v1").
func checkTransport(h host.Host, pid peer.ID, proto string) error {
	conns := h.Network().ConnsToPeer(pid)
	if len(conns) == 0 {
		return fmt.Errorf("no connection to %s", pid)
	}
	for _, c := range conns {
		if !containsProto(c.RemoteMultiaddr().String(), proto) {
			return fmt.Errorf("a connection to %s runs over %s, not %s", pid, c.RemoteMultiaddr(), proto)
		}
	}
	return nil
}

// nodeAndEcho starts (or reuses) the mcpv2 node and the echo host of the
// mesh rows.
func nodeAndEcho(ctx context.Context, e *env) (*nodeProc, *roleProc, error) {
	n, err := e.mcpv2Node(ctx)
	if err != nil {
		return nil, nil, err
	}
	echo, err := e.role(ctx, "echo")
	if err != nil {
		return nil, nil, err
	}
	return n, echo, nil
}

// runLatency measures rows 1 (TCP) and 2 (QUIC): one call in flight.
func runLatency(ctx context.Context, e *env, p plan) ([]line, error) {
	n, echo, err := nodeAndEcho(ctx, e)
	if err != nil {
		return nil, err
	}
	var lines []line
	for _, tr := range []struct {
		row   int
		proto string
		addr  protocol.Address
	}{{1, "/tcp/", n.tcp}, {2, "/quic-v1", n.quic}} {
		ls, err := latencyTransport(ctx, e.log, p, tr.row, tr.proto, tr.addr, echo)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Trim(tr.proto, "/"), err)
		}
		lines = append(lines, ls...)
	}
	return lines, nil
}

// clients are the two clients of a side-by-side row over one transport:
// a fresh mesh client for the mcpv2 side, and a bare host (bh) with
// streams (ss) open to the echo baseline epid.
type clients struct {
	mc   *meshClient
	bh   host.Host
	epid peer.ID
	ss   []*echoStream
}

// clientsFor makes the clients of a row over proto, with n echo streams.
func clientsFor(ctx context.Context, echo *roleProc, proto string, n int) (_ *clients, err error) {
	c := &clients{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.mc, err = newMeshClient(nil); err != nil {
		return nil, err
	}
	if c.bh, err = bareHost(false); err != nil {
		return nil, err
	}
	echoAddr, err := echo.info.addrOf(proto)
	if err != nil {
		return nil, err
	}
	if c.epid, err = dialAddr(ctx, c.bh, echoAddr); err != nil {
		return nil, err
	}
	if c.ss, err = openEchoStreams(ctx, c.bh, c.epid, n); err != nil {
		return nil, err
	}
	return c, nil
}

// Close closes the streams and both clients.
func (c *clients) Close() {
	closeEchoStreams(c.ss)
	if c.bh != nil {
		c.bh.Close()
	}
	if c.mc != nil {
		c.mc.Close()
	}
}

// latencyTransport measures one latency row over one transport, with a
// fresh mesh client and bare host that reach the servers only over it.
func latencyTransport(ctx context.Context, log *slog.Logger, p plan, row int, proto string, addr protocol.Address, echo *roleProc) ([]line, error) {
	cl, err := clientsFor(ctx, echo, proto, 1)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	mc, bh, epid, ss := cl.mc, cl.bh, cl.epid, cl.ss
	mpid, err := mc.Connect(ctx, addr)
	if err != nil {
		return nil, err
	}
	var lines []line
	for _, size := range payloads {
		msg, err := pingRequest(size)
		if err != nil {
			return nil, err
		}
		mesh, ec := meshCall(mc.Client, addr, size), echoCall(ss, msg)
		var a, b []time.Duration
		err = alternate(ctx, p.rounds,
			func(int) error {
				lat, err := latencyRound(ctx, p, mesh)
				a = append(a, lat...)
				return err
			},
			func(int) error {
				lat, err := latencyRound(ctx, p, ec)
				b = append(b, lat...)
				return err
			})
		if err != nil {
			return nil, fmt.Errorf("%s payload: %w", sizeText(int64(size)), err)
		}
		if err := errors.Join(checkTransport(mc.h, mpid, proto), checkTransport(bh, epid, proto)); err != nil {
			return nil, err
		}
		l := line{row: row, payload: sizeText(int64(size)), baseline: "raw libp2p stream echo",
			aMed: fmtDur(median(a)), aP99: fmtDur(quantile(a, 0.99)),
			bMed: fmtDur(median(b)), bP99: fmtDur(quantile(b, 0.99)),
			ratio: median(a) / median(b), target: "≤ 1.3×"}
		l.judge(size == judgedPayload, l.ratio <= 1.3)
		if size != judgedPayload {
			l.target = "(info)"
		}
		log.Info("measured", "row", row, "payload", l.payload, "mcpv2", l.aMed, "echo", l.bMed, "ratio", fmtRatio(l.ratio))
		lines = append(lines, l)
	}
	return lines, nil
}

// inFlight is the concurrency of rows 3–5, 13 and 14: the issue's "48 in
// flight", the most streams the mesh client opens to one peer
// (maxStreamsPerPeer in node/pool.go). At more, the calls beyond 48 wait
// for a stream while the echo's would run on streams of their own.
const inFlight = 48

// runThroughput measures rows 3 (calls/s at inFlight), 4 (the server's
// CPU per call meanwhile) and 5 (the payload's share of it), over TCP.
func runThroughput(ctx context.Context, e *env, p plan) ([]line, error) {
	n, echo, err := nodeAndEcho(ctx, e)
	if err != nil {
		return nil, err
	}
	cl, err := clientsFor(ctx, echo, "/tcp/", inFlight)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	mc, bh, epid, ss := cl.mc, cl.bh, cl.epid, cl.ss

	type result struct{ rate, cpu [2][]float64 } // [side] per round; cpu in µs per call
	res := map[int]*result{}
	for _, size := range payloads {
		msg, err := pingRequest(size)
		if err != nil {
			return nil, err
		}
		r := &result{}
		res[size] = r
		side := func(i int, pid int, call callFunc) func(int) error {
			return func(int) error {
				rctx, cancel := context.WithTimeout(ctx, sideTimeout)
				defer cancel()
				if err := warmUp(rctx, inFlight, p.warm, call); err != nil {
					return err
				}
				c0, err := procCPU(pid)
				if err != nil {
					return err
				}
				calls, took, err := throughputRound(rctx, inFlight, p.tputDur, 1, call)
				if err != nil {
					return err
				}
				c1, err := procCPU(pid)
				if err != nil {
					return err
				}
				r.rate[i] = append(r.rate[i], float64(calls)/took.Seconds())
				r.cpu[i] = append(r.cpu[i], float64((c1-c0).Microseconds())/float64(calls))
				return nil
			}
		}
		err = alternate(ctx, p.rounds,
			side(0, n.pid(), meshCall(mc.Client, n.tcp, size)),
			side(1, echo.pid(), echoCall(ss, msg)))
		if err != nil {
			return nil, fmt.Errorf("%s payload: %w", sizeText(int64(size)), err)
		}
		e.log.Info("measured", "row", 3, "payload", sizeText(int64(size)), "mcpv2", fmtRate(median(r.rate[0]), "calls"), "echo", fmtRate(median(r.rate[1]), "calls"))
	}
	if err := errors.Join(checkTransport(mc.h, n.tcpPeer(), "/tcp/"), checkTransport(bh, epid, "/tcp/")); err != nil {
		return nil, err
	}

	var lines []line
	for _, size := range payloads {
		r := res[size]
		a, b := median(r.rate[0]), median(r.rate[1])
		l := line{row: 3, payload: sizeText(int64(size)), baseline: fmt.Sprintf("raw libp2p stream echo, %d streams", inFlight),
			aMed: fmtRate(a, "calls"), bMed: fmtRate(b, "calls"), ratio: a / b, target: "≥ 0.8×"}
		l.judge(size == judgedPayload, l.ratio >= 0.8)
		if size != judgedPayload {
			l.target = "(info)"
		}
		lines = append(lines, l)
	}
	for _, size := range payloads {
		r := res[size]
		a, b := median(r.cpu[0]), median(r.cpu[1])
		l := line{row: 4, payload: sizeText(int64(size)), baseline: "echo host's CPU per echo",
			aMed: fmtMicros(a, false), bMed: fmtMicros(b, false), ratio: a / b, target: "≤ 2×"}
		l.judge(size == judgedPayload, l.ratio <= 2)
		if size != judgedPayload {
			l.target = "(info)"
		}
		lines = append(lines, l)
	}
	small, big := res[16], res[judgedPayload]
	da := median(big.cpu[0]) - median(small.cpu[0])
	db := median(big.cpu[1]) - median(small.cpu[1])
	l := line{row: 5, payload: "1 KiB − 16 B", baseline: "echo's 1 KiB − 16 B",
		aMed: fmtMicros(da, true), bMed: fmtMicros(db, true), ratio: da / db, target: "payload cost ≈ echo's"}
	if db <= 0 || math.IsNaN(l.ratio) {
		l.ratioText = "—"
	}
	l.judge(true, da <= math.Max(2*db, db+10))
	return append(lines, l), nil
}

// tcpPeer is the node's PeerID.
func (n *nodeProc) tcpPeer() peer.ID {
	id, _ := peer.Decode(n.tcp.PeerID)
	return id
}

// runCold measures row 6: a fresh client host, then connect and the first
// call, timed from before the dial to the answer.
func runCold(ctx context.Context, e *env, p plan) ([]line, error) {
	n, echo, err := nodeAndEcho(ctx, e)
	if err != nil {
		return nil, err
	}
	echoAddr, err := echo.info.addrOf("/tcp/")
	if err != nil {
		return nil, err
	}
	msg, err := pingRequest(judgedPayload)
	if err != nil {
		return nil, err
	}
	meshOnce := func(ctx context.Context) (time.Duration, error) {
		key, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			return 0, err
		}
		mc, err := newMeshClient(key)
		if err != nil {
			return 0, err
		}
		defer mc.Close()
		t := time.Now()
		if err := meshCall(mc.Client, n.tcp, judgedPayload)(ctx, 0); err != nil {
			return 0, err
		}
		return time.Since(t), nil
	}
	echoOnce := func(ctx context.Context) (time.Duration, error) {
		h, err := bareHost(false)
		if err != nil {
			return 0, err
		}
		defer h.Close()
		t := time.Now()
		pid, err := dialAddr(ctx, h, echoAddr)
		if err != nil {
			return 0, err
		}
		ss, err := openEchoStreams(ctx, h, pid, 1)
		if err != nil {
			return 0, err
		}
		defer closeEchoStreams(ss)
		if err := echoCall(ss, msg)(ctx, 0); err != nil {
			return 0, err
		}
		return time.Since(t), nil
	}
	var a, b []time.Duration
	side := func(once func(context.Context) (time.Duration, error), out *[]time.Duration) func(int) error {
		return func(int) error {
			rctx, cancel := context.WithTimeout(ctx, sideTimeout)
			defer cancel()
			if _, err := once(rctx); err != nil { // warm-up
				return err
			}
			for range p.coldN {
				d, err := once(rctx)
				if err != nil {
					return err
				}
				*out = append(*out, d)
			}
			return nil
		}
	}
	if err := alternate(ctx, p.rounds, side(meshOnce, &a), side(echoOnce, &b)); err != nil {
		return nil, err
	}
	l := line{row: 6, payload: "1 KiB", baseline: "fresh bare host + connect + one echo",
		aMed: fmtDur(median(a)), aP99: fmtDur(quantile(a, 0.99)), bMed: fmtDur(median(b)), bP99: fmtDur(quantile(b, 0.99)),
		ratio: median(a) / median(b), target: "≤ 1.2×"}
	l.judge(true, l.ratio <= 1.2)
	e.log.Info("measured", "row", 6, "mcpv2", l.aMed, "echo", l.bMed)
	return []line{l}, nil
}
