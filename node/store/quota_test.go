package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// dirBytes sums the sizes of the regular files in dir behind the store's
// back; prefix, when set, keeps only names starting with it.
func dirBytes(t *testing.T, dir, prefix string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		st, err := e.Info()
		if errors.Is(err, os.ErrNotExist) { // removed meanwhile
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// wantUsage checks the running count against the directory itself.
func wantUsage(t *testing.T, f *Files, want int64) {
	t.Helper()
	used, _ := f.Usage()
	if disk := dirBytes(t, f.Dir(), ""); used != want || disk != want {
		t.Fatalf("usage: counted %d, on disk %d, want %d", used, disk, want)
	}
}

// wantQuota checks that err is the quota's refusal, and what every face
// reports for it.
func wantQuota(t *testing.T, err error, quota string, limit int64, says ...string) *QuotaError {
	t.Helper()
	var qe *QuotaError
	if !errors.Is(err, ErrQuota) || !errors.As(err, &qe) || qe.Quota != quota || qe.Limit != limit {
		t.Fatalf("got %v; want a %s refusal at %d bytes", err, quota, limit)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeToolExecution {
		t.Fatalf("as a protocol error: %+v", pe)
	}
	data, _ := pe.Data.(map[string]any)
	if data["quota"] != quota || data["limit_bytes"] != limit {
		t.Fatalf("error data %v", pe.Data)
	}
	for _, s := range append(says, quota, fmt.Sprint(limit)) {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("%q does not say %q", err, s)
		}
	}
	for _, s := range []string{quota, fmt.Sprint(limit), "quota exceeded"} {
		if !strings.Contains(pe.Message, s) {
			t.Fatalf("protocol message %q does not say %q", pe.Message, s)
		}
	}
	if strings.Contains(err.Error(), os.TempDir()) {
		t.Fatalf("error names a host path: %v", err)
	}
	return qe
}

func TestMaxStoreWrite(t *testing.T) {
	s, dir := openT(t, WithMaxStore(1000))
	f := s.Files()
	if _, err := f.Write("a", bytes.NewReader(make([]byte, 600))); err != nil {
		t.Fatal(err)
	}
	wantUsage(t, f, 600)
	// 600 more do not fit: refused, naming the quota and the use; nothing left.
	_, err := f.Write("b", bytes.NewReader(make([]byte, 600)))
	wantQuota(t, err, QuotaStore, 1000, "600 are in use", "store: write \"b\"")
	wantUsage(t, f, 600)
	if names := rawNames(t, f.Dir()); len(names) != 1 || names[0] != "a" {
		t.Fatalf("after the refusal: %v", names)
	}
	// Exactly the quota fits.
	if _, err := f.Write("b", bytes.NewReader(make([]byte, 400))); err != nil {
		t.Fatal(err)
	}
	wantUsage(t, f, 1000)
	// Replacing a file is judged by the result: a's 600 bytes are credited.
	if _, err := f.Write("a", bytes.NewReader(make([]byte, 550))); err != nil {
		t.Fatalf("replace within the quota: %v", err)
	}
	wantUsage(t, f, 950)
	_, err = f.Write("a", bytes.NewReader(make([]byte, 700)))
	wantQuota(t, err, QuotaStore, 1000)
	wantUsage(t, f, 950)
	if err := f.Delete("b"); err != nil {
		t.Fatal(err)
	}
	wantUsage(t, f, 550)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The count starts from one scan at Open, which also sees what was put
	// there behind the store's back.
	if err := os.WriteFile(filepath.Join(dir, "files", "outside"), make([]byte, 300), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, WithMaxStore(1000))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantUsage(t, s.Files(), 850)
	_, err = s.Files().Write("c", bytes.NewReader(make([]byte, 151)))
	wantQuota(t, err, QuotaStore, 1000, "850 are in use")
}

// Partial uploads reserve what is still to come when they open, and count
// against the same quota as files.
func TestMaxStorePartials(t *testing.T) {
	s, _ := openT(t, WithMaxStore(1000))
	f := s.Files()
	if _, err := f.Write("a", bytes.NewReader(make([]byte, 500))); err != nil {
		t.Fatal(err)
	}
	d1 := bytes.Repeat([]byte{1}, 400)
	p := openPartialT(t, f, "peerA", "p1", d1)
	if used, _ := f.Usage(); used != 900 {
		t.Fatalf("an open 400-byte upload: used %d, want 900 (reserved up front)", used)
	}
	// Another upload of 200 does not fit beside it: refused before a byte.
	d2 := bytes.Repeat([]byte{2}, 200)
	_, err := f.OpenPartial(context.Background(), "peerB", "p2", int64(len(d2)), sumHex(d2))
	wantQuota(t, err, QuotaStore, 1000, "store: open partial \"p2\"")
	if _, err := p.Write(d1[:100]); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil { // gives back the 300 that did not come
		t.Fatal(err)
	}
	wantUsage(t, f, 600)
	// Resumed: only the rest is reserved; committed: counted once.
	p = openPartialT(t, f, "peerA", "p1", d1)
	if used, _ := f.Usage(); used != 900 || p.Offset() != 100 {
		t.Fatalf("resumed at %d: used %d, want 900", p.Offset(), used)
	}
	if _, err := p.Write(d1[100:]); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	wantUsage(t, f, 900)
	// An upload replacing a file gets no credit for it: it may be kept
	// half-way while the file stays, so both must fit.
	_, err = f.OpenPartial(context.Background(), "peerA", "a", 450, sumHex(bytes.Repeat([]byte{3}, 450)))
	wantQuota(t, err, QuotaStore, 1000, "store: open partial \"a\"")
	wantUsage(t, f, 900)
	// A commit replacing a file frees the old one's bytes.
	d3 := bytes.Repeat([]byte{3}, 100)
	p = openPartialT(t, f, "peerA", "a", d3) // beside a (500): 1000 of 1000
	p.Write(d3)
	if _, err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	wantUsage(t, f, 500)
	// A discard gives everything back.
	d4 := bytes.Repeat([]byte{4}, 100)
	p = openPartialT(t, f, "peerA", "p4", d4)
	p.Write(d4[:50])
	if err := p.Discard(); err != nil {
		t.Fatal(err)
	}
	wantUsage(t, f, 500)
}

// Concurrent writers never take the directory over the quota, and the
// running count matches the directory afterwards.
func TestMaxStoreConcurrent(t *testing.T) {
	const quota = 64 << 10
	s, _ := openT(t, WithMaxStore(quota))
	f := s.Files()
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 40 {
				name := fmt.Sprintf("f%d", r.IntN(12))
				var err error
				switch r.IntN(4) {
				case 0:
					err = f.Delete(name)
					if errors.Is(err, ErrNotFound) {
						err = nil
					}
				case 1:
					data := bytes.Repeat([]byte{byte(i)}, 1+r.IntN(8<<10))
					var p *Partial
					if p, err = f.OpenPartial(context.Background(), fmt.Sprint("peer", g), name, int64(len(data)), sumHex(data)); err == nil {
						p.Write(data[:len(data)/2])
						if r.IntN(2) == 0 {
							p.Write(data[len(data)/2:])
							_, err = p.Commit()
						} else {
							err = p.Close()
						}
					}
				default:
					_, err = f.Write(name, bytes.NewReader(make([]byte, r.IntN(16<<10))))
				}
				if errors.Is(err, ErrQuota) {
					mu.Lock()
					refused++
					mu.Unlock()
				} else if err != nil {
					t.Error(err)
				}
				if disk := dirBytes(t, f.Dir(), ""); disk > quota+8*(16<<10) { // each writer may be replacing a file
					t.Errorf("%d bytes on disk, over the %d-byte quota", disk, quota)
				}
			}
		})
	}
	wg.Wait()
	used, _ := f.Usage()
	if disk := dirBytes(t, f.Dir(), ""); used != disk || disk > quota {
		t.Fatalf("after the writers: counted %d, on disk %d, quota %d", used, disk, quota)
	}
	if refused == 0 {
		t.Fatal("the quota never refused a write: the test did not reach it")
	}
	t.Logf("%d writes refused by the quota", refused)
}

// openHeld opens an upload of a size-byte file by owner and writes have
// bytes of it; the Partial stays open.
func openHeld(t *testing.T, f *Files, owner, name string, size, have int, seed byte) *Partial {
	t.Helper()
	data := bytes.Repeat([]byte{seed}, size)
	p := openPartialT(t, f, owner, name, data)
	if _, err := p.Write(data[p.Offset():have]); err != nil {
		t.Fatal(err)
	}
	return p
}

// interrupted leaves an unfinished upload of have of size bytes, last
// written at mod.
func interrupted(t *testing.T, f *Files, owner, name string, size, have int, seed byte, mod time.Time) []DroppedUpload {
	t.Helper()
	p := openHeld(t, f, owner, name, size, have, seed)
	dropped := p.Dropped()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	part := PartName(owner, name, int64(size), sumHex(bytes.Repeat([]byte{seed}, size)))
	if err := os.Chtimes(filepath.Join(f.Dir(), part), mod, mod); err != nil {
		t.Fatal(err)
	}
	return dropped
}

func TestMaxPartialDropsOldest(t *testing.T) {
	const kib = 1 << 10
	s, _ := openT(t, WithMaxPartial(10*kib))
	f := s.Files()
	a, b := ownerPrefix("peerA"), ownerPrefix("peerB")
	t0 := time.Now().Add(-time.Hour)
	// Another sender's uploads are never dropped for peerA's.
	interrupted(t, f, "peerB", "b1", 8*kib, 8*kib-1, 9, t0.Add(-time.Hour))
	// 2+2+2+2 KiB kept of four 4 KiB uploads; each fits when it opens (its
	// declared 4 KiB plus what the others keep is at most 10 KiB).
	for i, name := range []string{"u1", "u2", "u3"} {
		if d := interrupted(t, f, "peerA", name, 4*kib, 2*kib, byte(i), t0.Add(time.Duration(i)*time.Minute)); d != nil {
			t.Fatalf("%s dropped %v", name, d)
		}
	}
	// u4 (4 KiB) beside 6 KiB kept: 10 KiB, fits.
	if d := interrupted(t, f, "peerA", "u4", 4*kib, 2*kib, 3, t0.Add(3*time.Minute)); d != nil {
		t.Fatalf("u4 dropped %v", d)
	}
	// u5 beside 8 KiB kept: the oldest, u1, goes; the sender is told.
	p := openHeld(t, f, "peerA", "u5", 4*kib, 0, 4)
	if d := p.Dropped(); len(d) != 1 || d[0] != (DroppedUpload{Name: "u1", Size: 4 * kib, Have: 2 * kib}) {
		t.Fatalf("u5 dropped %+v; want u1 with 2 KiB", d)
	}
	if got := dirBytes(t, f.Dir(), a); got != 6*kib {
		t.Fatalf("peerA keeps %d bytes, want 6 KiB", got)
	}
	if got := dirBytes(t, f.Dir(), b); got != 8*kib-1 {
		t.Fatalf("peerB keeps %d bytes, want its 8 KiB - 1", got)
	}
	// An open upload counts at its declared size and is never dropped: a
	// second open one (4 KiB) drops u2, u3 and u4 would not be enough... it
	// needs 4+4 plus what is kept ≤ 10: u2 and u3 go, u4 stays.
	q := openHeld(t, f, "peerA", "u6", 4*kib, 1*kib, 5)
	var names []string
	for _, d := range q.Dropped() {
		names = append(names, d.Name)
	}
	if fmt.Sprint(names) != "[u2 u3]" {
		t.Fatalf("u6 dropped %v; want [u2 u3], oldest first", names)
	}
	// A third 4 KiB one cannot fit beside two in progress (8 KiB) whatever
	// is dropped: refused, naming what holds the room, and nothing (u4) is
	// dropped for it.
	data := bytes.Repeat([]byte{6}, 4*kib)
	_, err := f.OpenPartial(context.Background(), "peerA", "u7", int64(len(data)), sumHex(data))
	qe := wantQuota(t, err, QuotaPartial, 10*kib, "uploads in progress hold")
	if qe.Used != 8*kib || qe.Need != 4*kib {
		t.Fatalf("refusal %+v; want 8 KiB used, 4 KiB needed", qe)
	}
	if got := dirBytes(t, f.Dir(), a); got != 3*kib {
		t.Fatalf("after the refusal peerA keeps %d bytes, want u4's 2 KiB and u6's 1 KiB", got)
	}
	// An upload over the cap alone is refused up front, naming the cap.
	big := bytes.Repeat([]byte{7}, 10*kib+1)
	_, err = f.OpenPartial(context.Background(), "peerC", "big", int64(len(big)), sumHex(big))
	wantQuota(t, err, QuotaPartial, 10*kib, "an upload of 10241 bytes exceeds")
	if got := dirBytes(t, f.Dir(), ownerPrefix("peerC")); got != 0 {
		t.Fatalf("the refused upload left %d bytes", got)
	}
	p.Close()
	q.Close()
	// Never over the cap on disk, and the running count is exact.
	if got := dirBytes(t, f.Dir(), a); got > 10*kib {
		t.Fatalf("peerA holds %d bytes on disk, over the cap", got)
	}
	used, _ := f.Usage()
	if disk := dirBytes(t, f.Dir(), ""); used != disk {
		t.Fatalf("counted %d, on disk %d", used, disk)
	}
	// Resuming an upload keeps its bytes; its own part is never dropped.
	p = openHeld(t, f, "peerA", "u6", 4*kib, 1*kib, 5)
	if p.Offset() != 1*kib || p.Dropped() != nil {
		t.Fatalf("resumed u6 at %d, dropped %v", p.Offset(), p.Dropped())
	}
	p.Close()
}

// ageParts moves the modification time of every partial upload in f back
// by d: to the sweep, which goes by the file system's clock, as if d had
// passed since each was last written.
func ageParts(t *testing.T, f *Files, d time.Duration) {
	t.Helper()
	for _, name := range partNames(t, f.Dir()) {
		p := filepath.Join(f.Dir(), name)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		mt := st.ModTime().Add(-d)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSweepStalePartials(t *testing.T) {
	const ttl = 200 * time.Millisecond
	s, _ := openT(t, WithPartialTTL(ttl))
	f := s.Files()
	d := bytes.Repeat([]byte("x"), 100)
	p := openHeld(t, f, "peerA", "stale", 100, 40, 'x')
	p.Close()
	held := openHeld(t, f, "peerA", "held", 100, 10, 'y')
	used0, _ := f.Usage()
	ageParts(t, f, ttl+50*time.Millisecond)
	// touched: written within the TTL, so kept
	touched := openHeld(t, f, "peerB", "touched", 100, 10, 'z')
	touched.Close()
	r, err := s.Sweep()
	if err != nil || r.Partials != 1 {
		t.Fatalf("Sweep = %+v, %v; want one stale partial removed", r, err)
	}
	parts := partNames(t, f.Dir())
	want := map[string]bool{
		PartName("peerA", "held", 100, sumHex(bytes.Repeat([]byte{'y'}, 100))):    true,
		PartName("peerB", "touched", 100, sumHex(bytes.Repeat([]byte{'z'}, 100))): true,
	}
	if len(parts) != 2 || !want[parts[0]] || !want[parts[1]] {
		t.Fatalf("after the sweep: %v; want the open one and the touched one", parts)
	}
	if used, _ := f.Usage(); used != used0-40+10 {
		t.Fatalf("usage after the sweep: %d, want %d", used, used0-40+10)
	}
	// The open one goes once it is let go and stale; the stale one's
	// upload starts from zero.
	held.Close()
	ageParts(t, f, ttl+50*time.Millisecond)
	if r, err := s.Sweep(); err != nil || r.Partials != 2 {
		t.Fatalf("second Sweep = %+v, %v", r, err)
	}
	if p := openPartialT(t, f, "peerA", "stale", d); p.Offset() != 0 {
		t.Fatalf("a swept upload resumed at %d", p.Offset())
	} else {
		p.Discard()
	}
	wantUsage(t, f, 0)
}

func TestOpenBadLimitOptions(t *testing.T) {
	for _, o := range []Option{
		WithMaxPartial(-1), WithPartialTTL(0), WithMaxStore(-1), WithAuditRotation(-1, 1),
		WithAuditRotation(1, -1), WithMaxConversations(-1), WithConversationTTL(-time.Second), WithClock(nil),
	} {
		if s, err := Open(t.TempDir(), o); err == nil {
			s.Close()
			t.Errorf("Open accepted a bad option")
		}
	}
}
