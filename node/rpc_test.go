package node

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// rawCall sends msg on a fresh stream from a to b and returns the reply frame.
func rawCall(t *testing.T, a, b *Node, msg []byte) []byte {
	t.Helper()
	pid, err := a.Client().Connect(ctxT(t), addrOf(t, b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.Client().Send(ctxT(t), pid, msg, true)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return out
}

func slotJSON(id int, skill, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, skill, args)
}

func TestBatchOf101RefusedWhole(t *testing.T) {
	a, b := pair(t, nil)
	runs := counterSkill(b, "count")
	slots := make([]string, 101)
	for i := range slots {
		slots[i] = slotJSON(i+1, "count", "{}")
	}
	out := rawCall(t, a, b, []byte("["+strings.Join(slots, ",")+"]"))
	var r protocol.Response
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("want one error object, got %s", out)
	}
	if r.Error == nil || r.Error.Code != protocol.CodeInvalidRequest {
		t.Fatalf("want -32600, got %s", out)
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d slots ran", n)
	}
	// 100 is allowed and all run.
	out = rawCall(t, a, b, []byte("["+strings.Join(slots[:100], ",")+"]"))
	var rs []protocol.Response
	if err := json.Unmarshal(out, &rs); err != nil || len(rs) != 100 {
		t.Fatalf("100-slot batch: %v, %d responses", err, len(rs))
	}
	if n := runs.Load(); n != 100 {
		t.Fatalf("%d slots ran, want 100", n)
	}
}

func TestMixedBatchIndependentInOrder(t *testing.T) {
	a, b := pair(t, nil)
	msg := "[" + strings.Join([]string{
		slotJSON(1, "ping", `{"payload":"first"}`),
		slotJSON(2, "delete_file", `{"filename":"missing.txt"}`),
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"ping"}}`, // notification
		`{"jsonrpc":"2.0","id":"x","method":"nope"}`,
		`7`,
		slotJSON(3, "pay", `{"amount":2}`),
	}, ",") + "]"
	var rs []protocol.Response
	if err := json.Unmarshal(rawCall(t, a, b, []byte(msg)), &rs); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id   string
		code int
	}{{"1", 0}, {"2", protocol.CodeFileNotFound}, {`"x"`, protocol.CodeMethodNotFound}, {"null", protocol.CodeInvalidRequest}, {"3", 0}}
	if len(rs) != len(want) {
		t.Fatalf("got %d responses, want %d", len(rs), len(want))
	}
	for i, w := range want {
		if string(rs[i].ID) != w.id {
			t.Errorf("response %d id %s, want %s", i, rs[i].ID, w.id)
		}
		if w.code == 0 && (rs[i].Error != nil || rs[i].Result == nil) {
			t.Errorf("response %d: want result, got %+v", i, rs[i].Error)
		}
		if w.code != 0 && (rs[i].Error == nil || rs[i].Error.Code != w.code) {
			t.Errorf("response %d: want %d, got %+v", i, w.code, rs[i].Error)
		}
	}
	if !strings.Contains(string(rs[0].Result), `"payload":"first"`) {
		t.Errorf("first result %s", rs[0].Result)
	}
}

func TestWholeMessageRefusals(t *testing.T) {
	a, b := pair(t, nil)
	for _, c := range []struct {
		msg  string
		code int
	}{{`[]`, protocol.CodeInvalidRequest}, {`{"jsonrpc":`, protocol.CodeParseError}, {`"hi"`, protocol.CodeInvalidRequest}} {
		var r protocol.Response
		if err := json.Unmarshal(rawCall(t, a, b, []byte(c.msg)), &r); err != nil || r.Error == nil || r.Error.Code != c.code {
			t.Errorf("%s: want %d, got %+v (%v)", c.msg, c.code, r.Error, err)
		}
	}
}

func TestNotificationsOnlyGetNoReply(t *testing.T) {
	a, b := pair(t, nil)
	var runs atomic.Int64
	ran := make(chan struct{}, 3) // a send per run
	skills.Add(b.Registry(), "count", "counts calls", nil, func(context.Context, struct{}) (map[string]int64, error) {
		n := runs.Add(1)
		ran <- struct{}{}
		return map[string]int64{"count": n}, nil
	})
	pid, err := a.Client().Connect(ctxT(t), addrOf(t, b))
	if err != nil {
		t.Fatal(err)
	}
	msg := `[{"jsonrpc":"2.0","method":"tools/call","params":{"name":"count"}},{"jsonrpc":"2.0","method":"tools/call","params":{"name":"count"}}]`
	if _, err := a.Client().Send(ctxT(t), pid, []byte(msg), false); err != nil {
		t.Fatal(err)
	}
	// Send does not wait for notifications to run, and the next call goes
	// on a stream of its own, which may overtake them: wait for both.
	for range 2 {
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatalf("the notifications ran %d times, want 2", runs.Load())
		}
	}
	out, err := a.Client().Send(ctxT(t), pid, []byte(slotJSON(9, "count", "{}")), true)
	if err != nil {
		t.Fatal(err)
	}
	var r protocol.Response
	if err := json.Unmarshal(out, &r); err != nil || string(r.ID) != "9" || !strings.Contains(string(r.Result), `"count":3`) {
		t.Fatalf("reply %s (%v); runs %d", out, err, runs.Load())
	}
}

func TestOversizedFrameRefused(t *testing.T) {
	a, b := pair(t, func(c *Config) { c.MaxMessage = 1 << 16 })
	pid, err := a.Client().Connect(ctxT(t), addrOf(t, b))
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Host().NewStream(ctxT(t), pid, libp2pproto.ID(protocol.RPCProtocolID))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	big := make([]byte, 1<<16+1)
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	go transport.WriteFrame(s, big) // may fail once the server resets
	out, err := transport.NewFrameReader(s, 1<<20).ReadFrame()
	if err != nil {
		t.Fatalf("no error frame before reset: %v", err)
	}
	var r protocol.Response
	if err := json.Unmarshal(out, &r); err != nil || r.Error == nil || r.Error.Code != protocol.CodeInvalidRequest {
		t.Fatalf("want -32600, got %s", out)
	}
	// The stream is reset afterwards: no more frames.
	if _, err := transport.NewFrameReader(s, 1<<20).ReadFrame(); err == nil {
		t.Fatal("stream still open after an oversized frame")
	}
}

func TestStreamReuse(t *testing.T) {
	a, b := pair(t, nil)
	addr := addrOf(t, b)
	for i := 0; i < 20; i++ {
		if _, err := a.Client().CallSkill(ctxT(t), addr, "ping", nil, protocol.CallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	conns := a.Host().Network().ConnsToPeer(b.ID())
	if len(conns) != 1 {
		t.Fatalf("%d connections, want 1", len(conns))
	}
	if n := len(conns[0].GetStreams()); n > 1 {
		t.Fatalf("%d streams open after sequential calls, want 1 reused", n)
	}
}

// TestManyCallsInFlightToOnePeer: more calls at once than a node accepts
// streams from one peer (64) all succeed: the client keeps at most
// maxStreamsPerPeer streams open to a peer and the rest wait for one,
// instead of opening streams the peer resets. With 4 idle streams kept
// and no bound, 64 in flight got "stream reset (remote): 0x1002".
func TestManyCallsInFlightToOnePeer(t *testing.T) {
	a, b := pair(t, func(c *Config) { c.RateLimit = -1 })
	addr := addrOf(t, b)
	args := json.RawMessage(`{"payload":"` + strings.Repeat("x", 1024) + `"}`)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for range 200 {
		wg.Go(func() {
			for range 5 {
				if _, err := a.Client().CallSkill(ctxT(t), addr, "ping", args, protocol.CallOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	a.Client().pool.mu.Lock()
	defer a.Client().pool.mu.Unlock()
	for pid, ps := range a.Client().pool.peers {
		if ps.open > maxStreamsPerPeer || len(ps.idle) > ps.open {
			t.Fatalf("peer %s: %d streams open, %d idle (at most %d)", pid, ps.open, len(ps.idle), maxStreamsPerPeer)
		}
	}
}
