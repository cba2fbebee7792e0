package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// blake3File returns the hex BLAKE3-256 of the file at path: what send
// prints of a file sent over blob 1.2.0.
func blake3File(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := blake3.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// bigFile writes size pseudo-random bytes to a temp file and returns its
// path and hex sha256.
func bigFile(t *testing.T, size int64, seed byte) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "big.bin")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.NewChaCha8([32]byte{seed}), size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, hex.EncodeToString(h.Sum(nil))
}

// addrOfKind returns the node's first address containing kind.
func (p *proc) addrOfKind(t *testing.T, kind string) string {
	t.Helper()
	for _, a := range p.addrs {
		if strings.Contains(a, kind) {
			return a
		}
	}
	t.Fatalf("no %s address in %v", kind, p.addrs)
	return ""
}

type sendResult struct {
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256,omitempty"`
	BLAKE3   string `json:"blake3,omitempty"`
}

// receiver starts a node that grants upload_file to the identity in client.
func receiver(t *testing.T, client string) *proc {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "policy.json"), fmt.Sprintf(`{"grants":{%q:["upload_file","list_files"]}}`, peerIDOf(t, client)))
	return startNode(t, dir)
}

// filesOf lists a node's files dir behind its back: visible names and
// hidden partial uploads.
func filesOf(t *testing.T, p *proc) (visible, parts []string) {
	t.Helper()
	return filesIn(t, p.dataDir)
}

// filesIn lists the files dir of the node with data dir dataDir.
func filesIn(t *testing.T, dataDir string) (visible, parts []string) {
	t.Helper()
	return testenv.FilesIn(t, dataDir)
}

func TestSend64MiB(t *testing.T) {
	client := t.TempDir()
	b := receiver(t, client)
	path, sum := bigFile(t, 64<<20, 1)
	out, errs, code := run(t, "send", path, b.tcpAddr(t), "--data-dir", client)
	if code != 0 {
		t.Fatalf("send: exit %d\n%s", code, errs)
	}
	var r sendResult
	if err := json.Unmarshal([]byte(out), &r); err != nil || r != (sendResult{Filename: "big.bin", Size: 64 << 20, BLAKE3: blake3File(t, path)}) {
		t.Fatalf("send printed %q (%v), want big.bin, %d bytes, blake3 %s", out, err, 64<<20, blake3File(t, path))
	}
	if !strings.Contains(errs, "sending 67108864 bytes") || !strings.Contains(errs, "stored") {
		t.Fatalf("progress on stderr: %q", errs)
	}
	got, err := os.ReadFile(filepath.Join(b.dataDir, "files", "big.bin"))
	if err != nil || fmt.Sprintf("%x", sha256.Sum256(got)) != sum {
		t.Fatalf("stored file: %d bytes, %v", len(got), err)
	}
	// --name and list_files agree.
	if out, errs, code := run(t, "send", path, b.addrOfKind(t, "quic-v1"), "--name", "copy.bin", "--quiet", "--data-dir", client); code != 0 || !strings.Contains(out, `"filename":"copy.bin"`) || errs != "" {
		t.Fatalf("send --name over quic: %d %q %q", code, out, errs)
	}
	out, _, _ = run(t, "call", b.tcpAddr(t), "list_files", "--data-dir", client)
	if strings.Count(out, sum) != 2 {
		t.Fatalf("list_files: %s", out)
	}
}

var resumingRE = regexp.MustCompile(`resuming at (\d+) of 67108864 bytes`)

// TestSendKilledMidTransferResumes kills a real `mcpv2 send` with SIGKILL in
// the middle of a 64 MiB transfer: nothing is visible on the receiver, and
// the next send resumes from the receiver's offset and the hash matches.
// Over TCP the receiver sees the connection die; over QUIC it does not (a
// killed process sends nothing), and the resumed transfer takes over.
func TestSendKilledMidTransferResumes(t *testing.T) {
	const size = 64 << 20
	path, sum := bigFile(t, size, 2)
	for _, kind := range []string{"/tcp/", "/quic-v1"} {
		t.Run(strings.Trim(kind, "/"), func(t *testing.T) {
			client := t.TempDir()
			b := receiver(t, client)
			addr := b.addrOfKind(t, kind)

			sent := killedSend(t, path, addr, client, "16M", 8<<20)
			t.Logf("killed after %d bytes sent", sent)

			// Nothing visible: not by list_files, not in the directory.
			out, errs, code := run(t, "call", b.tcpAddr(t), "list_files", "--data-dir", client)
			if code != 0 || !strings.Contains(out, `"files":[]`) {
				t.Fatalf("list_files after the kill: %d %q %q", code, out, errs)
			}
			if visible, parts := filesOf(t, b); len(visible) != 0 || len(parts) != 1 {
				t.Fatalf("after the kill: visible %v, partial uploads %v", visible, parts)
			}

			start := time.Now()
			out, errs, code = run(t, "send", path, addr, "--data-dir", client)
			if code != 0 {
				t.Fatalf("resumed send: exit %d\n%s", code, errs)
			}
			m := resumingRE.FindStringSubmatch(errs)
			if m == nil {
				t.Fatalf("the second send did not resume: %q", errs)
			}
			// The sender wrote on for a moment after the line was read.
			if off, _ := strconv.ParseInt(m[1], 10, 64); off <= 0 || off >= size {
				t.Fatalf("resumed at %d after %d bytes were sent", off, sent)
			}
			t.Logf("%s in %v", m[0], time.Since(start))
			var r sendResult
			if err := json.Unmarshal([]byte(out), &r); err != nil || r.BLAKE3 != blake3File(t, path) || r.Size != size {
				t.Fatalf("resumed send printed %q", out)
			}
			got, err := os.ReadFile(filepath.Join(b.dataDir, "files", "big.bin"))
			if err != nil || fmt.Sprintf("%x", sha256.Sum256(got)) != sum {
				t.Fatalf("stored file after resume: %d bytes, %v", len(got), err)
			}
			if _, parts := filesOf(t, b); len(parts) != 0 {
				t.Fatalf("partial uploads left: %v", parts)
			}
		})
	}
}

// TestSendOverAnotherVersion kills a real `mcpv2 send` of one file, then
// sends another file of the same name and size: the receiver's kept bytes
// are not its start, so the second send says so, starts over instead of
// appending, and the receiver stores the second file.
func TestSendOverAnotherVersion(t *testing.T) {
	const size = 16 << 20
	client := t.TempDir()
	b := receiver(t, client)
	addr := b.tcpAddr(t)
	first, _ := bigFile(t, size, 4)
	second, sum := bigFile(t, size, 5) // also big.bin
	sent := killedSend(t, first, addr, client, "8M", 2<<20)
	if _, parts := filesOf(t, b); len(parts) != 1 {
		t.Fatalf("after killing the first send (%d bytes sent): partial uploads %v", sent, parts)
	}
	out, errs, code := run(t, "send", second, addr, "--data-dir", client)
	if code != 0 {
		t.Fatalf("second send: exit %d\n%s", code, errs)
	}
	if !strings.Contains(errs, "are not the start of this file") || !strings.Contains(errs, "starting over") ||
		!strings.Contains(errs, "sending 16777216 bytes (attempt 1)") || strings.Contains(errs, "resuming") {
		t.Fatalf("second send's progress: %q", errs)
	}
	var r sendResult
	if err := json.Unmarshal([]byte(out), &r); err != nil || r != (sendResult{Filename: "big.bin", Size: size, BLAKE3: blake3File(t, second)}) {
		t.Fatalf("second send printed %q", out)
	}
	got, err := os.ReadFile(filepath.Join(b.dataDir, "files", "big.bin"))
	if err != nil || fmt.Sprintf("%x", sha256.Sum256(got)) != sum {
		t.Fatalf("stored file: %d bytes, %v", len(got), err)
	}
	if _, parts := filesOf(t, b); len(parts) != 0 {
		t.Fatalf("partial uploads left: %v", parts)
	}
}

func TestSendFailsClearly(t *testing.T) {
	client := t.TempDir()
	b := receiver(t, client)
	path, _ := bigFile(t, 1<<20, 3)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"send", path}, "usage: mcpv2 send FILE ADDR"},
		{[]string{"send", path, "http://127.0.0.1:" + fmt.Sprint(testenv.FreePort(t))}, "unreachable"},
		{[]string{"send", path, "not-an-address"}, "malformed address"},
		{[]string{"send", filepath.Join(t.TempDir(), "missing"), b.tcpAddr(t)}, "no such file"},
		{[]string{"send", path, b.tcpAddr(t), "--name", "../escape"}, "invalid file name"},
		{[]string{"send", path, b.tcpAddr(t), "--limit-rate", "fast"}, "--limit-rate"},
		// Not granted: the receiver's refusal, with its code.
		{[]string{"send", path, b.tcpAddr(t), "--data-dir", t.TempDir()}, "error -32009"},
	} {
		args := c.args
		if !strings.Contains(strings.Join(args, " "), "--data-dir") {
			args = append(args, "--data-dir", client)
		}
		out, errs, code := run(t, args...)
		if code == 0 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a failure saying %q", c.args[1:], code, out, errs, c.want)
		}
	}
	// Over the receiver's size cap: refused before any byte, nothing left.
	small := startNode(t, "", "--max-file", "1000", "--secret", "s")
	if _, errs, code := run(t, "send", path, small.tcpAddr(t), "--secret", "s", "--data-dir", client); code == 0 || !strings.Contains(errs, "error -32602") || !strings.Contains(errs, "1000-byte file limit") {
		t.Fatalf("over the cap: %d %q", code, errs)
	}
	if visible, parts := filesOf(t, small); len(visible)+len(parts) != 0 {
		t.Fatalf("refused send left %v %v", visible, parts)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"1000": 1000, "16M": 16 << 20, "16MiB": 16 << 20, "500k": 500 << 10, "1.5G/s": 1.5 * (1 << 30), "2KB": 2048} {
		if got, err := parseRate(in); err != nil || got != want {
			t.Errorf("parseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "0", "-1M", "NaN", "Inf", "0.5"} {
		if _, err := parseRate(in); err == nil {
			t.Errorf("parseRate(%q) accepted", in)
		}
	}
}

// TestSendSHA256: --sha256 verifies by SHA-256 (blob 1.1.0) and prints the
// file's sha256, for scripts that read it; without it send prints blake3.
func TestSendSHA256(t *testing.T) {
	client := t.TempDir()
	b := receiver(t, client)
	path, sum := bigFile(t, 1<<20, 6)
	out, errs, code := run(t, "send", path, b.tcpAddr(t), "--data-dir", client, "--sha256", "--quiet")
	if code != 0 {
		t.Fatalf("send --sha256: exit %d\n%s", code, errs)
	}
	var r sendResult
	if err := json.Unmarshal([]byte(out), &r); err != nil || r != (sendResult{Filename: "big.bin", Size: 1 << 20, SHA256: sum}) {
		t.Fatalf("send --sha256 printed %q, want big.bin's sha256 %s", out, sum)
	}
}
