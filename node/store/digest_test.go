package store

import (
	"bytes"
	"context"
	"testing"
)

// commitB3 stores data under name by a BLAKE3 upload, so that the store
// knows its BLAKE3 and not its SHA-256.
func commitB3(t *testing.T, f *Files, name string, data []byte) FileInfo {
	t.Helper()
	p, err := f.OpenPartialHash(context.Background(), "peerA", name, int64(len(data)), HashBLAKE3, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(data); err != nil {
		t.Fatal(err)
	}
	info, err := p.CommitSum(b3Hex(data))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// A reader that finishes hashing an earlier file of a name after a newer
// one was committed does not make the store forget what the newer one was
// verified with.
func TestRememberKeepsCurrentFile(t *testing.T) {
	f := openTFiles(t)
	old := bytes.Repeat([]byte("old "), 1000)
	if _, err := f.Write("n.bin", bytes.NewReader(old)); err != nil {
		t.Fatal(err)
	}
	stOld, err := f.root.Lstat("n.bin")
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("new "), 2000)
	commitB3(t, f, "n.bin", data)

	f.remember("n.bin", stOld, HashBLAKE3, b3Hex(old)) // the slow reader of the old file
	if st, _ := f.Stat("n.bin"); st.BLAKE3 != b3Hex(data) {
		t.Fatalf("after a stale reader: %+v; want the new file's BLAKE3", st)
	}

	// The entry of an earlier file gives way to the current file's.
	stNew, _ := f.root.Lstat("n.bin")
	if _, err := f.Write("n.bin", bytes.NewReader(old)); err != nil {
		t.Fatal(err)
	}
	f.remember("n.bin", stNew, HashSHA256, sumHex(data)) // stale again: ignored
	if st, _ := f.Stat("n.bin"); st.SHA256 != sumHex(old) || st.BLAKE3 != "" {
		t.Fatalf("after a Write: %+v", st)
	}
}

// A listing prunes the cache entries of files gone behind the store's
// back, not those of files committed while it listed.
func TestListKeepsFilesCommittedMeanwhile(t *testing.T) {
	f := openTFiles(t)
	data := bytes.Repeat([]byte("during "), 1000)
	commitB3(t, f, "during.bin", data)
	if _, err := f.Write("gone.bin", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.root.Remove("gone.bin"); err != nil {
		t.Fatal(err)
	}
	// As a List that read the directory before both files were there.
	f.prune(map[string]bool{})
	if st, _ := f.Stat("during.bin"); st.BLAKE3 != b3Hex(data) {
		t.Fatalf("a listing forgot the digest of a file committed meanwhile: %+v", st)
	}
	f.mu.Lock()
	_, kept := f.cache["gone.bin"]
	f.mu.Unlock()
	if kept {
		t.Fatal("a listing kept the entry of a removed file")
	}
}
