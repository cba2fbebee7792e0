//go:build unix

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// These tests drive `mcpv2 shell` through its standard input as a person
// would: write a line, wait for the output up to the next prompt, read it.

const (
	startTimeout = 150 * time.Second // ReadyTo under -race on a loaded machine
	cmdTimeout   = 60 * time.Second
)

// shellProc is a running `mcpv2 shell`.
type shellProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer // guarded by mu

	mu     sync.Mutex
	out    []byte // all of stdout so far
	cursor int    // where the next command's output begins
	notify chan struct{}

	// exited is closed once stdout is drained and the process waited for;
	// exitErr is then its Wait error.
	exited  chan struct{}
	exitErr error
	pids    []int // children, from "Starting a peer (pid N"
}

// startShell runs `mcpv2 shell args…` with env and waits for its first
// prompt.
func startShell(t *testing.T, env []string, args ...string) *shellProc {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"shell"}, args...)...)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	sp := &shellProc{t: t, cmd: cmd, stdin: stdin, stderr: &bytes.Buffer{}, notify: make(chan struct{}, 1), exited: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &sp.mu, w: sp.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := stdout.Read(buf)
			if n > 0 {
				sp.mu.Lock()
				sp.out = append(sp.out, buf[:n]...)
				sp.mu.Unlock()
				select {
				case sp.notify <- struct{}{}:
				default:
				}
			}
			if err != nil {
				break
			}
		}
		sp.exitErr = cmd.Wait()
		close(sp.exited)
	}()
	t.Cleanup(func() {
		_ = sp.stdin.Close() // end of input: the shell stops its peers
		select {
		case <-sp.exited:
		case <-time.After(cmdTimeout):
			_ = cmd.Process.Kill()
			<-sp.exited
		}
		for _, pid := range sp.pids { // a safety net for a failed test
			if alive(pid) {
				t.Errorf("peer pid %d outlived its shell", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	sp.next(cmdTimeout)
	return sp
}

// next returns the output from the cursor up to the next prompt, and moves
// the cursor past that prompt.
func (sp *shellProc) next(timeout time.Duration) string {
	sp.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		sp.mu.Lock()
		rest := string(sp.out[sp.cursor:])
		if i := strings.Index(rest, shellPrompt); i >= 0 {
			sp.cursor += i + len(shellPrompt)
			sp.mu.Unlock()
			return rest[:i]
		}
		sp.mu.Unlock()
		select {
		case <-sp.notify:
		case <-sp.exited:
			sp.t.Fatalf("the shell exited (%v) while a prompt was awaited; output:\n%s\nstderr:\n%s", sp.exitErr, rest, sp.stderrText())
		case <-deadline.C:
			sp.t.Fatalf("no prompt within %s; output so far:\n%s\nstderr:\n%s", timeout, rest, sp.stderrText())
		}
	}
}

func (sp *shellProc) stderrText() string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.stderr.String()
}

// do types line and returns what the shell printed for it.
func (sp *shellProc) do(line string, timeout time.Duration) string {
	sp.t.Helper()
	if _, err := io.WriteString(sp.stdin, line+"\n"); err != nil {
		sp.t.Fatalf("write %q: %v", line, err)
	}
	out := sp.next(timeout)
	sp.t.Logf("mcpv2> %s\n%s", line, out)
	if m := regexp.MustCompile(`Starting a peer \(pid (\d+)`).FindStringSubmatch(out); m != nil {
		pid, _ := strconv.Atoi(m[1])
		sp.pids = append(sp.pids, pid)
	}
	return out
}

// expect runs line and fails unless the output has every one of want.
func (sp *shellProc) expect(line string, want ...string) string {
	sp.t.Helper()
	out := sp.do(line, cmdTimeout)
	for _, w := range want {
		if !strings.Contains(out, w) {
			sp.t.Fatalf("%s: output lacks %q:\n%s", line, w, out)
		}
	}
	return out
}

// finish types line ("exit"), closes stdin when line is "EOF", or does
// neither when line is empty, and returns the rest of the output once the
// shell has exited.
func (sp *shellProc) finish(line string) string {
	sp.t.Helper()
	switch line {
	case "":
	case "EOF":
		_ = sp.stdin.Close()
	default:
		if _, err := io.WriteString(sp.stdin, line+"\n"); err != nil {
			sp.t.Fatal(err)
		}
	}
	select {
	case <-sp.exited:
	case <-time.After(cmdTimeout):
		sp.t.Fatalf("the shell did not exit within %s", cmdTimeout)
	}
	if sp.exitErr != nil {
		sp.t.Fatalf("the shell exited with %v; stderr:\n%s", sp.exitErr, sp.stderrText())
	}
	if s := sp.stderrText(); strings.Contains(s, "DATA RACE") {
		sp.t.Fatalf("race in the shell:\n%s", s)
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return string(sp.out[sp.cursor:])
}

// startedPeer is what ReadyTo printed about a peer.
type startedPeer struct {
	port    int
	address string // shareable
	demo    string // same host, with a session
	mesh    string
	peerID  string
	pid     int
	dataDir string
	logPath string
}

var (
	rePeerReady = regexp.MustCompile(`Peer ready: (mcpv2://127\.0\.0\.1:(\d+)/mcpv2)\n`)
	reSameHost  = regexp.MustCompile(`same host: (\S+)`)
	reMesh      = regexp.MustCompile(`mesh: +(\S+)`)
	rePeerID    = regexp.MustCompile(`peer id: +(\S+)`)
	rePid       = regexp.MustCompile(`pid (\d+), [^,]+, data dir (\S+)`)
	reLog       = regexp.MustCompile(`log: (\S+)`)
)

// readyTo runs a ReadyTo line and parses what it printed.
func (sp *shellProc) readyTo(line string) startedPeer {
	sp.t.Helper()
	out := sp.do(line, startTimeout)
	m := rePeerReady.FindStringSubmatch(out)
	sh, mesh, id, pid, lg := reSameHost.FindStringSubmatch(out), reMesh.FindStringSubmatch(out), rePeerID.FindStringSubmatch(out), rePid.FindStringSubmatch(out), reLog.FindStringSubmatch(out)
	if m == nil || sh == nil || mesh == nil || id == nil || pid == nil || lg == nil {
		sp.t.Fatalf("%s: no complete ready message:\n%s", line, out)
	}
	p := startedPeer{address: m[1], demo: sh[1], mesh: mesh[1], peerID: id[1], dataDir: pid[2], logPath: lg[1]}
	p.port, _ = strconv.Atoi(m[2])
	p.pid, _ = strconv.Atoi(pid[1])
	if !alive(p.pid) {
		sp.t.Fatalf("%s: pid %d is not running", line, p.pid)
	}
	// The banner was read from the log file, which holds all of the
	// peer's output.
	if b, err := os.ReadFile(p.logPath); err != nil || !bytes.Contains(b, []byte("MCPV2_PEER_ID="+p.peerID)) {
		sp.t.Fatalf("log %s: %v, no banner", p.logPath, err)
	}
	return p
}

// alive reports whether the process pid exists (the shell reaps its
// children, so an exited one leaves no zombie).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// portFree fails the test unless 127.0.0.1:port can be bound.
func portFree(t *testing.T, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("port %d is not free: %v", port, err)
	}
	ln.Close()
}

// shellEnv is the environment of a test shell: loopback-only mesh, no
// mDNS, no NAT traversal; the peers it starts inherit it.
func shellEnv() []string {
	return append(testenv.CleanEnv(), "MCPV2_LISTEN=/ip4/127.0.0.1/tcp/0", "MCPV2_NO_MDNS=1", "MCPV2_NO_NAT=1", "MCPV2_LOG_LEVEL=warn")
}

// fakeEdge is an HTTP server that answers health like an mcpv2 edge and
// the rest as given.
func fakeEdge(t *testing.T, session, call http.HandlerFunc) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mcpv2/health", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"status":"ok","version":"fake","peer_id":"fake-peer"}`)
	})
	mux.HandleFunc("GET /mcpv2/session", session)
	if call != nil {
		mux.HandleFunc("POST /mcpv2", call)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return "mcpv2://" + strings.TrimPrefix(srv.URL, "http://") + "/mcpv2"
}

func TestShellDrivenLikeAPerson(t *testing.T) {
	dir := t.TempDir()
	const secret = "shell-secret"
	// The default port is taken, so that ReadyTo without --port must fall
	// back to a later one.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	busyPort := busy.Addr().(*net.TCPAddr).Port
	sp := startShell(t, shellEnv(), "--data-dir", dir, "--secret", secret, "--default-port", strconv.Itoa(busyPort))

	sp.expect("help", "ReadyTo [--port N]", "StopTo <port|address>", "StopPeer", "ConnectTo <port|address>", "SentTo", "SendTo", "PayTo <amount> <port|address>", "PingTo <port|address>", "exit")
	sp.expect("Frobnicate now", `unknown command "Frobnicate": type help`)
	sp.expect(`SentTo "no end`, `unterminated " quote`)

	// ReadyTo: one peer on the default port (busy, so the next free one),
	// one on an explicit port in LLM mode with a secret of its own.
	a := sp.readyTo("ReadyTo --public-ip 127.0.0.1")
	busy.Close()
	if a.port <= busyPort || a.port > busyPort+100 {
		t.Fatalf("peer A took port %d; the default %d was busy", a.port, busyPort)
	}
	explicit := testenv.FreePort(t)
	b := sp.readyTo(fmt.Sprintf("readyto --port %d --public-ip 127.0.0.1 --llm-mode --secret other-secret", explicit))
	if b.port != explicit {
		t.Fatalf("peer B took port %d, asked for %d", b.port, explicit)
	}
	// An explicit port is strict: busy means a clear failure.
	sp.expect(fmt.Sprintf("ReadyTo --port %d --public-ip 127.0.0.1", explicit), "ReadyTo: the peer exited before it was ready: ", fmt.Sprintf("port %d", explicit))
	sp.expect("Peers", fmt.Sprintf("port %d", a.port), fmt.Sprintf("port %d", b.port), "running")

	// PingTo: edge and mesh addresses, and the PeerID alone of a peer
	// this shell started.
	sp.expect("PingTo "+a.address, "pong from "+a.peerID+" in ")
	sp.expect("pingto "+b.mesh, "pong from "+b.peerID+" in ")
	sp.expect("PingTo mcpv2://"+b.peerID, "pong from "+b.peerID+" in ")

	// SentTo a prompt: quoted words arrive as one prompt.
	sp.expect(`SentTo "a quoted multi-word prompt" `+a.address, `You said "a quoted multi-word prompt" (4 words`, "(local/")
	sp.expect(`SendTo 'it is "quoted" twice' `+b.address+" --provider claude", `You said "it is "quoted" twice"`, "turn 1 of conversation")
	sp.expect(`SentTo "and this is the second turn" `+b.address, "turn 2 of conversation")
	sp.expect(`SentTo "hello over the mesh" `+b.mesh, `You said "hello over the mesh"`)
	sp.expect(`SentTo "hello" `+a.address+" --provider bogus", "call refused by", "error -32010")
	sp.expect(`SentTo three loose words `+a.address, "put a prompt of several words in quotes")

	// SentTo a file: text to the edge, binary over the mesh.
	text := []byte("# Notes\n\nThe shell sends files too. é\n")
	notes := writeFile(t, filepath.Join(t.TempDir(), "notes.md"), string(text))
	sum := sha256.Sum256(text)
	sp.expect("SentTo "+notes+" "+a.address, "stored as notes.md, "+strconv.Itoa(len(text))+" bytes, sha256 "+hex.EncodeToString(sum[:]), "(matches the local file)")
	if got, err := os.ReadFile(filepath.Join(a.dataDir, "files", "notes.md")); err != nil || !bytes.Equal(got, text) {
		t.Fatalf("the peer stored %q, %v", got, err)
	}
	bin := []byte{0xff, 0xfe, 0, 1, 2, 0x80}
	blob := writeFile(t, filepath.Join(t.TempDir(), "data.bin"), string(bin))
	sp.expect("SendTo "+blob+" "+b.mesh, "stored as data.bin, 6 bytes", "(matches the local file)")
	if got, _ := os.ReadFile(filepath.Join(b.dataDir, "files", "data.bin")); !bytes.Equal(got, bin) {
		t.Fatalf("the peer stored %x", got)
	}

	// PayTo.
	sp.expect("PayTo 2.5 "+a.address, "Payment of 2.5 USD to "+a.address+": pending, transaction tx", "nothing moved")
	sp.expect("PayTo 1 "+b.mesh+" --currency EUR --memo 'for the shell'", "Payment of 1 EUR", "pending")
	sp.expect("PayTo nothing "+a.address, "the amount must be a positive number")

	// ConnectTo: a good address, the same-host one with its session, a
	// mesh address.
	out := sp.expect("ConnectTo "+a.address, "Reachable: "+a.address+" is an mcpv2 edge (peer "+a.peerID, "Connected: session accepted, authenticated ping")
	if strings.Contains(out, "Stale") {
		t.Fatalf("a fresh connection reported a stale session:\n%s", out)
	}
	sp.expect("ConnectTo "+a.demo, "Connected: session accepted")
	sp.expect("ConnectTo "+b.mesh, "Connected over the mesh to "+b.peerID+" via /ip4/127.0.0.1/tcp/")
	// Stale sessions: one expired, one issued under another secret (A's
	// session on B); each recovers with a fresh session and says so.
	expired := protocol.EncodeToken([]byte(secret), protocol.Token{Subject: "127.0.0.1", Nonce: "00112233445566778899aabbccddeeff", IssuedAt: time.Now().Add(-2 * time.Hour).Unix(), TTL: 60})
	sp.expect(fmt.Sprintf("ConnectTo 'mcpv2://127.0.0.1:%d/mcpv2?sessionId=%s'", a.port, expired), "Stale session: the peer refused the sessionId in the address", "Connected: session accepted")
	demoA, err := protocol.ParseAddress(a.demo)
	if err != nil {
		t.Fatal(err)
	}
	sp.expect(fmt.Sprintf("ConnectTo mcpv2://127.0.0.1:%d/mcpv2?sessionId=%s", b.port, demoA.SessionID), "Stale session:", "Connected: session accepted")
	sp.expect(fmt.Sprintf("PingTo mcpv2://127.0.0.1:%d/mcpv2?sessionId=%s", b.port, demoA.SessionID), "note: the peer refused the session", "pong from "+b.peerID)

	// ConnectTo failures, each with its own message.
	nothing := testenv.FreePort(t)
	start := time.Now()
	sp.expect(fmt.Sprintf("ConnectTo mcpv2://127.0.0.1:%d/mcpv2", nothing), fmt.Sprintf("unreachable: nothing answers at 127.0.0.1:%d: connection refused", nothing))
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("ConnectTo to nothing took %s", d)
	}
	sp.expect("ConnectTo mcpv2://nohost", "malformed address")
	nobody := peerIDOf(t, t.TempDir()) // a PeerID that no process runs
	sp.expect("ConnectTo /ip4/127.0.0.1/tcp/1/p2p/"+nobody, "unreachable: cannot connect to "+nobody+" over the mesh")
	nowhere := peerIDOf(t, t.TempDir()) // and one with no address at all
	sp.expect("ConnectTo "+nowhere, "unreachable: cannot connect to "+nowhere+" over the mesh", "no known addresses")
	refuseSession := fakeEdge(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"too many sessions"}}`)
	}, nil)
	sp.expect("ConnectTo "+refuseSession, "Reachable:", "session refused by", "too many sessions")
	refuseCall := fakeEdge(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"sessionId":"tok","expires_at":0,"ttl":3600}`)
	}, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32009,"message":"not permitted"}}`)
	})
	sp.expect("ConnectTo "+refuseCall, "Reachable:", "call refused by", "error -32009: not permitted")

	// StopTo by port, then StopTo by address: the ports are free after.
	sp.expect("StopTo 1", "no peer started by this shell has port 1")
	sp.expect(fmt.Sprintf("StopTo %d", a.port), fmt.Sprintf("The peer on port %d (pid %d) stopped; port %d is free.", a.port, a.pid, a.port))
	portFree(t, a.port)
	if alive(a.pid) {
		t.Fatalf("pid %d still runs after StopTo", a.pid)
	}
	sp.expect("StopTo "+b.address, fmt.Sprintf("port %d is free", b.port))
	portFree(t, b.port)
	if alive(b.pid) {
		t.Fatalf("pid %d still runs after StopTo", b.pid)
	}
	sp.expect("PingTo "+a.address, "unreachable: nothing answers at")

	// StopPeer by mesh address.
	c := sp.readyTo("ReadyTo --public-ip 127.0.0.1")
	sp.expect("StopPeer "+c.mesh, fmt.Sprintf("port %d is free", c.port))
	portFree(t, c.port)

	// exit stops what is still running: the explicit port is reused.
	d := sp.readyTo(fmt.Sprintf("ReadyTo --port %d --public-ip 127.0.0.1", b.port))
	e := sp.readyTo("ReadyTo --public-ip 127.0.0.1")
	sp.expect("PingTo "+d.address, "pong from "+d.peerID)
	rest := sp.finish("exit")
	for _, p := range []startedPeer{d, e} {
		if !strings.Contains(rest, fmt.Sprintf("The peer on port %d (pid %d) stopped; port %d is free.", p.port, p.pid, p.port)) {
			t.Fatalf("exit did not report stopping %d:\n%s", p.port, rest)
		}
		if alive(p.pid) {
			t.Fatalf("pid %d still runs after exit", p.pid)
		}
		portFree(t, p.port)
	}
	for _, p := range []startedPeer{a, b, c, d, e} {
		if lg, _ := os.ReadFile(p.logPath); bytes.Contains(lg, []byte("DATA RACE")) {
			t.Fatalf("race in peer %d:\n%s", p.port, lg)
		}
	}
}

// TestShellEndOfInputAndSignalsStopPeers: the shell stops its peers at the
// end of its input and on SIGTERM, as on exit.
func TestShellEndOfInputAndSignalsStopPeers(t *testing.T) {
	for _, how := range []string{"eof", "sigterm"} {
		t.Run(how, func(t *testing.T) {
			sp := startShell(t, shellEnv(), "--data-dir", t.TempDir(), "--default-port", strconv.Itoa(testenv.FreePort(t)))
			p := sp.readyTo("ReadyTo --public-ip 127.0.0.1")
			var rest string
			if how == "eof" {
				rest = sp.finish("EOF")
			} else {
				if err := sp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				rest = sp.finish("")
				if !strings.Contains(rest, "Interrupted.") {
					t.Fatalf("no word of the signal:\n%s", rest)
				}
			}
			if !strings.Contains(rest, fmt.Sprintf("port %d is free", p.port)) || alive(p.pid) {
				t.Fatalf("peer pid %d (alive %v) after %s:\n%s", p.pid, alive(p.pid), how, rest)
			}
			portFree(t, p.port)
		})
	}
}
