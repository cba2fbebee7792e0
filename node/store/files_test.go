package store

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rawNames lists the directory behind the store's back.
func rawNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestFilesRoundTrip(t *testing.T) {
	s, _ := openT(t)
	f := s.Files()
	for _, size := range []int{1 << 10, 1 << 20, 16 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := make([]byte, size)
			rand.Read(data)
			sum := sha256.Sum256(data)
			want := hex.EncodeToString(sum[:])
			name := fmt.Sprintf("blob-%d.bin", size)

			before := time.Now().Add(-time.Second)
			info, err := f.Write(name, bytes.NewReader(data))
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			if info.Filename != name || info.Size != int64(size) || info.SHA256 != want {
				t.Fatalf("Write info = %+v, want %s %d %s", info, name, size, want)
			}
			if info.Modified.Before(before) || info.Modified.Location() != time.UTC {
				t.Errorf("Modified = %v", info.Modified)
			}

			list, err := f.List()
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || list[0] != info {
				t.Fatalf("List = %+v, want [%+v]", list, info)
			}

			rf, oinfo, err := f.Open(name)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			got, err := io.ReadAll(rf)
			rf.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatal("content read back differs")
			}
			if oinfo != info {
				t.Errorf("Open info = %+v, want %+v", oinfo, info)
			}

			if err := f.Delete(name); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if _, _, err := f.Open(name); !errors.Is(err, ErrNotFound) {
				t.Errorf("Open after Delete = %v, want ErrNotFound", err)
			}
			if err := f.Delete(name); !errors.Is(err, ErrNotFound) {
				t.Errorf("second Delete = %v, want ErrNotFound", err)
			}
			if list, _ := f.List(); len(list) != 0 {
				t.Errorf("List after Delete = %+v", list)
			}
			if names := rawNames(t, f.Dir()); len(names) != 0 {
				t.Errorf("directory not empty: %q", names)
			}
		})
	}
}

func TestFilesOpenHashesUncachedFile(t *testing.T) {
	s, dir := openT(t)
	data := []byte("written behind the store's back\n")
	if err := os.WriteFile(filepath.Join(dir, "files", "outside.txt"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	rf, info, err := s.Files().Open("outside.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	sum := sha256.Sum256(data)
	if info.SHA256 != hex.EncodeToString(sum[:]) || info.Size != int64(len(data)) {
		t.Errorf("info = %+v", info)
	}
	// Hashing must not have moved the offset.
	got, _ := io.ReadAll(rf)
	if !bytes.Equal(got, data) {
		t.Errorf("read %q after Open, want %q", got, data)
	}
}

func TestFilesOverwriteAndCache(t *testing.T) {
	s, _ := openT(t)
	f := s.Files()
	if _, err := f.Write("a.txt", strings.NewReader("first")); err != nil {
		t.Fatal(err)
	}
	info2, err := f.Write("a.txt", strings.NewReader("second version"))
	if err != nil {
		t.Fatal(err)
	}
	list, _ := f.List()
	if len(list) != 1 || list[0] != info2 {
		t.Fatalf("List = %+v, want [%+v]", list, info2)
	}

	// A change behind the store's back, same size, distinct mtime: the
	// cache must not serve the old hash.
	path := filepath.Join(f.Dir(), "a.txt")
	if err := os.WriteFile(path, []byte("SECOND VERSION"), 0o600); err != nil {
		t.Fatal(err)
	}
	mt := info2.Modified.Add(time.Hour)
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
	list, _ = f.List()
	sum := sha256.Sum256([]byte("SECOND VERSION"))
	if len(list) != 1 || list[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("List after external change = %+v, want sha %x", list, sum)
	}
	rf, info, err := f.Open("a.txt")
	if err != nil {
		t.Fatal(err)
	}
	rf.Close()
	if info != list[0] {
		t.Errorf("Open info %+v != List %+v", info, list[0])
	}
}

func TestFilesListSortedAndHidden(t *testing.T) {
	s, _ := openT(t)
	f := s.Files()
	for _, n := range []string{"b", "a", "c", ".hidden"} {
		if _, err := f.Write(n, strings.NewReader(n)); err != nil {
			t.Fatal(err)
		}
	}
	dir := f.Dir()
	if err := os.WriteFile(filepath.Join(dir, tempPrefix+"x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	list, err := f.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fi := range list {
		got = append(got, fi.Filename)
	}
	if want := []string{".hidden", "a", "b", "c"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("List names = %q, want %q", got, want)
	}
	if _, err := f.Write("sub", strings.NewReader("x")); !errors.Is(err, ErrInvalidName) {
		t.Errorf("Write over a directory = %v, want ErrInvalidName", err)
	}
	if err := f.Delete("sub"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("Delete of a directory = %v, want ErrInvalidName", err)
	}
}

func TestFilesInvalidNames(t *testing.T) {
	s, dir := openT(t)
	f := s.Files()
	names := []string{
		"../x", "/etc/passwd", "a/../../x", "a/b", `a\b`, "x\x00y", "..", ".", "",
		"a\nb", "tab\there", "del\x7f", "c1\u0085", "\xff\xfe", tempPrefix + "mine",
		strings.Repeat("n", MaxNameLen+1), "dir/", `C:\x`,
	}
	for _, name := range names {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, ErrInvalidName) {
					t.Fatalf("%s(%q) = %v, want ErrInvalidName", op, name, err)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "store: "+op+" ") {
					t.Errorf("%s error %q lacks the store: op prefix", op, msg)
				}
				if !strings.Contains(msg, quote(name)) {
					t.Errorf("%s error %q does not quote the name", op, msg)
				}
				if strings.Contains(msg, dir) {
					t.Errorf("%s error %q reveals the host path", op, msg)
				}
			}
			_, err := f.Write(name, strings.NewReader("x"))
			check("write", err)
			_, _, err = f.Open(name)
			check("open", err)
			check("delete", f.Delete(name))
			if err := ValidateName(name); !errors.Is(err, ErrInvalidName) {
				t.Errorf("ValidateName(%q) = %v", name, err)
			}
		})
	}
	if n := rawNames(t, f.Dir()); len(n) != 0 {
		t.Errorf("refused writes left files: %q", n)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a traversal write escaped: %v", err)
	}
	if err := ValidateName(strings.Repeat("n", MaxNameLen)); err != nil {
		t.Errorf("a %d-byte name was refused: %v", MaxNameLen, err)
	}
}

func TestFilesSymlinksRefused(t *testing.T) {
	s, dir := openT(t)
	f := s.Files()
	outside := filepath.Join(filepath.Dir(dir), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write("inside.txt", strings.NewReader("inside")); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"escape":       outside,
		"escape-rel":   "../../secret.txt",
		"inside-link":  filepath.Join(f.Dir(), "inside.txt"),
		"inside-rel":   "inside.txt",
		"dangling-out": filepath.Join(filepath.Dir(dir), "nope"),
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(f.Dir(), name)); err != nil {
			t.Fatal(err)
		}
	}
	for name := range links {
		t.Run(name, func(t *testing.T) {
			if _, _, err := f.Open(name); !errors.Is(err, ErrInvalidName) {
				t.Errorf("Open = %v, want ErrInvalidName", err)
			}
			if _, err := f.Write(name, strings.NewReader("overwritten")); !errors.Is(err, ErrInvalidName) {
				t.Errorf("Write = %v, want ErrInvalidName", err)
			}
			if err := f.Delete(name); !errors.Is(err, ErrInvalidName) {
				t.Errorf("Delete = %v, want ErrInvalidName", err)
			}
			if _, err := os.Lstat(filepath.Join(f.Dir(), name)); err != nil {
				t.Errorf("symlink gone: %v", err)
			}
		})
	}
	for path, want := range map[string]string{outside: "secret", filepath.Join(f.Dir(), "inside.txt"): "inside"} {
		if got, _ := os.ReadFile(path); string(got) != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("write through a dangling symlink created its target: %v", err)
	}
	list, _ := f.List()
	if len(list) != 1 || list[0].Filename != "inside.txt" {
		t.Errorf("List = %+v, want only inside.txt", list)
	}
}

func TestFilesTooLarge(t *testing.T) {
	const max = 1024
	s, dir := openT(t, WithMaxFileSize(max))
	f := s.Files()
	if f.MaxSize() != max {
		t.Fatalf("MaxSize = %d", f.MaxSize())
	}
	if _, err := f.Write("exact", bytes.NewReader(make([]byte, max))); err != nil {
		t.Fatalf("a write of exactly the cap failed: %v", err)
	}
	_, err := f.Write("big", bytes.NewReader(make([]byte, max+1)))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Write over the cap = %v, want ErrTooLarge", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"big"`) || !strings.Contains(msg, "1024") || strings.Contains(msg, dir) {
		t.Errorf("error %q should name the file and the limit, not the path", msg)
	}
	// An endless reader is cut off at the cap too.
	if _, err := f.Write("exact", io.MultiReader(strings.NewReader("new"), zeros{})); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("endless Write = %v, want ErrTooLarge", err)
	}
	if names := rawNames(t, f.Dir()); fmt.Sprint(names) != "[exact]" {
		t.Errorf("directory holds %q, want only [exact]", names)
	}
	if got, _ := os.ReadFile(filepath.Join(f.Dir(), "exact")); !bytes.Equal(got, make([]byte, max)) {
		t.Error("a refused overwrite changed the old file")
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type failingReader struct{ n int }

var errBoom = errors.New("boom")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errBoom
	}
	n := min(len(p), r.n)
	r.n -= n
	return n, nil
}

func TestFilesReaderErrorLeavesNothing(t *testing.T) {
	s, _ := openT(t)
	f := s.Files()
	_, err := f.Write("x", &failingReader{n: 100_000})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Write = %v, want the reader's error", err)
	}
	if names := rawNames(t, f.Dir()); len(names) != 0 {
		t.Errorf("failed write left %q", names)
	}
}

func TestFilesConcurrentWritesSameName(t *testing.T) {
	s, _ := openT(t)
	f := s.Files()
	const writers = 8
	contents := make([][]byte, writers)
	for i := range contents {
		contents[i] = bytes.Repeat([]byte{byte('a' + i)}, 256<<10+i)
	}
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			if _, err := f.Write("shared", bytes.NewReader(contents[i])); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := os.ReadFile(filepath.Join(f.Dir(), "shared"))
	if err != nil {
		t.Fatal(err)
	}
	whole := false
	for _, c := range contents {
		whole = whole || bytes.Equal(got, c)
	}
	if !whole {
		t.Fatal("concurrent writes produced a mixed file")
	}
	list, _ := f.List()
	sum := sha256.Sum256(got)
	if len(list) != 1 || list[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("List = %+v, want sha %x", list, sum)
	}
	if names := rawNames(t, f.Dir()); len(names) != 1 {
		t.Errorf("directory holds %q", names)
	}
}

func TestScrubDropsHostPaths(t *testing.T) {
	host := "/home/someone/.mcpv2/files/" + tempPrefix + "X"
	for _, err := range []error{
		&os.PathError{Op: "write", Path: host, Err: syscall.ENOSPC},
		&os.LinkError{Op: "rename", Old: host, New: "/home/someone/.mcpv2/files/a", Err: syscall.ENOSPC},
		fmt.Errorf("wrapped: %w", &os.PathError{Op: "sync", Path: host, Err: syscall.ENOSPC}),
	} {
		got := scrub(err)
		if strings.Contains(got.Error(), "/home/someone") {
			t.Errorf("scrub(%v) = %q keeps the host path", err, got)
		}
		if !errors.Is(got, syscall.ENOSPC) {
			t.Errorf("scrub(%v) = %v lost the cause", err, got)
		}
	}
	if err := scrub(errBoom); err != errBoom {
		t.Errorf("scrub changed a non-path error: %v", err)
	}
}

func TestFilesHugeCapDoesNotOverflow(t *testing.T) {
	s, _ := openT(t, WithMaxFileSize(math.MaxInt64))
	info, err := s.Files().Write("x", strings.NewReader("content"))
	if err != nil || info.Size != int64(len("content")) {
		t.Fatalf("Write with a MaxInt64 cap = %+v, %v", info, err)
	}
}

// TestFilesChanged: a watcher's channel is closed by each change of the
// listed files (a write, a delete), and not by a failed write.
func TestFilesChanged(t *testing.T) {
	s, _ := openT(t)
	f := s.Files()
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	ch := f.Changed()
	if _, err := f.Write("../x", strings.NewReader("x")); err == nil {
		t.Fatal("a bad name was written")
	}
	if closed(ch) {
		t.Fatal("a refused write closed the channel")
	}
	if _, err := f.Write("a.txt", strings.NewReader("a")); err != nil {
		t.Fatal(err)
	}
	if !closed(ch) {
		t.Fatal("a write did not close the channel")
	}
	ch = f.Changed()
	if closed(ch) {
		t.Fatal("the next channel is closed already")
	}
	if err := f.Delete("a.txt"); err != nil {
		t.Fatal(err)
	}
	if !closed(ch) {
		t.Fatal("a delete did not close the channel")
	}
}
