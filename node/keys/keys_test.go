package keys

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite the golden file testdata/keys.golden.json")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
}

// openT opens the ring of path (a new keys.json in a temp dir if "").
func openT(t testing.TB, path string, opts ...Option) *Ring {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), FileName)
	}
	r, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// addT adds a key and returns its secret.
func addT(t testing.TB, r *Ring, name string, grants []string, expires time.Duration) string {
	t.Helper()
	secret, k, err := r.Add(name, grants, expires)
	if err != nil {
		t.Fatalf("Add(%q): %v", name, err)
	}
	if k.Name != name || !LooksLikeKey(secret) {
		t.Fatalf("Add(%q) = %q, %+v", name, secret, k)
	}
	return secret
}

// wantErr checks that err wraps target, contains every substring of want,
// and does not quote secret.
func wantErr(t *testing.T, what string, err, target error, secret string, want ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: %v; want %v", what, err, target)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
	if secret != "" && strings.Contains(err.Error(), secret[len("mcpv2_"):]) {
		t.Errorf("%s: %q quotes the secret", what, err)
	}
}

func TestAddVerifyRevoke(t *testing.T) {
	clk := newClock()
	r := openT(t, "", WithClock(clk.now))
	if n := r.ActiveKeys(); n != 0 {
		t.Fatalf("empty ring: ActiveKeys = %d", n)
	}
	secret := addT(t, r, "ci", []string{"echo", "summarize", "echo"}, 0)
	other := addT(t, r, "laptop", nil, 0)
	if secret == other {
		t.Fatal("two keys have one secret")
	}
	name, grants, err := r.VerifyKey(secret)
	if err != nil || name != "ci" || !slices.Equal(grants, []string{"echo", "summarize"}) {
		t.Fatalf("VerifyKey = %q, %q, %v; want ci, [echo summarize] (repeats dropped)", name, grants, err)
	}
	grants[0] = "mutated"
	if _, g, _ := r.VerifyKey(secret); g[0] != "echo" {
		t.Fatal("the grants VerifyKey returns are not the caller's own")
	}
	if name, grants, err := r.VerifyKey(other); err != nil || name != "laptop" || grants != nil {
		t.Fatalf("VerifyKey(laptop) = %q, %q, %v", name, grants, err)
	}
	if n := r.ActiveKeys(); n != 2 {
		t.Fatalf("ActiveKeys = %d, want 2", n)
	}

	clk.advance(time.Hour)
	if err := r.Revoke("ci"); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.VerifyKey(secret)
	wantErr(t, "revoked key", err, ErrRevoked, secret, "2026-12-01T11:00:00Z", `"ci"`)
	if n := r.ActiveKeys(); n != 1 {
		t.Fatalf("ActiveKeys after revoke = %d, want 1", n)
	}
	wantErr(t, "revoke twice", r.Revoke("ci"), ErrAlreadyRevoked, "", `"ci"`, "2026-12-01T11:00:00Z")
	wantErr(t, "revoke unknown", r.Revoke("nope"), ErrNoKey, "", `"nope"`)

	keys, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].Name != "ci" || keys[1].Name != "laptop" {
		t.Fatalf("List = %+v", keys)
	}
	now := clk.now()
	if s := keys[0].Status(now); s != StatusRevoked {
		t.Errorf("ci: status %s", s)
	}
	if s := keys[1].Status(now); s != StatusActive {
		t.Errorf("laptop: status %s", s)
	}
	if !keys[1].Created.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) || !keys[1].Expires.IsZero() || !keys[1].Revoked.IsZero() {
		t.Errorf("laptop: %+v", keys[1])
	}

	// A revoked name may be used again: a new secret, the old one stays refused.
	again := addT(t, r, "ci", []string{"*"}, 0)
	if _, _, err := r.VerifyKey(secret); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("the replaced key's secret: %v; want ErrUnknownKey", err)
	}
	if name, grants, err := r.VerifyKey(again); err != nil || name != "ci" || !slices.Equal(grants, []string{"*"}) {
		t.Errorf("the new ci: %q, %q, %v", name, grants, err)
	}
}

func TestVerifyRefusals(t *testing.T) {
	r := openT(t, "")
	secret := addT(t, r, "k", nil, 0)
	for _, bad := range []string{"", "mcpv2_", "mcpv2_short", secret + "A", secret[:len(secret)-1] + "!",
		"MCPV2_" + secret[6:], "v2.public.eyJhbGciOi", "a.b.c"} {
		_, _, err := r.VerifyKey(bad)
		wantErr(t, fmt.Sprintf("VerifyKey(%q)", bad), err, ErrUnknownKey, "")
	}
	// Right shape, no such key.
	stranger := newSecret()
	_, _, err := r.VerifyKey(stranger)
	wantErr(t, "unknown key", err, ErrUnknownKey, stranger, "no key")
}

func TestExpiry(t *testing.T) {
	clk := newClock()
	r := openT(t, "", WithClock(clk.now))
	secret := addT(t, r, "temp", []string{"echo"}, 30*time.Minute)
	if _, _, err := r.VerifyKey(secret); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "active name", func() error { _, _, err := r.Add("temp", nil, 0); return err }(), ErrNameInUse, "", `"temp"`, "revoke")

	clk.advance(30 * time.Minute)
	_, _, err := r.VerifyKey(secret)
	wantErr(t, "expired key", err, ErrExpired, secret, "2026-12-01T10:30:00Z", `"temp"`)
	if n := r.ActiveKeys(); n != 0 {
		t.Errorf("ActiveKeys = %d, want 0", n)
	}
	keys, _ := r.List()
	if len(keys) != 1 || keys[0].Status(clk.now()) != StatusExpired {
		t.Fatalf("List = %+v", keys)
	}
	// An expired key may still be revoked; then it is revoked, not expired.
	if err := r.Revoke("temp"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.VerifyKey(secret); !errors.Is(err, ErrRevoked) {
		t.Errorf("revoked after expiry: %v", err)
	}
	// And an expired name may be reused.
	clk.advance(time.Minute)
	addT(t, r, "stale", nil, time.Minute)
	clk.advance(time.Minute)
	addT(t, r, "stale", nil, 0)
}

func TestAddRefuses(t *testing.T) {
	r := openT(t, "")
	for _, c := range []struct {
		name    string
		grants  []string
		expires time.Duration
		want    string
	}{
		{name: "", want: "1 to 64 characters"},
		{name: "has space", want: "1 to 64 characters of A-Z"},
		{name: strings.Repeat("a", 65), want: "1 to 64"},
		{name: "ok", grants: []string{""}, want: "empty"},
		{name: "ok", grants: []string{"a,b"}, want: "no comma"},
		{name: "ok", grants: []string{"a b"}, want: "white space"},
		{name: "ok", grants: []string{"a\x1b[2J"}, want: "control"},
		{name: "ok", expires: -time.Second, want: "want 0 (never)"},
	} {
		if _, _, err := r.Add(c.name, c.grants, c.expires); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Add(%q, %q, %s) = %v; want an error saying %q", c.name, c.grants, c.expires, err, c.want)
		}
	}
	if _, err := os.Stat(r.Path()); !os.IsNotExist(err) {
		t.Errorf("a refused Add wrote the file: %v", err)
	}
}

// TestReloadSeenByNextVerify: the node's ring sees what another ring (the
// CLI's, another process) writes at its next call.
func TestReloadSeenByNextVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	node := openT(t, path)
	cli := openT(t, path)
	secret := addT(t, cli, "ci", []string{"echo"}, 0)
	if name, _, err := node.VerifyKey(secret); err != nil || name != "ci" {
		t.Fatalf("the node does not see the new key: %q, %v", name, err)
	}
	if n := node.ActiveKeys(); n != 1 {
		t.Fatalf("ActiveKeys = %d", n)
	}
	if err := cli.Revoke("ci"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := node.VerifyKey(secret); !errors.Is(err, ErrRevoked) {
		t.Fatalf("the node does not see the revocation: %v", err)
	}
	// A third process removes the file: no keys.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := node.VerifyKey(secret); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("after removal: %v", err)
	}
}

// TestStatCache: an unchanged file that is not recent is not read again;
// a recent one is read again at every call, so that a rewrite that keeps
// its size and time stamp is still seen.
func TestStatCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	w := openT(t, path)
	secret := addT(t, w, "a", nil, 0)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	r := openT(t, path)
	s1 := r.snap.Load()
	if _, _, err := r.VerifyKey(secret); err != nil {
		t.Fatal(err)
	}
	if s2 := r.snap.Load(); s2 != s1 || s1.racy {
		t.Fatalf("an unchanged, old file was read again (racy %v)", s1.racy)
	}

	// Rewrite in place, same size, then give it back its time stamp: the
	// stat does not change, so the ring keeps its snapshot…
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	revoked := bytes.Replace(data, []byte(`"name": "a"`), []byte(`"name": "b"`), 1)
	if bytes.Equal(revoked, data) {
		t.Fatalf("file %s has no name a", data)
	}
	inPlace := func(b []byte, mtime time.Time) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	inPlace(revoked, old)
	if name, _, err := r.VerifyKey(secret); err != nil || name != "a" {
		t.Fatalf("stale snapshot expected for an unchanged stat: %q, %v", name, err)
	}
	// …but when the file is recent, its stat is not trusted.
	recent := time.Now()
	inPlace(data, recent)
	if name, _, _ := r.VerifyKey(secret); name != "a" {
		t.Fatalf("name %q", name)
	}
	inPlace(revoked, recent)
	if name, _, err := r.VerifyKey(secret); err != nil || name != "b" {
		t.Fatalf("a recent file rewritten with the same stat was not read again: %q, %v", name, err)
	}
}

// TestConcurrentAdds: writers with rings of their own (as separate CLI
// processes have) all land: the lock serializes read-change-write.
func TestConcurrentAdds(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	const n = 12
	secrets := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			r, err := Open(path)
			if err != nil {
				errs <- err
				return
			}
			s, _, err := r.Add(fmt.Sprintf("key-%02d", i), []string{"echo"}, 0)
			secrets[i] = s
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	r := openT(t, path)
	keys, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != n {
		t.Fatalf("%d keys landed of %d", len(keys), n)
	}
	for i, s := range secrets {
		if name, _, err := r.VerifyKey(s); err != nil || name != fmt.Sprintf("key-%02d", i) {
			t.Errorf("key %d: %q, %v", i, name, err)
		}
	}
}

// TestConcurrentVerify: VerifyKey from many goroutines while another ring
// writes (for the race detector).
func TestConcurrentVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	node := openT(t, path)
	cli := openT(t, path)
	secret := addT(t, cli, "a", nil, 0)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := node.VerifyKey(secret); err != nil && !errors.Is(err, ErrRevoked) {
					t.Error(err)
					return
				}
				node.ActiveKeys()
			}
		})
	}
	for i := range 10 {
		addT(t, cli, fmt.Sprintf("b%d", i), nil, 0)
	}
	if err := cli.Revoke("a"); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if _, _, err := node.VerifyKey(secret); !errors.Is(err, ErrRevoked) {
		t.Fatalf("after the writes: %v", err)
	}
}

func TestLockTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	held := flock.New(path + ".lock")
	if ok, err := held.TryLock(); !ok || err != nil {
		t.Fatalf("TryLock: %v, %v", ok, err)
	}
	r := openT(t, path, WithLockTimeout(50*time.Millisecond))
	_, _, err := r.Add("a", nil, 0)
	wantErr(t, "Add while locked", err, ErrLocked, "", "keys.json.lock")
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	addT(t, r, "a", nil, 0)
}

// corruptCases are keys files Open must refuse, with what the error must say.
var corruptCases = []struct {
	name, data, want string
}{
	{"not JSON", `{"version":1,`, "not valid JSON"},
	{"empty", "\n", "empty"},
	{"trailing text", `{"version":1,"keys":[]} x`, "not valid JSON"},
	{"version", `{"version":2,"keys":[]}`, "version 2"},
	{"no version", `{"keys":[]}`, "version 0"},
	{"unknown member", `{"version":1,"keys":[],"extra":true}`, "extra"},
	{"unknown key member", `{"version":1,"keys":[{"name":"a","sha256":"` + hex64(1) + `","grants":[],"created":"2026-12-01T10:00:00Z","secret":"x"}]}`, "secret"},
	{"repeated member", `{"version":1,"keys":[{"name":"a","sha256":"` + hex64(1) + `","sha256":"` + hex64(2) + `","grants":[],"created":"2026-12-01T10:00:00Z"}]}`, "sha256"},
	{"duplicate name", `{"version":1,"keys":[` + keyJSONText("a", hex64(1)) + `,` + keyJSONText("a", hex64(2)) + `]}`, `the name "a" appears twice`},
	{"duplicate hash", `{"version":1,"keys":[` + keyJSONText("a", hex64(1)) + `,` + keyJSONText("b", hex64(1)) + `]}`, `has the sha256 of key "a"`},
	{"short hash", `{"version":1,"keys":[` + keyJSONText("a", "abcd") + `]}`, "64 hex digits"},
	{"not hex", `{"version":1,"keys":[` + keyJSONText("a", strings.Repeat("zz", 32)) + `]}`, "64 hex digits"},
	{"bad name", `{"version":1,"keys":[` + keyJSONText("a b", hex64(1)) + `]}`, "1 to 64 characters"},
	{"bad grant", `{"version":1,"keys":[{"name":"a","sha256":"` + hex64(1) + `","grants":["a,b"],"created":"2026-12-01T10:00:00Z"}]}`, "no comma"},
	{"no created", `{"version":1,"keys":[{"name":"a","sha256":"` + hex64(1) + `","grants":[]}]}`, `"created" is missing`},
	{"bad time", `{"version":1,"keys":[{"name":"a","sha256":"` + hex64(1) + `","grants":[],"created":"yesterday"}]}`, "RFC 3339"},
	{"wrong type", `{"version":"1","keys":[]}`, "version"},
	{"invalid UTF-8", "{\"version\":1,\"keys\":[{\"name\":\"a\xff\"}]}", "UTF-8"},
	{"too large", `{"version":1,"keys":[]}` + strings.Repeat(" ", MaxFileSize), "larger than"},
}

func hex64(i byte) string {
	sum := sha256.Sum256([]byte{i})
	return hex.EncodeToString(sum[:])
}

func keyJSONText(name, sum string) string {
	return `{"name":"` + name + `","sha256":"` + sum + `","grants":["echo"],"created":"2026-12-01T10:00:00Z"}`
}

func TestCorruptFile(t *testing.T) {
	for _, c := range corruptCases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(path, []byte(c.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v; want an error naming %s and saying %q", err, path, c.want)
			}
		})
	}
}

// TestFileTurnsCorrupt: a running ring refuses every key while its file is
// unreadable, logs why once, and takes keys again once it is mended; Add
// does not overwrite a file it cannot read.
func TestFileTurnsCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	var logs bytes.Buffer
	r := openT(t, path, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	secret := addT(t, r, "a", nil, 0)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"version":1,"keys":[`), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, _, err := r.VerifyKey(secret)
		wantErr(t, "corrupt file", err, ErrUnreadable, secret)
		if strings.Contains(err.Error(), path) {
			t.Errorf("the caller is told the file's path: %v", err)
		}
	}
	if n := strings.Count(logs.String(), "unreadable"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), path) {
		t.Errorf("the log does not name the file:\n%s", logs.String())
	}
	if n := r.ActiveKeys(); n != 0 {
		t.Errorf("ActiveKeys = %d while unreadable", n)
	}
	if _, err := r.List(); err == nil {
		t.Error("List of an unreadable file: no error")
	}
	if _, _, err := r.Add("b", nil, 0); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Add over an unreadable file: %v", err)
	}
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if name, _, err := r.VerifyKey(secret); err != nil || name != "a" {
		t.Fatalf("after the mend: %q, %v", name, err)
	}
}

func TestFileModeAndContent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "data")
	path := filepath.Join(dir, FileName)
	r := openT(t, path) // no directory yet: an empty ring
	if n := r.ActiveKeys(); n != 0 {
		t.Fatal(n)
	}
	secret := addT(t, r, "ci", []string{"echo"}, time.Hour)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body := secret[len("mcpv2_"):]
	if bytes.Contains(data, []byte(body)) || bytes.Contains(data, []byte(body[:16])) {
		t.Fatalf("the file holds the secret:\n%s", data)
	}
	sum := sha256.Sum256([]byte(secret))
	if !bytes.Contains(data, []byte(`"sha256": "`+hex.EncodeToString(sum[:])+`"`)) {
		t.Fatalf("the file does not hold the secret's SHA-256 in hex:\n%s", data)
	}
	for _, m := range []string{`"version": 1`, `"name": "ci"`, `"grants": [`, `"created": "`, `"expires": "`} {
		if !bytes.Contains(data, []byte(m)) {
			t.Errorf("the file lacks %s:\n%s", m, data)
		}
	}
	if bytes.Contains(data, []byte(`"revoked"`)) {
		t.Errorf("an unrevoked key has a revoked member:\n%s", data)
	}
	if runtime.GOOS == "windows" {
		return
	}
	for p, want := range map[string]os.FileMode{path: 0o600, path + ".lock": 0o600, dir: 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", p, got, want)
		}
	}
	if err := r.Revoke("ci"); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("after a rewrite: mode %o", fi.Mode().Perm())
	}
}

// TestGolden: the file format, byte for byte.
func TestGolden(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	keys := []Key{
		{Name: "ci", Grants: []string{"echo", "summarize"}, Created: at, Expires: at.Add(30 * 24 * time.Hour), sum: sha256.Sum256([]byte("ci"))},
		{Name: "laptop", Created: at, Revoked: at.Add(time.Hour), sum: sha256.Sum256([]byte("laptop"))},
	}
	got, err := encode(keys)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "keys.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encode:\n%s\nwant (%s):\n%s", got, golden, want)
	}
	back, err := parse(golden, want)
	if err != nil {
		t.Fatal(err)
	}
	if !sameKeys(back, keys) {
		t.Fatalf("parse(golden) = %+v\nwant %+v", back, keys)
	}
}

// sameKeys compares keys field by field (times by Equal, nil grants as
// empty).
func sameKeys(a, b []Key) bool {
	return slices.EqualFunc(a, b, func(x, y Key) bool {
		return x.Name == y.Name && x.sum == y.sum && slices.Equal(x.Grants, y.Grants) &&
			x.Created.Equal(y.Created) && x.Expires.Equal(y.Expires) && x.Revoked.Equal(y.Revoked)
	})
}

func TestLooksLikeKey(t *testing.T) {
	s := newSecret()
	if len(s) != 49 || !LooksLikeKey(s) {
		t.Fatalf("newSecret() = %q (%d)", s, len(s))
	}
	for in, want := range map[string]bool{
		"mcpv2_" + strings.Repeat("A", 43):            true,
		"mcpv2_" + strings.Repeat("-_9z", 10) + "abc": true,
		"":                                       false,
		"mcpv2_":                                 false,
		"mcpv2_" + strings.Repeat("A", 42):       false,
		"mcpv2_" + strings.Repeat("A", 44):       false,
		"mcpv2_" + strings.Repeat("A", 42) + "=": false,
		"mcpv2_" + strings.Repeat("A", 42) + "+": false,
		"mcpv3_" + strings.Repeat("A", 43):       false,
		"eyJhbGciOiJFUzI1NiJ9.e30.c2ln":          false,
	} {
		if got := LooksLikeKey(in); got != want {
			t.Errorf("LooksLikeKey(%q) = %v", in, got)
		}
	}
}

func TestParseExpires(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"": 0, "0": 0, "0d": 0, "30d": 30 * 24 * time.Hour, "2w": 14 * 24 * time.Hour,
		"12h": 12 * time.Hour, "90m": 90 * time.Minute, "1h30m": 90 * time.Minute, " 7d ": 7 * 24 * time.Hour,
	} {
		if got, err := ParseExpires(in); err != nil || got != want {
			t.Errorf("ParseExpires(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"-1h": "negative", "soon": "days (30d)", "d": "days (30d)", "1.5d": "days (30d)",
		"36600d": "longer than", "99999999999999999999w": "longer than", "1000000h": "longer than",
	} {
		if _, err := ParseExpires(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseExpires(%q) = %v; want an error saying %q", in, err, want)
		}
	}
}

func TestOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	for _, c := range []struct {
		opt  Option
		name string
	}{{WithClock(nil), "WithClock"}, {WithLogger(nil), "WithLogger"}, {WithLockTimeout(0), "WithLockTimeout"}} {
		if _, err := Open(path, c.opt); err == nil {
			t.Errorf("%s: a bad option was taken", c.name)
		} else if !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: error %q does not name the option", c.name, err)
		}
	}
	if _, err := Open(""); err == nil {
		t.Error("Open(\"\"): no error")
	}
}
