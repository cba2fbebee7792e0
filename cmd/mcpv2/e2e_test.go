package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"go.uber.org/goleak"
)

// These tests run the real mcpv2 binary as separate processes on loopback.

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpv2-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "mcpv2")
	args := []string{"build", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build mcpv2: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		// Every test waits for the processes it started and their readers.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// proc is a running `mcpv2 node` (testenv.Proc) and what its banner said.
type proc struct {
	*testenv.Proc
	peerID  string
	addrs   []string
	dataDir string
}

// wait waits up to d for the process to exit and returns its Wait error.
func (p *proc) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.Exited:
		return p.ExitErr
	case <-time.After(d):
		t.Fatalf("node did not exit within %s", d)
		return nil
	}
}

// tcpAddr returns the node's loopback TCP multiaddr.
func (p *proc) tcpAddr(t *testing.T) string {
	for _, a := range p.addrs {
		if strings.Contains(a, "/tcp/") {
			return a
		}
	}
	t.Fatalf("no tcp address in %v", p.addrs)
	return ""
}

// startNode runs `mcpv2 node` with args in dataDir (a new one if empty) and
// waits for its banner.
func startNode(t *testing.T, dataDir string, args ...string) *proc {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	all := append([]string{"node", "--data-dir", dataDir, "--listen", "/ip4/127.0.0.1/tcp/0", "--listen", "/ip4/127.0.0.1/udp/0/quic-v1"}, args...)
	return startProc(t, binPath, dataDir, all...)
}

// startProc runs `bin argv…` (a node of dataDir) with testenv.StartProc,
// which waits for its banner and stops it when the test ends.
func startProc(t *testing.T, bin, dataDir string, argv ...string) *proc {
	t.Helper()
	tp := testenv.StartProc(t, append([]string{bin}, argv...)...)
	return &proc{Proc: tp, peerID: tp.First("MCPV2_PEER_ID"), addrs: tp.Banner["MCPV2_P2P_ADDRESS"], dataDir: dataDir}
}

// lockedWriter serializes writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// run runs the mcpv2 CLI and returns stdout, stderr and the exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return testenv.Run(t, binPath, args...)
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// peerIDOf returns the PeerID of the identity in dataDir (creating it).
func peerIDOf(t *testing.T, dataDir string) string {
	out, errs, code := run(t, "id", "--data-dir", dataDir)
	if code != 0 {
		t.Fatalf("id: %s", errs)
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "MCPV2_PEER_ID="); ok {
			return v
		}
	}
	t.Fatalf("id printed no MCPV2_PEER_ID: %q", out)
	return ""
}

// TestTwoNodesAndAThirdCaller: two `mcpv2 node` processes on loopback; a
// third process calls B's skills.
func TestTwoNodesAndAThirdCaller(t *testing.T) {
	a := startNode(t, "")
	client := t.TempDir()
	clientID := peerIDOf(t, client)
	bDir := t.TempDir()
	writeFile(t, filepath.Join(bDir, "policy.json"), fmt.Sprintf(`{"grants":{%q:["*"]}}`, clientID))
	b := startNode(t, bDir, "--name", "bob")
	if a.peerID == "" || a.peerID == b.peerID {
		t.Fatalf("peer ids %q %q", a.peerID, b.peerID)
	}
	baddr := b.tcpAddr(t)

	out, errs, code := run(t, "call", baddr, "ping", "--data-dir", client)
	if code != 0 || !strings.HasPrefix(out, `{"pong":true,`) || !strings.Contains(out, b.peerID) {
		t.Fatalf("call ping: code %d, out %q, err %q", code, out, errs)
	}
	// QUIC too.
	for _, addr := range b.addrs {
		if strings.Contains(addr, "quic-v1") {
			if out, errs, code := run(t, "call", addr, "ping", `{"payload":"q"}`, "--data-dir", client); code != 0 || !strings.Contains(out, `"payload":"q"`) {
				t.Fatalf("call over quic: %q %q", out, errs)
			}
		}
	}
	out, errs, code = run(t, "tools", baddr, "--data-dir", client)
	if code != 0 {
		t.Fatalf("tools: %s", errs)
	}
	var tl struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(out), &tl); err != nil || len(tl.Tools) != len(edgeStandardSkills) {
		t.Fatalf("tools: %v, %q", err, out)
	}
	for _, tool := range tl.Tools {
		var schema struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema.Type != "object" {
			t.Errorf("%s: schema %s", tool.Name, tool.InputSchema)
		}
	}
	out, errs, code = run(t, "card", baddr, "--data-dir", client)
	if code != 0 || !strings.Contains(out, `"name": "bob"`) {
		t.Fatalf("card: %q %q", out, errs)
	}
	out, errs, code = run(t, "ping", baddr, "--count", "3", "--interval", "10ms", "--data-dir", client)
	if code != 0 || strings.Count(out, "pong from "+b.peerID) != 3 || !strings.Contains(out, "min/avg/max") {
		t.Fatalf("ping: %q %q", out, errs)
	}
	out, _, code = run(t, "call", baddr, "ask", `{"query":"hello there"}`, "--data-dir", client)
	if code != 0 || !strings.Contains(out, `"provider":"local"`) {
		t.Fatalf("ask: %q", out)
	}
	// A peer that B does not grant: a clear error and a non-zero exit.
	_, errs, code = run(t, "call", baddr, "ask", `{"query":"hi"}`, "--data-dir", t.TempDir())
	if code == 0 || !strings.Contains(errs, "-32009") {
		t.Fatalf("ungranted: code %d, stderr %q", code, errs)
	}
	// Bad input to the CLI itself.
	if _, errs, code := run(t, "call", "not-an-address", "ping", "--data-dir", client); code == 0 || !strings.Contains(errs, "malformed address") {
		t.Fatalf("bad address: %d %q", code, errs)
	}
	if _, errs, code := run(t, "call", baddr, "ping", "{oops", "--data-dir", client); code == 0 || !strings.Contains(errs, "not valid JSON") {
		t.Fatalf("bad args: %d %q", code, errs)
	}
	// A shared secret grants every skill without a policy.
	s1 := startNode(t, "", "--secret", "s3cret")
	if out, errs, code := run(t, "call", s1.tcpAddr(t), "list_files", "--secret", "s3cret", "--data-dir", t.TempDir()); code != 0 || !strings.Contains(out, `"files":[]`) {
		t.Fatalf("secret: %q %q", out, errs)
	}
	// SIGTERM: a clean exit.
	_ = a.Cmd.Process.Signal(syscall.SIGTERM)
	if err := a.wait(t, 15*time.Second); err != nil {
		t.Fatalf("node exit after SIGTERM: %v\n%s", err, a.Log)
	}
}

// TestKillMidUploadLeavesNoPartialFile kills the receiving node with SIGKILL
// while 16 MiB uploads are in flight, at several moments; after a restart the
// file is either absent or complete, and no temp file is left.
func TestKillMidUploadLeavesNoPartialFile(t *testing.T) {
	client := t.TempDir()
	clientID := peerIDOf(t, client)
	bDir := t.TempDir()
	writeFile(t, filepath.Join(bDir, "policy.json"), fmt.Sprintf(`{"grants":{%q:["*"]}}`, clientID))
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	sum := sha256.Sum256(data)
	argsFile := writeFile(t, filepath.Join(t.TempDir(), "args.json"),
		fmt.Sprintf(`{"filename":"big.bin","encoding":"base64","content":%q}`, base64.StdEncoding.EncodeToString(data)))
	for i, delay := range []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond} {
		b := startNode(t, bDir, "--max-message", fmt.Sprint(32<<20))
		cmd := exec.Command(binPath, "call", b.tcpAddr(t), "upload_file", "@"+argsFile, "--data-dir", client, "--max-message", fmt.Sprint(32<<20))
		cmd.Env = testenv.CleanEnv()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		_ = b.Cmd.Process.Kill()
		_ = b.wait(t, 10*time.Second)
		_ = cmd.Wait()
		b2 := startNode(t, bDir) // a restart cleans up stale temp files
		entries, err := os.ReadDir(filepath.Join(bDir, "files"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != "big.bin" {
				t.Fatalf("round %d: leftover %q after restart", i, e.Name())
			}
			got, _ := os.ReadFile(filepath.Join(bDir, "files", "big.bin"))
			if sha256.Sum256(got) != sum {
				t.Fatalf("round %d: partial file visible: %d of %d bytes", i, len(got), len(data))
			}
			_ = os.Remove(filepath.Join(bDir, "files", "big.bin"))
		}
		_ = b2.Cmd.Process.Kill()
		_ = b2.wait(t, 10*time.Second)
	}
}

// TestSendViaEdge: `mcpv2 send` to an HTTP edge address uploads with
// upload_file; a file too large for one request is refused with advice.
func TestSendViaEdge(t *testing.T) {
	port := testenv.FreePort(t)
	b := startNode(t, "", "--port", fmt.Sprint(port), "--public-ip", "127.0.0.1", "--port-fallback", "--no-mesh", "--secret", "edge-s")
	data := bytes.Repeat([]byte("edge upload\n"), 10000)
	file := writeFile(t, filepath.Join(t.TempDir(), "notes.txt"), string(data))
	edgeAddr := fmt.Sprintf("mcpv2://127.0.0.1:%d/mcpv2", port)
	// Without the secret the sender is an anonymous session: refused.
	if _, errs, code := run(t, "send", file, edgeAddr); code == 0 || !strings.Contains(errs, "-32009") {
		t.Fatalf("send via edge without the secret: %d %q", code, errs)
	}
	out, errs, code := run(t, "send", file, edgeAddr, "--secret", "edge-s")
	sum := sha256.Sum256(data)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%x", sum)) {
		t.Fatalf("send via edge: %d %q %q", code, out, errs)
	}
	got, err := os.ReadFile(filepath.Join(b.dataDir, "files", "notes.txt"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("stored file differs: %v", err)
	}
	big := writeFile(t, filepath.Join(t.TempDir(), "big.bin"), strings.Repeat("x", 7<<20))
	if _, errs, code := run(t, "send", big, edgeAddr, "--secret", "edge-s"); code == 0 || !strings.Contains(errs, "mesh (blob protocol)") {
		t.Fatalf("oversized send via edge: %d %q", code, errs)
	}
}
