package node

import (
	"context"
	"testing"
	"time"
)

// waitTransfers polls (bounded, 10 s) until ok holds of n's transfers.
func waitTransfers(t *testing.T, n *Node, what string, ok func([]Transfer) bool) []Transfer {
	t.Helper()
	var ts []Transfer
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ts = n.Transfers(); ok(ts) {
			return ts
		}
	}
	t.Fatalf("transfers never showed %s: %+v", what, ts)
	return ts
}

// TestTransfersAndPartials: a transfer in progress shows on both sides,
// "out" at the sender and "in" at the receiver, with its progress; an
// interrupted one leaves a partial upload that PartialUploads lists; the
// resumed send shows where it resumed; finished, no transfer is listed.
func TestTransfersAndPartials(t *testing.T) {
	const size = 4 * mib
	path, sum := blobFile(t, size, 21)
	a, b := pair(t, nil)
	addr := addrOf(t, b)

	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var out, in []Transfer
	_, err := a.Client().SendFile(ctx, addr, path, SendOptions{Name: "t.bin", MaxAttempts: 1, Progress: func(p SendProgress) {
		if p.Sent < mib || out != nil {
			return
		}
		// The sender waits here, in its copy loop: the transfer is half-way.
		out = a.Transfers()
		in = waitTransfers(t, b, "the incoming transfer at 1 MiB", func(ts []Transfer) bool { return len(ts) == 1 && ts[0].Done >= mib })
		cancel()
	}})
	if err == nil {
		t.Fatal("SendFile completed although cancelled")
	}
	if len(out) != 1 {
		t.Fatalf("sender's transfers: %+v", out)
	}
	if o := out[0]; o.Direction != "out" || o.Peer != b.ID().String() || o.Name != "t.bin" || o.Size != size || o.Done < mib || o.Resumed != 0 || o.Attempt != 1 || o.Started.IsZero() || o.Updated.Before(o.Started) {
		t.Fatalf("sender's transfer %+v", o)
	}
	if i := in[0]; i.Direction != "in" || i.Peer != a.ID().String() || i.Name != "t.bin" || i.Size != size || i.Resumed != 0 || i.Attempt != 0 || i.ID == "" || i.ID == out[0].ID {
		t.Fatalf("receiver's transfer %+v", i)
	}
	if ts := a.Transfers(); len(ts) != 0 {
		t.Fatalf("sender lists a transfer that ended: %+v", ts)
	}
	waitTransfers(t, b, "no transfer", func(ts []Transfer) bool { return len(ts) == 0 })

	parts := b.PartialUploads()
	if len(parts) != 1 {
		t.Fatalf("partial uploads %+v, want one", parts)
	}
	held := parts[0].Have
	if p := parts[0]; p.Owner != a.ID().String() || p.Name != "t.bin" || p.Size != size || held < mib || held >= size || p.Active || p.Updated.IsZero() {
		t.Fatalf("partial upload %+v", p)
	}

	var resumed []Transfer
	info, err := a.Client().SendFile(ctxT(t), addr, path, SendOptions{Name: "t.bin", Progress: func(p SendProgress) {
		if resumed == nil {
			resumed = a.Client().Transfers()
		}
	}})
	if err != nil || info.BLAKE3 != sum.BLAKE3 {
		t.Fatalf("resumed send: %+v, %v", info, err)
	}
	if len(resumed) != 1 || resumed[0].Resumed != held || resumed[0].Done != held || resumed[0].Attempt != 1 {
		t.Fatalf("resumed transfer %+v, want resumed at %d", resumed, held)
	}
	if ps := b.PartialUploads(); len(ps) != 0 {
		t.Fatalf("partial uploads after the commit: %+v", ps)
	}
	waitTransfers(t, b, "no transfer", func(ts []Transfer) bool { return len(ts) == 0 })
}
