package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/goleak"
)

const (
	echoProto  = protocol.ID("/transport-test/echo/1.0.0")
	limitProto = protocol.ID("/transport-test/limited/1.0.0")
)

func newKey(t testing.TB) crypto.PrivKey {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newTestHost builds a host listening on addr (none if empty) and closes it
// when the test ends.
func newTestHost(t *testing.T, addr string, opts ...Option) host.Host {
	t.Helper()
	all := []Option{WithIdentity(newKey(t)), WithListenAddrs()}
	if addr != "" {
		all[1] = WithListenAddrs(ma.StringCast(addr))
	}
	h, err := NewHost(append(all, opts...)...)
	if err != nil {
		t.Fatalf("NewHost: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func connect(t *testing.T, from, to host.Host) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := from.Connect(ctx, peer.AddrInfo{ID: to.ID(), Addrs: to.Addrs()}); err != nil {
		t.Fatalf("connect: %v", err)
	}
}

// echoFrames answers every frame with the same frame until the client
// half-closes, then closes; on any error it resets, as SPEC §2 handlers do.
func echoFrames(s network.Stream) {
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	fr := NewFrameReader(s, 1<<20)
	for {
		p, err := fr.ReadFrame()
		if err == io.EOF {
			_ = s.Close()
			return
		}
		if err != nil {
			_ = s.Reset()
			return
		}
		if err := WriteFrame(s, p); err != nil {
			_ = s.Reset()
			return
		}
	}
}

func TestHostsExchangeFrames(t *testing.T) {
	for _, tc := range []struct {
		name      string
		listen    string
		transport string
	}{
		{"tcp", "/ip4/127.0.0.1/tcp/0", "tcp"},
		{"quic", "/ip4/127.0.0.1/udp/0/quic-v1", "quic-v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := newTestHost(t, tc.listen)
			client := newTestHost(t, "") // dial-only
			if len(client.Addrs()) != 0 {
				t.Fatalf("dial-only host listens on %v", client.Addrs())
			}
			server.SetStreamHandler(echoProto, echoFrames)
			connect(t, client, server)

			conns := client.Network().ConnsToPeer(server.ID())
			if len(conns) != 1 {
				t.Fatalf("%d connections, want 1", len(conns))
			}
			state := conns[0].ConnState()
			if state.Transport != tc.transport {
				t.Fatalf("transport %q, want %q", state.Transport, tc.transport)
			}
			if tc.transport == "tcp" {
				if state.Security != noise.ID || state.StreamMultiplexer != yamux.ID {
					t.Fatalf("TCP connection uses %s over %s, want %s over %s", state.StreamMultiplexer, state.Security, yamux.ID, noise.ID)
				}
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := client.NewStream(ctx, server.ID(), echoProto)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Reset()
			_ = s.SetDeadline(time.Now().Add(10 * time.Second))
			fr := NewFrameReader(s, 1<<20)
			for i, n := range []int{0, 1, 127, 128, 1000, 200_000, 1 << 20} {
				want := randomBytes(n, uint64(i))
				if err := WriteFrame(s, want); err != nil {
					t.Fatalf("frame %d: write: %v", i, err)
				}
				got, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("frame %d: read: %v", i, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("frame %d: echo differs", i)
				}
			}
			if err := s.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			if _, err := fr.ReadFrame(); err != io.EOF {
				t.Fatalf("after half-close: err = %v, want io.EOF", err)
			}
		})
	}
}

// TestProtocolLimitInbound opens more inbound streams of a capped protocol
// than the cap allows: the extra ones are reset by the server with
// StreamResourceLimitExceeded, and a slot is usable again once a stream ends.
func TestProtocolLimitInbound(t *testing.T) {
	const capIn, extra = 3, 2
	server := newTestHost(t, "/ip4/127.0.0.1/tcp/0", WithProtocolLimit(limitProto, capIn, 1, 1<<20))
	client := newTestHost(t, "")

	var accepted atomic.Int32
	closed := make(chan struct{}, 64) // a send per stream the server closed
	server.SetStreamHandler(limitProto, func(s network.Stream) {
		_ = s.SetDeadline(time.Now().Add(20 * time.Second))
		fr := NewFrameReader(s, 64)
		if _, err := fr.ReadFrame(); err != nil {
			_ = s.Reset()
			return
		}
		// Count before answering: the client checks the count as soon as
		// the answer arrives.
		accepted.Add(1)
		if err := WriteFrame(s, []byte("ok")); err != nil {
			_ = s.Reset()
			return
		}
		// Hold the stream (and its slot) until the client half-closes.
		if _, err := fr.ReadFrame(); err != io.EOF {
			_ = s.Reset()
			return
		}
		_ = s.Close() // frees the slot (the stream's scope) before it returns
		closed <- struct{}{}
	})
	connect(t, client, server)

	// try opens a stream, sends a frame and reports whether the answer came.
	try := func() (network.Stream, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := client.NewStream(ctx, server.ID(), limitProto)
		if err != nil {
			return nil, err
		}
		_ = s.SetDeadline(time.Now().Add(10 * time.Second))
		if err := WriteFrame(s, []byte("hello")); err != nil {
			s.Reset()
			return nil, err
		}
		p, err := NewFrameReader(s, 64).ReadFrame()
		if err != nil {
			s.Reset()
			return nil, err
		}
		if string(p) != "ok" {
			s.Reset()
			return nil, errors.New("bad answer " + string(p))
		}
		return s, nil
	}

	var open []network.Stream
	for i := range capIn + extra {
		s, err := try()
		if i < capIn {
			if err != nil {
				t.Fatalf("stream %d (under the cap of %d): %v", i, capIn, err)
			}
			open = append(open, s)
			continue
		}
		if err == nil {
			s.Reset()
			t.Fatalf("stream %d was served, but the cap is %d", i, capIn)
		}
		var se *network.StreamError
		if !errors.As(err, &se) || se.ErrorCode != network.StreamResourceLimitExceeded || !se.Remote {
			t.Fatalf("stream %d: err = %v, want a remote reset with StreamResourceLimitExceeded", i, err)
		}
	}
	if n := accepted.Load(); n != capIn {
		t.Fatalf("server handled %d streams, want %d", n, capIn)
	}

	// Free one slot: end one stream on both sides, then a new one is served.
	if err := open[0].CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, open[0]); err != nil {
		t.Fatalf("waiting for the server to close: %v", err)
	}
	_ = open[0].Close()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never closed the stream the client ended")
	}
	s, err := try()
	if err != nil {
		t.Fatalf("no stream served after one ended: %v", err)
	}
	_ = s.Close()
	for _, s := range open[1:] {
		_ = s.Reset()
	}
}

// TestProtocolLimitOutbound checks the outbound half of the cap: NewStream
// fails locally once the host has as many outbound streams of the protocol as
// allowed.
func TestProtocolLimitOutbound(t *testing.T) {
	server := newTestHost(t, "/ip4/127.0.0.1/tcp/0")
	client := newTestHost(t, "", WithProtocolLimit(limitProto, 0, 1, 1<<20))
	server.SetStreamHandler(limitProto, echoFrames)
	connect(t, client, server)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := client.NewStream(ctx, server.ID(), limitProto)
	if err != nil {
		t.Fatalf("first stream: %v", err)
	}
	defer s.Reset()
	s2, err := client.NewStream(ctx, server.ID(), limitProto)
	if err == nil {
		s2.Reset()
		t.Fatal("second outbound stream opened over a cap of 1")
	}
	if !errors.Is(err, network.ErrResourceLimitExceeded) {
		t.Fatalf("err = %v, want ErrResourceLimitExceeded", err)
	}
	// Other protocols are not affected.
	s3, err := client.NewStream(ctx, server.ID(), echoProto)
	if err == nil {
		s3.Reset()
	} else if strings.Contains(err.Error(), "resource limit") {
		t.Fatalf("uncapped protocol refused: %v", err)
	}
}

func TestNewHostRefusesBadConfig(t *testing.T) {
	key := newKey(t)
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"no identity", nil, "identity is required"},
		{"nil identity", []Option{WithIdentity(nil)}, "nil key"},
		{"low above high", []Option{WithIdentity(key), WithConnManager(10, 5, 0)}, "watermarks"},
		{"zero high", []Option{WithIdentity(key), WithConnManager(0, 0, 0)}, "watermarks"},
		{"negative grace", []Option{WithIdentity(key), WithConnManager(1, 2, -time.Second)}, "grace"},
		{"empty protocol", []Option{WithIdentity(key), WithProtocolLimit("", 1, 1, 1)}, "empty protocol"},
		{"negative streams", []Option{WithIdentity(key), WithProtocolLimit(limitProto, -1, 1, 1)}, "negative"},
		{"zero memory", []Option{WithIdentity(key), WithProtocolLimit(limitProto, 1, 1, 0)}, "memory"},
		{"empty address", []Option{WithIdentity(key), WithListenAddrs(nil)}, "empty"},
		{"duplicate identity via libp2p", []Option{WithIdentity(key), WithListenAddrs(), WithLibp2pOptions(libp2p.Identity(key))}, "multiple identities"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := NewHost(tc.opts...)
			if err == nil {
				h.Close()
				t.Fatal("NewHost succeeded")
			}
			if !strings.HasPrefix(err.Error(), "transport: new host: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want a transport error containing %q", err, tc.want)
			}
			goleak.VerifyNone(t)
		})
	}
}

// TestNewHostFailedStartLeavesNothingRunning makes the host fail while
// starting (its only listen address is not this machine's, with port 0, so
// that no probe catches it before libp2p starts) and checks that no
// goroutine is left behind.
func TestNewHostFailedStartLeavesNothingRunning(t *testing.T) {
	h, err := NewHost(WithIdentity(newKey(t)), WithListenAddrs(ma.StringCast("/ip4/198.51.100.77/tcp/0")))
	if err == nil {
		h.Close()
		t.Fatal("NewHost succeeded on an address of no interface")
	}
	t.Logf("NewHost: %v", err)
	goleak.VerifyNone(t)
}

// TestNewHostRefusesBusyPort: a port held by another socket fails NewHost
// with ErrPortInUse and a message naming the port and the protocol, and
// leaves nothing running. The TCP case is held by another libp2p host,
// whose SO_REUSEPORT listener libp2p would otherwise share in silence.
func TestNewHostRefusesBusyPort(t *testing.T) {
	other := newTestHost(t, "/ip4/127.0.0.1/tcp/0")
	tcpPort := ""
	for _, a := range other.Network().ListenAddresses() {
		if v, err := a.ValueForProtocol(ma.P_TCP); err == nil {
			tcpPort = v
		}
	}
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	udpPort := portOf(udp.LocalAddr())
	for _, tc := range []struct {
		name   string
		listen []string
		want   string
	}{
		{"tcp held by a reuseport host", []string{"/ip4/127.0.0.1/tcp/" + tcpPort}, "port " + tcpPort + " on 127.0.0.1 is in use (TCP) by another process"},
		{"udp held", []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/" + udpPort + "/quic-v1"}, "port " + udpPort + " on 127.0.0.1 is in use (UDP) by another process"},
		{"both", []string{"/ip4/127.0.0.1/tcp/" + tcpPort, "/ip4/127.0.0.1/udp/" + tcpPort + "/quic-v1", "/ip4/127.0.0.1/udp/" + udpPort + "/quic-v1"},
			"port " + tcpPort + " on 127.0.0.1 is in use (TCP) by another process; port " + udpPort + " on 127.0.0.1 is in use (UDP) by another process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var addrs []ma.Multiaddr
			for _, a := range tc.listen {
				addrs = append(addrs, ma.StringCast(a))
			}
			h, err := NewHost(WithIdentity(newKey(t)), WithListenAddrs(addrs...))
			if err == nil {
				h.Close()
				t.Fatalf("NewHost on %v succeeded", tc.listen)
			}
			if !errors.Is(err, ErrPortInUse) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q (ErrPortInUse: %v), want it to contain %q", err, errors.Is(err, ErrPortInUse), tc.want)
			}
			if err := CheckListenAddrs(addrs...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckListenAddrs = %v, want %q", err, tc.want)
			}
		})
	}
	// The holder keeps working: a fresh host still connects to it.
	connect(t, newTestHost(t, ""), other)
}

// TestNewHostFailsWhenAnyAddressIsNotBound: libp2p starts when one listen
// address of several is bound; NewHost fails naming the one that is not,
// and closes the host.
func TestNewHostFailsWhenAnyAddressIsNotBound(t *testing.T) {
	h, err := NewHost(WithIdentity(newKey(t)), WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0"), ma.StringCast("/ip4/198.51.100.77/udp/0/quic-v1")))
	if err == nil {
		h.Close()
		t.Fatal("NewHost succeeded with an address of no interface")
	}
	want := "cannot listen on /ip4/198.51.100.77/udp/0/quic-v1: 198.51.100.77 is not an address of this machine"
	if !strings.Contains(err.Error(), want) || errors.Is(err, ErrPortInUse) {
		t.Fatalf("err = %q, want %q", err, want)
	}
	goleak.VerifyNone(t)
	// Port 0 and a bound address match; the other components must be equal.
	for _, tc := range []struct {
		want, got string
		ok        bool
	}{
		{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/tcp/4242", true},
		{"/ip4/0.0.0.0/udp/0/quic-v1", "/ip4/0.0.0.0/udp/4242/quic-v1", true},
		{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/tcp/4001", true},
		{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/tcp/4002", false},
		{"/ip4/0.0.0.0/udp/0/quic-v1", "/ip4/0.0.0.0/tcp/4242", false},
		{"/ip4/0.0.0.0/tcp/0", "/ip6/::/tcp/4242", false},
		{"/ip4/127.0.0.1/tcp/0", "/ip4/0.0.0.0/tcp/4242", false},
	} {
		if got := listenMatches(ma.StringCast(tc.want), ma.StringCast(tc.got)); got != tc.ok {
			t.Errorf("listenMatches(%s, %s) = %v, want %v", tc.want, tc.got, got, tc.ok)
		}
	}
}

func portOf(a net.Addr) string {
	_, port, _ := net.SplitHostPort(a.String())
	return port
}

func TestNewHostLogsAndCloses(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := NewHost(WithIdentity(newKey(t)), WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "transport: host started") || !strings.Contains(logs.String(), h.ID().String()) {
		t.Fatalf("log %q lacks the start line", logs.String())
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t)
}

// TestConnLimitsReachHighWatermark: the resource manager lets the
// connections reach the connection manager's high watermark, which then
// trims them; auto-scaled, its inbound limit (64 + 64/GiB of an eighth of
// the memory) refused a 300-node mesh's bootstrap node its 257th peer.
func TestConnLimitsReachHighWatermark(t *testing.T) {
	for _, high := range []int{DefaultConnHigh, 5000} {
		var logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, nil))
		h := newTestHost(t, "", WithLogger(logger), WithConnManager(10, high, 0))
		var lim rcmgr.Limit
		if err := h.Network().ResourceManager().ViewSystem(func(s network.ResourceScope) error {
			l, ok := s.(rcmgr.ResourceScopeLimiter)
			if !ok {
				return fmt.Errorf("the system scope %T has no limit to read", s)
			}
			lim = l.Limit()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if in, all := lim.GetConnLimit(network.DirInbound), lim.GetConnTotalLimit(); in < high || all < high {
			t.Errorf("high watermark %d: the resource manager admits %d inbound and %d connections in all; want both at least the watermark", high, in, all)
		}
		if strings.Contains(logs.String(), "level=WARN") {
			t.Errorf("high watermark %d: warned: %s", high, logs.String())
		}
	}
}

func TestDefaultListenAddrs(t *testing.T) {
	var got []string
	for _, a := range DefaultListenAddrs(DefaultPort) {
		got = append(got, a.String())
	}
	want := []string{
		"/ip4/0.0.0.0/tcp/4001",
		"/ip4/0.0.0.0/udp/4001/quic-v1",
		"/ip6/::/tcp/4001",
		"/ip6/::/udp/4001/quic-v1",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("DefaultListenAddrs(4001) = %v, want %v", got, want)
	}
}
