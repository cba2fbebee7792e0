package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/protocol"
)

// idleStreams returns the client's idle streams to pid.
func idleStreams(c *Client, pid peer.ID) []*pooledStream {
	c.pool.mu.Lock()
	defer c.pool.mu.Unlock()
	if ps := c.pool.peers[pid]; ps != nil {
		return append([]*pooledStream(nil), ps.idle...)
	}
	return nil
}

// TestStreamHookFollowsTheContext: calls in a row under one context leave
// its hook on their stream; that context ending while the stream is idle
// cuts nothing (the next call, under another context, runs on the same
// stream); a call whose context has ended does not run; and one whose
// context ends while it runs is cut short, its stream not reused.
func TestStreamHookFollowsTheContext(t *testing.T) {
	a, b := pair(t, func(c *Config) { c.RateLimit = -1 })
	addr := addrOf(t, b)
	count := counterSkill(b, "count")
	pid, err := a.Client().Connect(ctxT(t), addr)
	if err != nil {
		t.Fatal(err)
	}
	call := func(ctx context.Context) error {
		_, err := a.Client().CallSkill(ctx, addr, "count", nil, protocol.CallOptions{})
		return err
	}

	ctx1, cancel1 := context.WithCancel(ctxT(t))
	for range 3 {
		if err := call(ctx1); err != nil {
			t.Fatal(err)
		}
	}
	idle := idleStreams(a.Client(), pid)
	if len(idle) != 1 || idle[0].hookCtx != ctx1 || idle[0].stopHook == nil {
		t.Fatalf("after three calls under one context: %d idle streams, want one carrying that context's hook", len(idle))
	}
	first := idle[0]

	cancel1() // the hook runs on an idle stream: it must cut nothing
	ctx2, cancel2 := context.WithCancel(ctxT(t))
	defer cancel2()
	if err := call(ctx2); err != nil {
		t.Fatalf("a call under a new context after the old one ended: %v", err)
	}
	if idle := idleStreams(a.Client(), pid); len(idle) != 1 || idle[0] != first || idle[0].hookCtx != ctx2 {
		t.Fatalf("the stream was not reused with the new context's hook")
	}

	before := count.Load()
	cancel2()
	if err := call(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("a call under an ended context: %v, want context.Canceled", err)
	}
	if count.Load() != before {
		t.Fatalf("the skill ran for a call whose context had ended")
	}

	started, release, _ := blockingSkill(b, "block")
	defer close(release)
	ctx3, cancel3 := context.WithCancel(ctxT(t))
	errc := make(chan error, 1)
	go func() {
		_, err := a.Client().CallSkill(ctx3, addr, "block", nil, protocol.CallOptions{})
		errc <- err
	}()
	waitFor(t, started, "the skill to start")
	cut := time.Now()
	cancel3()
	if err := waitFor(t, errc, "the call to be cut short"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a call whose context ended while it ran: %v, want context.Canceled", err)
	}
	t.Logf("cut %v after the cancel", time.Since(cut))
	for _, s := range idleStreams(a.Client(), pid) {
		if s.hookCtx == ctx3 {
			t.Fatal("the cut stream went back to the pool")
		}
	}
}
