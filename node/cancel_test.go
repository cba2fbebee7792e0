package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// blockingSkill registers a skill on n that signals started, then runs until
// its context is done or release is closed, and reports its context's error
// on ended.
func blockingSkill(n *Node, name string) (started chan struct{}, release chan struct{}, ended chan error) {
	started, release, ended = make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
	skills.Add(n.Registry(), name, "blocks until cancelled or released", nil, func(ctx context.Context, _ struct{}) (map[string]bool, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
		case <-release:
		}
		ended <- ctx.Err()
		return map[string]bool{"released": true}, nil
	})
	return started, release, ended
}

// rpcStream opens a raw /mcpv2/rpc/1.0.0 stream from a to b.
func rpcStream(t *testing.T, a, b *Node) network.Stream {
	t.Helper()
	pid, err := a.Client().Connect(ctxT(t), addrOf(t, b))
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Host().NewStream(ctxT(t), pid, libp2pproto.ID(protocol.RPCProtocolID))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.SetDeadline(time.Now().Add(30 * time.Second))
	return s
}

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// TestSkillCancelledWhenCallerResets: a caller that resets its stream while
// a skill runs cancels the skill's context.
func TestSkillCancelledWhenCallerResets(t *testing.T) {
	a, b := pair(t, nil)
	started, _, ended := blockingSkill(b, "block")
	s := rpcStream(t, a, b)
	if err := transport.WriteFrame(s, []byte(slotJSON(1, "block", "{}"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, started, "the skill to start")
	reset := time.Now()
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, ended, "the skill to be cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the skill ended with ctx.Err() = %v, want context.Canceled", err)
	}
	t.Logf("skill cancelled %v after the reset", time.Since(reset))
}

// TestResetCancelsAfterQuickCalls: the watch timer that quick calls on a
// stream set (and leave set) fires while a long request that follows them
// is younger than watchDelay; it must wait out the rest and then start the
// watch, so that a reset cancels the request.
func TestResetCancelsAfterQuickCalls(t *testing.T) {
	a, b := pair(t, nil)
	started, _, ended := blockingSkill(b, "block")
	s := rpcStream(t, a, b)
	fr := transport.NewFrameReader(s, 1<<20)
	for i := range 5 {
		if err := transport.WriteFrame(s, []byte(slotJSON(i, "ping", "{}"))); err != nil {
			t.Fatal(err)
		}
		if _, err := fr.ReadFrame(); err != nil {
			t.Fatalf("quick call %d: %v", i, err)
		}
	}
	time.Sleep(watchDelay / 2) // the timer the quick calls set fires while the next request runs
	if err := transport.WriteFrame(s, []byte(slotJSON(9, "block", "{}"))); err != nil {
		t.Fatal(err)
	}
	begun := time.Now()
	waitFor(t, started, "the skill to start")
	time.Sleep(3 * watchDelay)
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, ended, "the skill to be cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the skill ended with ctx.Err() = %v, want context.Canceled", err)
	}
	t.Logf("skill cancelled %v after it began", time.Since(begun))
}

// TestSkillNotCancelledByHalfClose: a caller that half-closes after its
// request (as a one-shot client does) still gets the answer, and the skill
// runs to its end uncancelled.
func TestSkillNotCancelledByHalfClose(t *testing.T) {
	a, b := pair(t, nil)
	started, release, ended := blockingSkill(b, "block")
	s := rpcStream(t, a, b)
	defer s.Reset()
	if err := transport.WriteFrame(s, []byte(slotJSON(1, "block", "{}"))); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, started, "the skill to start")
	time.Sleep(200 * time.Millisecond) // give a wrong cancellation time to land
	close(release)
	if err := waitFor(t, ended, "the skill to end"); err != nil {
		t.Fatalf("the skill's context was cancelled by a clean half-close: %v", err)
	}
	fr := transport.NewFrameReader(s, 1<<20)
	out, err := fr.ReadFrame()
	if err != nil {
		t.Fatalf("no answer after the half-close: %v", err)
	}
	var r protocol.Response
	if err := json.Unmarshal(out, &r); err != nil || r.Error != nil || !strings.Contains(string(r.Result), `"released":true`) {
		t.Fatalf("answer %s (%v)", out, err)
	}
	if _, err := fr.ReadFrame(); err == nil {
		t.Fatal("a second frame after the only request")
	}
}

// TestStreamServesRequestsAfterWatching: the reader that watches for resets
// while a request runs hands the next request over intact, on the same
// stream, many times; the stream's reservations all come back.
func TestStreamServesRequestsAfterWatching(t *testing.T) {
	a, b := pair(t, nil)
	s := rpcStream(t, a, b)
	fr := transport.NewFrameReader(s, 1<<20)
	for i := range 20 {
		payload := strings.Repeat("p", i*1000)
		if err := transport.WriteFrame(s, []byte(slotJSON(i, "ping", `{"payload":"`+payload+`"}`))); err != nil {
			t.Fatal(err)
		}
		out, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		var r protocol.Response
		if err := json.Unmarshal(out, &r); err != nil || r.Error != nil || string(r.ID) != fmt.Sprint(i) {
			t.Fatalf("request %d: answer %s (%v)", i, out, err)
		}
		if !strings.Contains(string(r.Result), payload) {
			t.Fatalf("request %d: answer %.200s does not echo its payload", i, out)
		}
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := fr.ReadFrame(); err == nil {
		t.Fatal("a frame after the half-close")
	}
	_ = s.Close()
	waitServiceMemory(t, b, 0)
}

// TestRequestMemoryRefusedBeforeRead: a frame whose declared length the
// stream's resource scope cannot hold is answered with one resource-limit
// error and the stream reset, before the payload is read; the next stream
// is served, and nothing stays reserved.
func TestRequestMemoryRefusedBeforeRead(t *testing.T) {
	const limit = 1 << 20
	a, b := pair(t, func(c *Config) {
		c.HostOptions = append(c.HostOptions,
			transport.WithServiceLimit(rpcService, 16, 16, limit),
			transport.WithServicePeerLimit(rpcService, 16, 16, limit))
	})
	s := rpcStream(t, a, b)
	defer s.Reset()
	big := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping","arguments":{"payload":"` + strings.Repeat("x", 2*limit) + `"}}}`)
	go transport.WriteFrame(s, big) // may fail once the server resets
	fr := transport.NewFrameReader(s, 1<<20)
	out, err := fr.ReadFrame()
	if err != nil {
		t.Fatalf("no error frame before the reset: %v", err)
	}
	// The payload was never read, so the stream cannot go on: it ends
	// (closed, then reset) rather than waiting for another request.
	_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
	var timeout interface{ Timeout() bool }
	if _, err := fr.ReadFrame(); err == nil || errors.As(err, &timeout) && timeout.Timeout() {
		t.Fatalf("after the refusal the stream is still open: %v", err)
	}
	var r protocol.Response
	if err := json.Unmarshal(out, &r); err != nil || r.Error == nil || r.Error.Code != protocol.CodeInternal || !strings.Contains(r.Error.Message, "resource limit") {
		t.Fatalf("want one -32603 resource-limit error, got %s", out)
	}
	if !strings.Contains(r.Error.Message, "2097") {
		t.Errorf("refusal %q does not name the request's size", r.Error.Message)
	}
	// A request that fits is still served, on a new stream.
	if got := rawCall(t, a, b, []byte(slotJSON(2, "ping", `{"payload":"small"}`))); !strings.Contains(string(got), `"small"`) {
		t.Fatalf("small request after the refusal: %s", got)
	}
	// What is left is the stream reserve of the client's pooled stream.
	waitServiceMemory(t, b, streamReserve)
}

// waitServiceMemory waits until the RPC service of n has want bytes
// reserved, as it has once its streams are gone.
func waitServiceMemory(t *testing.T, n *Node, want int64) {
	t.Helper()
	var got int64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_ = n.Host().Network().ResourceManager().ViewService(rpcService, func(s network.ServiceScope) error {
			got = s.Stat().Memory
			return nil
		})
		if got == want {
			return
		}
	}
	t.Fatalf("the rpc service holds %d bytes, want %d: a reservation leaked", got, want)
}

// TestResponseMemoryRefused: a response whose size the stream's scope
// cannot hold (with its request still reserved) is replaced by one
// resource-limit error, and the stream goes on serving.
func TestResponseMemoryRefused(t *testing.T) {
	const limit = 4 << 20
	a, b := pair(t, func(c *Config) {
		c.HostOptions = append(c.HostOptions,
			transport.WithServiceLimit(rpcService, 16, 16, limit),
			transport.WithServicePeerLimit(rpcService, 16, 16, limit))
	})
	s := rpcStream(t, a, b)
	defer s.Reset()
	fr := transport.NewFrameReader(s, 4<<20)
	// 1.5 MB in fits a medium-priority reservation (60% of the 4 MiB
	// limit), but not with as much echoed back.
	big := slotJSON(1, "ping", `{"payload":"`+strings.Repeat("x", 1_500_000)+`"}`)
	if err := transport.WriteFrame(s, []byte(big)); err != nil {
		t.Fatal(err)
	}
	out, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	var r protocol.Response
	if err := json.Unmarshal(out, &r); err != nil || r.Error == nil || r.Error.Code != protocol.CodeInternal || !strings.Contains(r.Error.Message, "response") {
		t.Fatalf("want one -32603 resource-limit error for the response, got %.300s", out)
	}
	if err := transport.WriteFrame(s, []byte(slotJSON(2, "ping", `{"payload":"small"}`))); err != nil {
		t.Fatal(err)
	}
	if out, err := fr.ReadFrame(); err != nil || !strings.Contains(string(out), `"small"`) {
		t.Fatalf("the next request on the stream: %s, %v", out, err)
	}
	_ = s.CloseWrite()
	if _, err := fr.ReadFrame(); err == nil {
		t.Fatal("a frame after the half-close")
	}
	_ = s.Close()
	waitServiceMemory(t, b, 0)
}
