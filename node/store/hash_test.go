package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"
)

func b3Hex(b []byte) string {
	s := blake3.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestHash(t *testing.T) {
	data := []byte("abc")
	for _, c := range []struct {
		h    Hash
		want string
	}{
		// FIPS 180-2's and the BLAKE3 reference's digests of "abc".
		{HashSHA256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{HashBLAKE3, "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"},
	} {
		w := c.h.New()
		w.Write(data)
		if got := hex.EncodeToString(w.Sum(nil)); got != c.want || !c.h.Known() || !c.h.Valid(got) {
			t.Errorf("%s(abc) = %s, want %s", c.h, got, c.want)
		}
		for _, bad := range []string{"", strings.ToUpper(c.want), c.want[:62], c.want + "00", strings.Repeat("g", 64)} {
			if c.h.Valid(bad) {
				t.Errorf("%s.Valid(%q)", c.h, bad)
			}
		}
	}
	if Hash("md5").Known() || Hash("md5").Valid(strings.Repeat("0", 64)) {
		t.Error("md5 is known")
	}
	if _, _, err := openTFiles(t).OpenHash(context.Background(), "x", "md5"); err == nil {
		t.Error("OpenHash with an unknown hash")
	}
}

func openTFiles(t *testing.T, opts ...Option) *Files {
	s, _ := openT(t, opts...)
	return s.Files()
}

// A file knows the digests it was verified with; the other is computed
// when a reader asks for it, once, and forgotten when the file changes.
func TestFileDigestsRecorded(t *testing.T) {
	f := openTFiles(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("blake3 "), 50000)
	size := int64(len(data))

	p, err := f.OpenPartialHash(ctx, "peerA", "b.bin", size, HashBLAKE3, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Hash() != HashBLAKE3 {
		t.Fatalf("Hash() = %s", p.Hash())
	}
	if _, err := p.Write(data); err != nil {
		t.Fatal(err)
	}
	if p.PrefixSum() != b3Hex(data) {
		t.Fatalf("PrefixSum %s, want the BLAKE3 %s", p.PrefixSum(), b3Hex(data))
	}
	info, err := p.CommitSum(b3Hex(data))
	if err != nil || info.BLAKE3 != b3Hex(data) || info.SHA256 != "" || info.Sum(HashBLAKE3) != info.BLAKE3 {
		t.Fatalf("CommitSum: %+v, %v; want the BLAKE3 alone", info, err)
	}
	if st, err := f.Stat("b.bin"); err != nil || st.BLAKE3 != b3Hex(data) || st.SHA256 != "" || st.Size != size {
		t.Fatalf("Stat: %+v, %v", st, err)
	}
	// OpenHash for the hash it knows does not read the file: change its
	// bytes behind the store's back, keeping size and mtime, and it still
	// answers from the record.
	path := filepath.Join(f.Dir(), "b.bin")
	st0, _ := os.Stat(path)
	other := bytes.Repeat([]byte("BLAKE3 "), 50000)
	rewriteInPlace(t, path, other, st0.ModTime())
	r, got, err := f.OpenHash(context.Background(), "b.bin", HashBLAKE3)
	if err != nil || got.BLAKE3 != b3Hex(data) || got.SHA256 != "" {
		t.Fatalf("OpenHash(blake3): %+v, %v", got, err)
	}
	r.Close()
	// The SHA-256 is computed when asked (from the bytes there now), and
	// then known beside the BLAKE3.
	l, err := f.List()
	if err != nil || len(l) != 1 || l[0].SHA256 != sumHex(other) || l[0].BLAKE3 != b3Hex(data) {
		t.Fatalf("List: %+v, %v", l, err)
	}
	if st, _ := f.Stat("b.bin"); st.SHA256 != sumHex(other) || st.BLAKE3 != b3Hex(data) {
		t.Fatalf("Stat after List: %+v", st)
	}
	rewriteInPlace(t, path, data, st0.ModTime())

	// A new file of the name: its own digests only.
	w, err := f.Write("b.bin", bytes.NewReader(other))
	if err != nil || w.SHA256 != sumHex(other) || w.BLAKE3 != "" {
		t.Fatalf("Write: %+v, %v", w, err)
	}
	if st, _ := f.Stat("b.bin"); st.SHA256 != sumHex(other) || st.BLAKE3 != "" {
		t.Fatalf("Stat after Write: %+v", st)
	}
	r, got, err = f.OpenHash(context.Background(), "b.bin", HashBLAKE3)
	if err != nil || got.BLAKE3 != b3Hex(other) || got.SHA256 != sumHex(other) {
		t.Fatalf("OpenHash(blake3) of a written file: %+v, %v", got, err)
	}
	r.Close()
	r, got, err = f.Open("b.bin")
	if err != nil || got.BLAKE3 != b3Hex(other) || got.SHA256 != sumHex(other) {
		t.Fatalf("Open: %+v, %v", got, err)
	}
	r.Close()
	if _, err := f.Stat("missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat of a missing file: %v", err)
	}
	if _, err := f.Stat("../x"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("Stat of ../x: %v", err)
	}
}

// rewriteInPlace overwrites path with data of the same length and sets its
// mtime back to mod: the store's record cannot tell.
func rewriteInPlace(t *testing.T, path string, data []byte, mod time.Time) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
}

// An upload declared without a hash has one key for both hashes: begun by
// SHA-256, it resumes by BLAKE3 (the kept bytes rehashed) and commits by
// it. A declared BLAKE3 digest keys apart from a declared SHA-256 with the
// same hex.
func TestPartialAcrossHashes(t *testing.T) {
	f := openTFiles(t, WithMaxStore(1<<20))
	ctx := context.Background()
	data := bytes.Repeat([]byte("either hash "), 2000)
	size := int64(len(data))
	half := size / 2

	p, err := f.OpenPartial(ctx, "peerA", "u.bin", size, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p, err = f.OpenPartialHash(ctx, "peerA", "u.bin", size, HashBLAKE3, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Offset() != half || p.PrefixSum() != b3Hex(data[:half]) {
		t.Fatalf("resumed by BLAKE3 at %d with %s, want %d with %s", p.Offset(), p.PrefixSum(), half, b3Hex(data[:half]))
	}
	if _, err := p.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
	// The SHA-256 of the content is not a BLAKE3 digest of it.
	if _, err := p.CommitSum(sumHex(data)); !errors.Is(err, ErrHashMismatch) || !strings.Contains(err.Error(), "content's blake3 is "+b3Hex(data)) {
		t.Fatalf("CommitSum with the SHA-256 = %v", err)
	}
	if n := partNames(t, f.Dir()); len(n) != 0 {
		t.Fatalf("a mismatch left %v", n)
	}

	// Declared digests key by their hash.
	hexd := b3Hex(data)
	if partName("peerA", "u.bin", size, HashBLAKE3, hexd) == partName("peerA", "u.bin", size, HashSHA256, hexd) ||
		partName("peerA", "u.bin", size, HashBLAKE3, "") != PartName("peerA", "u.bin", size, "") ||
		partName("peerA", "u.bin", size, HashSHA256, hexd) != PartName("peerA", "u.bin", size, hexd) {
		t.Fatal("partName keys")
	}
	p, err = f.OpenPartialHash(ctx, "peerA", "d.bin", size, HashBLAKE3, hexd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := f.PartialHeld("peerA", "d.bin", size, HashSHA256, hexd); got != 0 {
		t.Fatalf("a declared BLAKE3 upload is held as a SHA-256 one: %d", got)
	}
	if got := f.PartialHeld("peerA", "d.bin", size, HashBLAKE3, hexd); got != half {
		t.Fatalf("PartialHeld of the declared BLAKE3 upload = %d, want %d", got, half)
	}
	if got := f.PartialHeld("peerA", "d.bin", size, "md5", hexd); got != 0 {
		t.Fatalf("PartialHeld of an unknown hash = %d", got)
	}
	p, err = f.OpenPartialHash(ctx, "peerA", "d.bin", size, HashBLAKE3, hexd)
	if err != nil || p.Offset() != half {
		t.Fatalf("reopened the declared BLAKE3 upload: %v at %d", err, p.Offset())
	}
	if _, err := p.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
	info, err := p.Commit()
	if err != nil || info.BLAKE3 != hexd || info.SHA256 != "" {
		t.Fatalf("Commit of a declared BLAKE3 upload: %+v, %v", info, err)
	}
	for _, c := range []struct {
		alg Hash
		sum string
	}{{HashBLAKE3, strings.ToUpper(hexd)}, {HashBLAKE3, hexd[:10]}, {"md5", ""}} {
		if _, err := f.OpenPartialHash(ctx, "peerA", "e.bin", size, c.alg, c.sum); err == nil {
			t.Errorf("OpenPartialHash(%s, %q) succeeded", c.alg, c.sum)
		}
	}
}

// Pick maps each hash to its own field, and an unknown one to none.
func TestHashPick(t *testing.T) {
	var i FileInfo
	for _, h := range []Hash{HashSHA256, HashBLAKE3} {
		p := h.Pick(&i.SHA256, &i.BLAKE3)
		if p == nil {
			t.Fatalf("%s: no field", h)
		}
		*p = string(h)
	}
	if i.SHA256 != "sha256" || i.BLAKE3 != "blake3" || i.Sum(HashBLAKE3) != "blake3" {
		t.Fatalf("fields %+v", i)
	}
	if Hash("md5").Pick(&i.SHA256, &i.BLAKE3) != nil || i.Sum("md5") != "" {
		t.Fatal("an unknown hash picked a field")
	}
}

// HashPrefix hashes exactly the first n bytes, across several reads, and
// stops at a short file and at a cancelled context.
func TestHashPrefix(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (2*hashBuffer+100)/16)
	r := bytes.NewReader(data)
	for _, n := range []int64{0, 1, hashBuffer, hashBuffer + 7, int64(len(data))} {
		h := sha256.New()
		if err := HashPrefix(context.Background(), h, r, n); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if want := sha256.Sum256(data[:n]); !bytes.Equal(h.Sum(nil), want[:]) {
			t.Fatalf("n=%d: wrong digest", n)
		}
	}
	if err := HashPrefix(context.Background(), sha256.New(), r, int64(len(data))+1); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("past the end: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := HashPrefix(ctx, sha256.New(), r, int64(len(data))); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
