package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sumHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func openPartialT(t *testing.T, f *Files, owner, name string, data []byte) *Partial {
	t.Helper()
	p, err := f.OpenPartial(context.Background(), owner, name, int64(len(data)), sumHex(data))
	if err != nil {
		t.Fatalf("OpenPartial: %v", err)
	}
	return p
}

// partNames returns the partial files in dir.
func partNames(t *testing.T, dir string) []string {
	var out []string
	for _, n := range rawNames(t, dir) {
		if strings.HasPrefix(n, partPrefix) {
			out = append(out, n)
		}
	}
	return out
}

func TestPartialResumeAndCommit(t *testing.T) {
	s, _ := openT(t)
	f := s.Files()
	data := bytes.Repeat([]byte("resumable upload "), 10000)
	half := len(data) / 2

	p := openPartialT(t, f, "peerA", "big.bin", data)
	if p.Offset() != 0 || p.Size() != int64(len(data)) || p.Name() != "big.bin" {
		t.Fatalf("fresh partial: offset %d size %d name %q", p.Offset(), p.Size(), p.Name())
	}
	if _, err := p.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	// Invisible while in progress, by List and by name.
	if l, err := f.List(); err != nil || len(l) != 0 {
		t.Fatalf("List during upload = %v, %v", l, err)
	}
	parts := partNames(t, f.Dir())
	if len(parts) != 1 {
		t.Fatalf("partial files: %v", rawNames(t, f.Dir()))
	}
	if err := ValidateName(parts[0]); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("ValidateName(%q) = %v, want ErrInvalidName", parts[0], err)
	}
	if _, _, err := f.Open(parts[0]); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("Open(part) = %v", err)
	}
	if _, err := f.Write(parts[0], strings.NewReader("x")); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("Write(part) = %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	// Resume: the offset is what was kept, and the hash is rebuilt from it.
	p = openPartialT(t, f, "peerA", "big.bin", data)
	if p.Offset() != int64(half) {
		t.Fatalf("resumed offset %d, want %d", p.Offset(), half)
	}
	if _, err := p.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
	info, err := p.Commit()
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if info.Filename != "big.bin" || info.Size != int64(len(data)) || info.SHA256 != sumHex(data) {
		t.Fatalf("Commit info %+v", info)
	}
	got, err := os.ReadFile(filepath.Join(f.Dir(), "big.bin"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("stored content differs (%d bytes, %v)", len(got), err)
	}
	if ps := partNames(t, f.Dir()); len(ps) != 0 {
		t.Fatalf("partial left after commit: %v", ps)
	}
	if l, err := f.List(); err != nil || len(l) != 1 || l[0].SHA256 != sumHex(data) {
		t.Fatalf("List = %v, %v", l, err)
	}
	// Finished: further use is refused, Close and Discard are no-ops.
	if _, err := p.Write([]byte("x")); err == nil {
		t.Fatal("Write after Commit succeeded")
	}
	if err := errors.Join(p.Close(), p.Discard()); err != nil {
		t.Fatal(err)
	}
}

func TestPartialIncompleteCommitKeepsBytes(t *testing.T) {
	s, _ := openT(t)
	f := s.Files()
	data := []byte("0123456789")
	p := openPartialT(t, f, "peerA", "a.txt", data)
	if _, err := p.Write(data[:4]); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Commit(); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Commit of 4/10 bytes = %v, want ErrIncomplete", err)
	}
	p = openPartialT(t, f, "peerA", "a.txt", data)
	defer p.Close()
	if p.Offset() != 4 {
		t.Fatalf("offset after incomplete commit = %d, want 4", p.Offset())
	}
}

func TestPartialHashMismatchDiscards(t *testing.T) {
	s, _ := openT(t)
	f := s.Files()
	data := []byte("what was declared")
	lie := []byte("what was really sent")[:len(data)]
	p := openPartialT(t, f, "peerA", "x.txt", data)
	if _, err := p.Write(lie); err != nil {
		t.Fatal(err)
	}
	_, err := p.Commit()
	if !errors.Is(err, ErrHashMismatch) || !strings.Contains(err.Error(), sumHex(lie)) || !strings.Contains(err.Error(), "discarded") {
		t.Fatalf("Commit = %v, want ErrHashMismatch naming the received hash", err)
	}
	if names := rawNames(t, f.Dir()); len(names) != 0 {
		t.Fatalf("left behind: %v", names)
	}
	p = openPartialT(t, f, "peerA", "x.txt", data)
	defer p.Close()
	if p.Offset() != 0 {
		t.Fatalf("after a mismatch the upload resumed at %d", p.Offset())
	}
}

func TestPartialRefusals(t *testing.T) {
	s, _ := openT(t, WithMaxFileSize(100))
	f := s.Files()
	ctx := context.Background()
	good := sumHex(nil)
	for _, c := range []struct {
		name string
		size int64
		sum  string
		want error
	}{
		{"../escape", 1, good, ErrInvalidName},
		{"a/b", 1, good, ErrInvalidName},
		{"", 1, good, ErrInvalidName},
		{tempPrefix + "x", 1, good, ErrInvalidName},
		{partPrefix + "x", 1, good, ErrInvalidName},
		{"big", 101, good, ErrTooLarge},
		{"neg", -1, good, nil},
		{"sum", 1, strings.ToUpper(good), nil},
		{"sum", 1, good[:63], nil},
	} {
		p, err := f.OpenPartial(ctx, "peerA", c.name, c.size, c.sum)
		if err == nil {
			p.Discard()
			t.Errorf("OpenPartial(%q, %d, %q) succeeded", c.name, c.size, c.sum)
			continue
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("OpenPartial(%q, %d) = %v, want %v", c.name, c.size, err, c.want)
		}
	}
	// Exactly the cap is fine; a byte beyond the declared size is not.
	data := bytes.Repeat([]byte{'z'}, 100)
	p := openPartialT(t, f, "peerA", "cap", data)
	if _, err := p.Write(append(data, 'z')); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("write beyond size = %v", err)
	}
	if p.Offset() != 0 {
		t.Fatalf("a refused write moved the offset to %d", p.Offset())
	}
	if _, err := p.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(rawNames(t, f.Dir())) != 1 {
		t.Fatalf("dir: %v", rawNames(t, f.Dir()))
	}
	if names := partNames(t, f.Dir()); len(names) != 0 {
		t.Fatalf("refusals left partial files: %v", names)
	}
}

func TestPartialSymlinkTargetRefused(t *testing.T) {
	s, _ := openT(t)
	f := s.Files()
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.Dir(), "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.OpenPartial(context.Background(), "peerA", "link", 3, sumHex([]byte("bad"))); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("OpenPartial(symlink) = %v", err)
	}
	// A symlink that appears between open and commit is refused too.
	data := []byte("bad")
	p := openPartialT(t, f, "peerA", "late", data)
	if err := os.Symlink(outside, filepath.Join(f.Dir(), "late")); err != nil {
		t.Fatal(err)
	}
	p.Write(data)
	if _, err := p.Commit(); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("Commit onto a symlink = %v", err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Fatalf("outside file changed to %q", b)
	}
}

func TestPartialKeyedByOwnerAndContent(t *testing.T) {
	s, _ := openT(t)
	f := s.Files()
	data := []byte("some content")
	p := openPartialT(t, f, "peerA", "n", data)
	p.Write(data[:5])
	p.Close()
	for _, c := range []struct {
		owner, name string
		data        []byte
	}{
		{"peerB", "n", data},                    // another sender
		{"peerA", "m", data},                    // another name
		{"peerA", "n", []byte("other content")}, // other content
	} {
		q := openPartialT(t, f, c.owner, c.name, c.data)
		if q.Offset() != 0 {
			t.Errorf("%s/%s resumed someone else's upload at %d", c.owner, c.name, q.Offset())
		}
		q.Discard()
	}
	if PartName("a", "bc", 1, "x") == PartName("ab", "c", 1, "x") {
		t.Fatal("PartName is ambiguous")
	}
}

func TestPartialSupersede(t *testing.T) {
	s, _ := openT(t)
	f := s.Files()
	data := []byte("0123456789")
	old := openPartialT(t, f, "peerA", "n", data)
	old.Write(data[:3])

	type res struct {
		p   *Partial
		err error
	}
	ch := make(chan res, 1)
	go func() {
		p, err := f.OpenPartial(context.Background(), "peerA", "n", int64(len(data)), sumHex(data))
		ch <- res{p, err}
	}()
	select {
	case <-old.Superseded():
	case <-time.After(10 * time.Second):
		t.Fatal("the open partial was not told it is superseded")
	}
	select {
	case r := <-ch:
		t.Fatalf("second OpenPartial returned while the first was open: %v", r.err)
	case <-time.After(50 * time.Millisecond):
	}
	old.Write(data[3:5])
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.p.Offset() != 5 {
		t.Fatalf("takeover resumed at %d, want 5", r.p.Offset())
	}
	// A holder that never lets go: the waiter gives up with its context.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := f.OpenPartial(ctx, "peerA", "n", int64(len(data)), sumHex(data)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("OpenPartial while held = %v", err)
	}
	r.p.Discard()
}

func TestRemoveStaleParts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := s.Files()
	old, fresh, open := []byte("old upload"), []byte("fresh upload"), []byte("open upload")
	for _, d := range [][]byte{old, fresh} {
		p := openPartialT(t, f, "peerA", "n", d)
		p.Write(d[:3])
		p.Close()
	}
	held := openPartialT(t, f, "peerA", "n", open)
	held.Write(open[:2])
	long := time.Now().Add(-DefaultPartialTTL - time.Hour)
	for _, d := range [][]byte{old, open} {
		name := PartName("peerA", "n", int64(len(d)), sumHex(d))
		if err := os.Chtimes(filepath.Join(f.Dir(), name), long, long); err != nil {
			t.Fatal(err)
		}
	}
	// An open partial is never removed, however old.
	if n, err := f.RemoveStaleParts(time.Now()); err != nil || n != 1 {
		t.Fatalf("RemoveStaleParts = %d, %v; want 1", n, err)
	}
	held.Close()
	if err := os.Chtimes(filepath.Join(f.Dir(), PartName("peerA", "n", int64(len(open)), sumHex(open))), long, long); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Open removes the stale one and keeps the fresh one.
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	parts := partNames(t, s.Files().Dir())
	if want := PartName("peerA", "n", int64(len(fresh)), sumHex(fresh)); len(parts) != 1 || parts[0] != want {
		t.Fatalf("after Open: %v, want only the fresh %s", parts, want)
	}
	p := openPartialT(t, s.Files(), "peerA", "n", fresh)
	defer p.Close()
	if p.Offset() != 3 {
		t.Fatalf("fresh partial resumed at %d, want 3", p.Offset())
	}
}
