package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// Readers that ask at once for a digest the store lacks share one
// computation of it: list_files and read_file calls arriving together
// after a BLAKE3 upload hash the file by SHA-256 once, not once each.
func TestDigestComputedOnce(t *testing.T) {
	f := openTFiles(t)
	data := bytes.Repeat([]byte("dedup "), 100000)
	commitB3(t, f, "d.bin", data)

	const readers = 8
	var started atomic.Int32
	release := make(chan struct{})
	f.hashHook = func(string, Hash) {
		started.Add(1)
		<-release
	}
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := range readers {
		wg.Go(func() {
			var info FileInfo
			var err error
			if i%2 == 0 {
				var r *os.File
				if r, info, err = f.Open("d.bin"); err == nil {
					r.Close()
				}
			} else {
				var l []FileInfo
				if l, err = f.ListContext(context.Background()); err == nil && len(l) == 1 {
					info = l[0]
				}
			}
			if err == nil && info.SHA256 != sumHex(data) {
				err = errors.New("wrong SHA-256 " + info.SHA256)
			}
			errs <- err
		})
	}
	// Without sharing, every reader would be in the hook soon; give them
	// the time to get there, then let the computation go on.
	for deadline := time.Now().Add(500 * time.Millisecond); started.Load() < readers && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := started.Load(); n != 1 {
		t.Fatalf("%d computations of the SHA-256 for %d concurrent readers, want 1", n, readers)
	}
	if st, _ := f.Stat("d.bin"); st.SHA256 != sumHex(data) || st.BLAKE3 != b3Hex(data) {
		t.Fatalf("remembered %+v", st)
	}
}

// A caller that goes away stops hashing, and remembers nothing; one that
// waited for its computation computes the digest itself.
func TestDigestCancelled(t *testing.T) {
	f := openTFiles(t)
	data := bytes.Repeat([]byte("cancel "), 100000)
	commitB3(t, f, "c.bin", data)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.ListContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("ListContext with a cancelled context: %v", err)
	}
	if _, _, err := f.OpenHash(ctx, "c.bin", HashSHA256); !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenHash with a cancelled context: %v", err)
	}
	if st, _ := f.Stat("c.bin"); st.SHA256 != "" {
		t.Fatalf("a cancelled computation remembered %q", st.SHA256)
	}

	// The first caller computes and is cancelled in the middle; the second
	// waits for it, then computes the digest itself.
	var calls atomic.Int32
	inHook, release := make(chan struct{}), make(chan struct{})
	f.hashHook = func(string, Hash) {
		if calls.Add(1) == 1 {
			close(inHook)
			<-release
		}
	}
	lctx, lcancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, _, err := f.OpenHash(lctx, "c.bin", HashSHA256)
		first <- err
	}()
	<-inHook
	second := make(chan FileInfo, 1)
	go func() {
		r, info, err := f.OpenHash(context.Background(), "c.bin", HashSHA256)
		if err == nil {
			r.Close()
		}
		second <- info
	}()
	time.Sleep(50 * time.Millisecond) // the second joins the first's computation
	lcancel()
	close(release)
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled caller: %v", err)
	}
	if info := <-second; info.SHA256 != sumHex(data) {
		t.Fatalf("the caller that waited got %+v", info)
	}
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

// TestOpenHashNone: a reader that asks for no digest gets the known ones
// and costs no hash of the file (process_instructions reads it anyway).
func TestOpenHashNone(t *testing.T) {
	f := openTFiles(t)
	data := bytes.Repeat([]byte("no digest "), 10000)
	committed := commitB3(t, f, "n.bin", data)
	f.hashHook = func(name string, h Hash) { t.Errorf("OpenHash(HashNone) computed the %s of %s", h, name) }
	r, info, err := f.OpenHash(context.Background(), "n.bin", HashNone)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if info.BLAKE3 != committed.BLAKE3 || info.SHA256 != "" || info.Size != int64(len(data)) {
		t.Errorf("OpenHash(HashNone) = %+v, want the known BLAKE3 %s, no SHA-256, %d bytes", info, committed.BLAKE3, len(data))
	}
	if _, _, err := f.OpenHash(context.Background(), "n.bin", Hash("md5")); err == nil {
		t.Error("OpenHash(md5) did not fail")
	}
}
