//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// These tests drive `mcpv2 shell` through a pseudo-terminal, as a person
// at a terminal would: its line editor sees the keys (Up is ESC [ A, Ctrl-L
// is \x0c, Tab, Enter is \r) and the test reads the screen's bytes.

// ptyShell is a running `mcpv2 shell` on a pty.
type ptyShell struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File // the pty's controlling side
	done chan struct{}
	// exitErr is the shell's Wait error, once done is closed.
	exitErr error

	mu     sync.Mutex
	out    []byte
	cursor int
	notify chan struct{}
}

// startPtyShell runs `mcpv2 shell args…` on a 200-column pty and waits
// for its first prompt.
func startPtyShell(t *testing.T, args ...string) *ptyShell {
	t.Helper()
	return startPtyShellSized(t, &pty.Winsize{Rows: 50, Cols: 200}, args...)
}

// startPtyShellSized is startPtyShell on a pty of size ws (all zero: a
// pty that reports no size, as some terminal emulators' do).
func startPtyShellSized(t *testing.T, ws *pty.Winsize, args ...string) *ptyShell {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"shell"}, args...)...)
	cmd.Env = append(shellEnv(), "TERM=xterm")
	tty, err := pty.StartWithSize(cmd, ws)
	if err != nil {
		t.Fatal(err)
	}
	ps := &ptyShell{t: t, cmd: cmd, tty: tty, done: make(chan struct{}), notify: make(chan struct{}, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			if n > 0 {
				ps.mu.Lock()
				ps.out = append(ps.out, buf[:n]...)
				ps.mu.Unlock()
				select {
				case ps.notify <- struct{}{}:
				default:
				}
			}
			if err != nil { // EIO once the shell has exited
				break
			}
		}
		ps.exitErr = cmd.Wait()
		close(ps.done)
	}()
	t.Cleanup(func() {
		select {
		case <-ps.done:
		default:
			_, _ = tty.Write([]byte{4}) // Ctrl-D: leave, stopping the peers
			select {
			case <-ps.done:
			case <-time.After(cmdTimeout):
				_ = cmd.Process.Kill()
				<-ps.done
			}
		}
		tty.Close()
	})
	ps.await(cmdTimeout)
	return ps
}

// await waits until the output after the cursor holds each of want in
// turn and then a prompt, moves the cursor past that prompt, and returns
// the output up to it, its line ends "\n".
func (ps *ptyShell) await(timeout time.Duration, want ...string) string {
	ps.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ps.mu.Lock()
		rest := string(ps.out[ps.cursor:])
		at, ok := 0, true
		for _, w := range append(want, shellPrompt) {
			i := strings.Index(rest[at:], strings.ReplaceAll(w, "\n", "\r\n")) // the terminal's line ends
			if i < 0 {
				ok = false
				break
			}
			at += i + len(w)
		}
		if ok {
			ps.cursor += at
			ps.mu.Unlock()
			ps.t.Logf("screen: %q", rest[:at])
			return strings.ReplaceAll(rest[:at], "\r\n", "\n")
		}
		ps.mu.Unlock()
		select {
		case <-ps.notify:
		case <-ps.done:
			ps.t.Fatalf("the shell exited while %q was awaited; output:\n%q", want, rest)
		case <-deadline.C:
			ps.t.Fatalf("no %q then a prompt within %s; output so far:\n%q", want, timeout, rest)
		}
	}
}

// keys types s (raw bytes: the line editor reads keys, not lines).
func (ps *ptyShell) keys(s string) {
	ps.t.Helper()
	if _, err := ps.tty.Write([]byte(s)); err != nil {
		ps.t.Fatalf("type %q: %v", s, err)
	}
}

// typeLine types s and Enter, and returns the output up to the next prompt
// once it holds each of want.
func (ps *ptyShell) typeLine(s string, want ...string) string {
	ps.t.Helper()
	ps.keys(s + "\r")
	return ps.await(cmdTimeout, want...)
}

// TestShellLineEditor: on a terminal, Up recalls and runs the previous
// line (kept across shells in a 0600 history file), Ctrl-L clears the
// screen and is no part of the command, and Tab completes command names.
func TestShellLineEditor(t *testing.T) {
	dir := t.TempDir()
	nothing := testenv.FreePort(t) // a port where nothing listens
	refused := fmt.Sprintf("unreachable: nothing answers at 127.0.0.1:%d", nothing)
	ps := startPtyShell(t, "--data-dir", dir)

	// Up, then Enter: the previous line runs again; no ^[[A anywhere.
	ps.typeLine(fmt.Sprintf("PingTo %d", nothing), refused)
	out := ps.typeLine("\x1b[A", refused)
	if !strings.Contains(out, fmt.Sprintf("PingTo %d", nothing)) {
		t.Fatalf("Up did not bring back the previous line:\n%q", out)
	}

	// Ctrl-L clears the screen (the editor's cursor-home), and the command
	// typed after it runs as typed.
	out = ps.typeLine("\x0cPingTo "+strconv.Itoa(nothing), "\x1b[H", refused)
	if strings.Contains(out, "unknown command") {
		t.Fatalf("Ctrl-L became part of the command:\n%q", out)
	}

	// Tab completes a command's name (any case) and the shell runs it.
	out = ps.typeLine("conn\t"+strconv.Itoa(nothing), refused)
	if !strings.Contains(out, "connectTo ") || strings.Contains(out, "unknown command") {
		t.Fatalf("Tab did not complete conn to connectTo:\n%q", out)
	}

	// A line with a secret is run but not kept, nor is one the shell
	// refused (a misspelt or differently cased option), yet Up recalls
	// that until the shell ends, to fix it.
	ps.typeLine(fmt.Sprintf("PingTo 'mcpv2://127.0.0.1:%d/mcpv2?sessionId=tok'", nothing), refused)
	ps.typeLine(fmt.Sprintf("PingTo mcpv2://127.0.0.1:%d/mcpv2?session%%49d=tok.mac", nothing), refused)
	ps.typeLine("ReadyTo --secrt=hunter3", "ReadyTo: unknown option --secrt")
	ps.typeLine("ReadyTo --Secret hunter2", "ReadyTo: unknown option --Secret")
	if out := ps.typeLine("\x1b[A", "ReadyTo: unknown option --Secret"); !strings.Contains(out, "ReadyTo --Secret hunter2") {
		t.Fatalf("Up did not bring back the refused line:\n%q", out)
	}
	ps.typeLine("help", "On a terminal: Up and Down recall earlier lines", "kept in\n  "+filepath.Join(dir, "shell", "history")+"\n")
	ps.keys("\x04") // Ctrl-D on an empty line: leave
	select {
	case <-ps.done:
	case <-time.After(cmdTimeout):
		t.Fatal("Ctrl-D did not end the shell")
	}
	if ps.exitErr != nil {
		t.Fatalf("the shell ended with %v after Ctrl-D", ps.exitErr)
	}
	ps.mu.Lock()
	all := string(ps.out)
	ps.mu.Unlock()
	for _, bad := range []string{"^[[A", "^L", `unknown command`} {
		if strings.Contains(all, bad) {
			t.Fatalf("the screen shows %q:\n%q", bad, all)
		}
	}

	hist := filepath.Join(dir, "shell", "history")
	fi, err := os.Stat(hist)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("history %s has mode %v, want 0600", hist, fi.Mode().Perm())
	}
	b, _ := os.ReadFile(hist)
	if !strings.Contains(string(b), fmt.Sprintf("PingTo %d\n", nothing)) || !strings.HasSuffix(string(b), "help\n") {
		t.Fatalf("history lacks the lines typed:\n%s", b)
	}
	for _, secret := range []string{"sessionId", "session%49d", "tok.mac", "hunter", "Secret", "secrt"} {
		if strings.Contains(string(b), secret) {
			t.Fatalf("history kept %q:\n%s", secret, b)
		}
	}

	// A new shell on the same data dir: Up brings back the last line of
	// the one before.
	ps2 := startPtyShell(t, "--data-dir", dir)
	ps2.typeLine("\x1b[A", "Commands (any case")

	// Ctrl-C drops a typed line; on an empty line it leaves.
	ps2.keys(fmt.Sprintf("PingTo %d\x03", nothing))
	if out := ps2.await(cmdTimeout, "^C"); strings.Contains(out, "unreachable") {
		t.Fatalf("Ctrl-C ran the line:\n%q", out)
	}
	ps2.keys("\x03")
	select {
	case <-ps2.done:
	case <-time.After(cmdTimeout):
		t.Fatal("Ctrl-C on an empty line did not end the shell")
	}
	if ps2.exitErr != nil {
		t.Fatalf("the shell ended with %v after Ctrl-C", ps2.exitErr)
	}
	ps2.mu.Lock()
	rest := string(ps2.out[ps2.cursor:])
	ps2.mu.Unlock()
	if !strings.Contains(rest, "Interrupted.") || strings.Contains(rest, "unreachable") {
		t.Fatalf("Ctrl-C on an empty line:\n%q", rest)
	}
}

// TestShellHistoryKeeps: the history file keeps a line the shell runs and
// that carries no credential, whatever its spelling or case.
func TestShellHistoryKeeps(t *testing.T) {
	apiKey := protocol.KeyPrefix + strings.Repeat("A", 43)
	for _, tc := range []struct {
		line string
		keep bool
	}{
		// Kept: lines the shell runs, with no credential.
		{"PingTo 8001", true},
		{"help", true},
		{"?", true},
		{"exit", true},
		{"pingto 8001", true},
		{"StopPeer 8001", true},
		{"ReadyTo --port 8001 --public-ip 127.0.0.1 --llm-mode", true},
		{"PingTo mcpv2://127.0.0.1:8001/mcpv2", true},
		{"PingTo http://[::1]:8001/mcpv2?x=1", true},
		{"PingTo /ip4/127.0.0.1/tcp/4001/p2p/12D3KooWLRPJAA5o6Zr4SyQv2Dqk7jBEXkYRGqpb5XNtAdbNtYhF", true},
		{"PingTo nowhere", true}, // refused by the command, not by the parse: no secret in it
		{`SentTo "what is a secret key?" 8001`, true},
		{`SentTo "the session starts at 9" 8001 --new`, true},
		{"PayTo 1 8001 --currency EUR --memo lunch", true},
		{"# a comment", true},

		// Refused by the shell: not kept, secret or not.
		{"", false},
		{"   ", false},
		{"ReadyTo --Secret hunter2", false},
		{"ReadyTo --secrt=hunter3", false},
		{"ReadyTo --port", false},
		{"Frobnicate 8001", false},
		{`SentTo "open quote 8001`, false},
		{`PingTo 8001 \`, false},
		{"PingTo --key abc 8001", false},
		{"PingTo --Token=abc 8001", false},
		{"PingTo --bearer abc 8001", false},
		{"PingTo --password=abc 8001", false},

		// Run by the shell, but with a credential: not kept.
		{"ReadyTo --secret hunter2", false},
		{"ReadyTo --secret=hunter2", false},
		{"ReadyTo '--secret=hunter2'", false},
		{"readyto --port 8001 --secret hunter2", false},
		{"PingTo mcpv2://127.0.0.1:1/mcpv2?sessionId=tok.mac", false},
		{"PingTo 'mcpv2://127.0.0.1:1/mcpv2?sessionId=tok'", false},
		{"PingTo mcpv2://127.0.0.1:1/mcpv2?session%49d=tok.mac", false},
		{"PingTo mcpv2://127.0.0.1:1/mcpv2?%73essionId=tok.mac", false},
		{"PingTo http://127.0.0.1:1/mcpv2?x=1&SESSIONID=tok", false},
		{"PingTo http://127.0.0.1:1/mcpv2?access_token=tok", false},
		{"PingTo http://127.0.0.1:1/mcpv2?tok%65n", false},
		{"PingTo http://user:pw@127.0.0.1:1/mcpv2", false},
		{"PingTo 127.0.0.1:1/mcpv2?sessionId=tok", false},
		{`SentTo "use ` + apiKey + `" 8001`, false},
		{"SentTo " + strings.ToUpper(apiKey) + " 8001", false},
		{"PayTo 1 8001 --memo " + apiKey, false},
		{`SentTo "Authorization: Bearer abc" 8001`, false},
		{"SentTo Authorization: 8001", false},
		{`SentTo "bearer abc" 8001`, false},
		{"# ReadyTo --secret hunter2", false},
	} {
		if got := historyKeeps(tc.line); got != tc.keep {
			t.Errorf("historyKeeps(%q) = %v, want %v", tc.line, got, tc.keep)
		}
	}
}

// TestShellHistoryFileScrubbed: a history file written before the rule
// (by an older mcpv2) loses its credentials and refused lines when a shell
// opens it, is cut to the limit, and is 0600.
func TestShellHistoryFileScrubbed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shell", "history")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	old := "PingTo 8001\nReadyTo --Secret hunter2\nPingTo 8002\n\nPingTo mcpv2://127.0.0.1:1/mcpv2?session%49d=tok.mac\nPingTo 8003\nhelp" // no last newline
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, f, err := openHistory(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"PingTo 8002", "PingTo 8003", "help"}; !slices.Equal(lines, want) {
		t.Fatalf("lines %q, want %q", lines, want)
	}
	if _, err := f.WriteString("PingTo 8004\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "PingTo 8002\nPingTo 8003\nhelp\nPingTo 8004\n"; string(b) != want {
		t.Fatalf("history file:\n%s\nwant:\n%s", b, want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("history has mode %v, want 0600", fi.Mode().Perm())
	}
	// A file that is already as the rule wants is left as it is.
	lines, f, err = openHistory(path, 10)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if len(lines) != 4 {
		t.Fatalf("lines %q, want the 4 of the file", lines)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("the history's dir holds %d files, want 1 (no temp file left)", len(entries))
	}
}

// TestShellLineEditorUnsizedTerminal: on a pty that reports a width of 0
// the editor still completes (readline alone would only ring the bell).
func TestShellLineEditorUnsizedTerminal(t *testing.T) {
	ps := startPtyShellSized(t, &pty.Winsize{}, "--data-dir", t.TempDir())
	nothing := testenv.FreePort(t)
	out := ps.typeLine("conn\t"+strconv.Itoa(nothing), fmt.Sprintf("unreachable: nothing answers at 127.0.0.1:%d", nothing))
	if !strings.Contains(out, "connectTo ") {
		t.Fatalf("Tab did not complete conn to connectTo:\n%q", out)
	}
}

// TestShellLineEditorCompletesPeers: Tab completes the peer ID and the
// port of a peer the shell started, and a bare port works for every
// command that takes an address, as for StopTo.
func TestShellLineEditorCompletesPeers(t *testing.T) {
	ps := startPtyShell(t, "--data-dir", t.TempDir(), "--default-port", strconv.Itoa(testenv.FreePort(t)))
	out := ps.typeLine("ReadyTo --public-ip 127.0.0.1", "Peer ready: ")
	m, id := rePeerReady.FindStringSubmatch(out), rePeerID.FindStringSubmatch(out)
	if m == nil || id == nil {
		t.Fatalf("no ready message:\n%q", out)
	}
	port, peerID := m[2], id[1]
	ps.typeLine("PingTo "+peerID[:10]+"\t", "pong from "+peerID)
	ps.typeLine("StopTo "+port[:len(port)-1]+"\t", "The peer on port "+port, "port "+port+" is free")
}

// TestShellOneAddressRule: every command that takes an address takes what
// StopTo takes, a bare port included (`SentTo "x" 8001` was refused while
// `StopTo 8001` worked); a mistyped command gets a did-you-mean. Piped
// input, as scripts use the shell.
func TestShellOneAddressRule(t *testing.T) {
	sp := startShell(t, shellEnv(), "--data-dir", t.TempDir(), "--default-port", strconv.Itoa(testenv.FreePort(t)))
	out := sp.expect("Conectto 8001", `unknown command "Conectto" (did you mean "ConnectTo"?)`)
	if strings.Contains(out, "type help") {
		t.Fatalf("a did-you-mean with the help pointer too:\n%s", out)
	}
	sp.expect("pnigto 8001", `unknown command "pnigto" (did you mean "PingTo"?)`)
	sp.expect("Frobnicate", `unknown command "Frobnicate": type help for the list`)

	p := sp.readyTo("ReadyTo --public-ip 127.0.0.1")
	port := strconv.Itoa(p.port)
	sp.expect(`SentTo "x" `+port, `You said "x"`)
	notes := writeFile(t, filepath.Join(t.TempDir(), "notes.txt"), "by port\n")
	sp.expect("SendTo "+notes+" "+port, "stored as notes.txt, 8 bytes", "(matches the local file)")
	sp.expect("PingTo "+port, "pong from "+p.peerID)
	sp.expect("\x0cPingTo "+port, "pong from "+p.peerID) // a Ctrl-L from a terminal without the line editor
	sp.expect("PayTo 1 "+port, "Payment of 1 USD to "+p.address)
	sp.expect("ConnectTo "+port, "Reachable: "+p.address, "Connected: session accepted")
	for _, cmd := range []string{"PingTo", "ConnectTo", "StopTo"} {
		sp.expect(cmd+" 0", cmd+": 0 is not a TCP port (1-65535)")
		sp.expect(cmd+" nowhere", cmd+": malformed address", "or a bare port")
	}
	sp.expect(`SentTo "x" 70000`, "SentTo: 70000 is not a TCP port")
	sp.expect("PayTo 1 nowhere", "PayTo: malformed address")
	sp.expect("StopTo "+port, "The peer on port "+port, "port "+port+" is free")
	sp.expect("StopTo "+port, "StopTo: no peer started by this shell has port "+port)
	sp.finish("exit")
}
