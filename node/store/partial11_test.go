package store

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// An upload opened without a declared SHA-256 (blob 1.1.0) is keyed by
// owner, name and size alone, says the hash of what it holds, can start
// over in place, and commits only against the hash given at the end.
func TestPartialUndeclaredHash(t *testing.T) {
	s, _ := openT(t, WithMaxStore(1<<20))
	f := s.Files()
	ctx := context.Background()
	data := bytes.Repeat([]byte("hash while sending "), 1000)
	size := int64(len(data))
	half := size / 2

	p, err := f.OpenPartial(ctx, "peerA", "u.bin", size, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	if got, want := p.PrefixSum(), sumHex(data[:half]); got != want {
		t.Fatalf("PrefixSum %s, want %s", got, want)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := f.PartialHeld("peerA", "u.bin", size, HashSHA256, ""); got != half {
		t.Fatalf("PartialHeld = %d, want %d", got, half)
	}
	if got := f.PartialHeld("peerA", "u.bin", size, HashBLAKE3, ""); got != half {
		t.Fatalf("PartialHeld by BLAKE3 of an undeclared upload = %d, want %d (either hash resumes it)", got, half)
	}
	for _, other := range []struct {
		owner, sum string
		size       int64
	}{{"peerB", "", size}, {"peerA", sumHex(data), size}, {"peerA", "", size + 1}} {
		if got := f.PartialHeld(other.owner, "u.bin", other.size, HashSHA256, other.sum); got != 0 {
			t.Fatalf("PartialHeld(%q, %d, %q) = %d: keyed by owner, size and declared hash", other.owner, other.size, other.sum, got)
		}
	}

	// Reopened: the kept bytes and their hash, rebuilt from disk.
	p, err = f.OpenPartial(ctx, "peerA", "u.bin", size, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Offset() != half || p.PrefixSum() != sumHex(data[:half]) {
		t.Fatalf("reopened at %d with %s", p.Offset(), p.PrefixSum())
	}
	used, _ := f.Usage()
	// Restart: from zero, in place, the quota count unchanged.
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if after, _ := f.Usage(); p.Offset() != 0 || p.PrefixSum() != sumHex(nil) || after != used {
		t.Fatalf("after Restart: offset %d, prefix %s, usage %d (was %d)", p.Offset(), p.PrefixSum(), after, used)
	}
	if _, err := p.Write(data); err != nil {
		t.Fatal(err)
	}
	// Commit needs a hash; without one the bytes are kept.
	if _, err := p.Commit(); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("Commit without a hash = %v", err)
	}
	if got := f.PartialHeld("peerA", "u.bin", size, HashSHA256, ""); got != size {
		t.Fatalf("kept %d bytes after a Commit without a hash, want %d", got, size)
	}
	if used, _ := f.Usage(); used != size {
		t.Fatalf("usage %d with one kept %d-byte upload", used, size)
	}
	// The wrong hash discards; the right one commits.
	p, err = f.OpenPartial(ctx, "peerA", "u.bin", size, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Offset() != size {
		t.Fatalf("reopened at %d", p.Offset())
	}
	if _, err := p.CommitSum(sumHex([]byte("other"))); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("CommitSHA256 with another hash = %v", err)
	}
	if n := partNames(t, f.Dir()); len(n) != 0 {
		t.Fatalf("a mismatch left %v", n)
	}
	if used, _ := f.Usage(); used != 0 {
		t.Fatalf("usage %d after the discard", used)
	}
	p, err = f.OpenPartial(ctx, "peerA", "u.bin", size, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(data); err != nil {
		t.Fatal(err)
	}
	info, err := p.CommitSum(sumHex(data))
	if err != nil || info.SHA256 != sumHex(data) || info.Size != size {
		t.Fatalf("CommitSHA256: %+v, %v", info, err)
	}
	if err := p.Restart(); err == nil {
		t.Fatal("Restart of a committed upload succeeded")
	}

	// Declared at open and given at the end: both must hold.
	p, err = f.OpenPartial(ctx, "peerA", "d.bin", size, sumHex(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := p.CommitSum(sumHex([]byte("other"))); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("declared hash right, given hash wrong: %v", err)
	}
	if used, _ := f.Usage(); used != size {
		t.Fatalf("usage %d, want the one committed file's %d", used, size)
	}
}
