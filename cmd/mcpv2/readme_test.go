//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
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
)

// TestREADME runs the command blocks of README.md as written, in order, as a
// reader would type them on one machine.
//
// The README's convention, which this test enforces:
//
//   - Commands are in ```console blocks. A line "$ cmd" (or "host$ cmd", a
//     terminal on another host of a walkthrough, indented or not) is a
//     command; a command line ending in "\" goes on to the next line. The
//     other lines are the output shown for the command before them: each
//     must match a line of its stdout, in order, field by field (runs of
//     spaces are one, so that a table's column widths do not matter), with
//     "…" matching anything (a field that is only "…" stands for any number
//     of fields, a line that is only "…" for any number of lines). Blocks of
//     shell commands in any other form (```sh, ```bash, bare fences with
//     "$ " lines) are refused, so that none escapes this test.
//   - Each prompt of a block is a terminal of its own ("$" one, "relay$"
//     another), opened fresh for the block: a shell variable serves only
//     the commands after it in the same block and terminal, so a block
//     copied into any terminal runs as it is. A command that uses a
//     variable its terminal did not set is refused. Files (the home and the
//     working directory) are shared, as on one machine.
//   - A command whose trailing comment says "keeps running" is a node of a
//     terminal of its own: it runs in the background until the test ends,
//     and the next command runs once it has printed its banner. No command
//     may follow it in its terminal of that block (that terminal is busy).
//   - A command whose trailing comment says "run it again until …" waits
//     for the mesh to settle: it is run again, once a second, until it
//     succeeds with the output shown, for at most 15 s.
//   - `go run|install|build|test|vet` commands are not run (too slow, or
//     recursive) but must name packages of this module that exist.
//   - ```json blocks must be valid JSON (what the policy examples grant is
//     tested by node's TestDocumentedPolicyExamplesParse).
//
// Every other command runs with bash exactly as written, in its terminal's
// shell session, with the test-built mcpv2 first on PATH, HOME and the
// working directory in temporary directories, and no MCPV2_* variable of
// the caller. A background node sees the variables that earlier commands
// of its terminal set. Commands use the README's fixed ports (4001, 8000,
// …): if one is busy on this machine the test fails at once and says which.
// TestREADMENetns runs the same walkthrough in a loopback-only network
// namespace.
func TestREADME(t *testing.T) {
	runREADME(t, nil)
}

// runREADME runs README.md's walkthrough as TestREADME describes; each
// command's bash is started through the argv prefix wrap (nil: directly;
// ip netns exec NS: inside a network namespace, where the ports are the
// namespace's own and are not checked here). It returns the machine, whose
// nodes have stopped by the end of t.
func runREADME(t *testing.T, wrap []string) *readmeMachine {
	src, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, problems := readmeParse(string(src))
	for _, p := range problems {
		t.Error("README.md:" + p)
	}
	var all []readmeCmd
	for _, b := range blocks {
		all = append(all, b.cmds...)
	}
	var run, keeps, goCmds int
	for _, c := range all {
		switch {
		case c.goCmd:
			goCmds++
		case c.keeps:
			keeps++
			run++
		default:
			run++
		}
	}
	// A parser that found nothing would pass anything.
	if run < 10 || keeps < 2 || goCmds < 3 {
		t.Fatalf("README.md: found %d commands to run, %d of them nodes that keep running, and %d go commands; the README has more: is its convention (```console, \"$ \", \"# keeps running\") still the one this test reads?", run, keeps, goCmds)
	}
	if t.Failed() {
		t.FailNow()
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}

	for _, need := range []string{"bash", "curl", "head", "grep", "cut"} {
		if _, err := exec.LookPath(need); err != nil {
			testenv.SkipEnv(t, "%s is not installed: the README's commands use it", need)
		}
	}
	if wrap == nil {
		for _, p := range readmePorts(all) {
			if err := readmePortFree(p.port, p.udp); err != nil {
				t.Fatalf("README.md:%d runs a node on port %d (%s), which is in use on this machine: %v; the README's commands use their ports as written, so stop what holds it and run the test again", p.line, p.port, p.proto(), err)
			}
		}
	}

	home, work := t.TempDir(), t.TempDir()
	m := &readmeMachine{dir: work, env: readmeEnv(home), wrap: wrap}
	t.Cleanup(func() { m.stop(t) })
	for _, b := range blocks {
		t.Run(fmt.Sprintf("L%d", b.line), func(t *testing.T) {
			terms := map[string]*readmeShell{} // this block's terminals, by prompt
			defer func() {
				for _, s := range terms {
					s.close()
				}
			}()
			for _, c := range b.cmds {
				if c.goCmd {
					if err := checkGoCommand(root, c.text); err != nil {
						t.Errorf("README.md:%d: %q: %v", c.line, c.text, err)
					}
					continue
				}
				sh := terms[c.host]
				if sh == nil {
					sh = m.terminal(t)
					terms[c.host] = sh
				}
				if c.keeps {
					sh.background(t, c)
				} else {
					sh.run(t, c)
				}
			}
		})
	}
	return m
}

// readmeBlock is a ```console block of the README and its commands.
type readmeBlock struct {
	line int // README line of the block's first line
	cmds []readmeCmd
}

// readmeParse returns the ```console blocks of a README and what breaks the
// convention of TestREADME, each problem prefixed with its line number.
func readmeParse(src string) (blocks []readmeBlock, problems []string) {
	fences, err := readmeFences(src)
	if err != nil {
		return nil, []string{err.Error()}
	}
	for _, f := range fences {
		switch f.lang {
		case "console":
			cmds, err := readmeCommands(f)
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			for _, c := range cmds {
				if !c.goCmd && strings.Contains(c.text, "…") {
					problems = append(problems, fmt.Sprintf("%d: the command %q has a placeholder (…) and cannot run as written: set a shell variable in an earlier command instead", c.line, c.text))
				}
			}
			problems = append(problems, readmeTerminals(cmds)...)
			blocks = append(blocks, readmeBlock{f.line, cmds})
		case "json":
			body := strings.Join(f.lines, "\n")
			var v any
			if err := json.Unmarshal([]byte(body), &v); err != nil {
				problems = append(problems, fmt.Sprintf("%d: a ```json block that is not JSON: %v", f.line, err))
			}
		case "sh", "bash", "shell", "zsh", "shell-session", "sh-session":
			problems = append(problems, fmt.Sprintf("%d: a ```%s block: write commands in a ```console block, each after a \"$ \" prompt, so that TestREADME runs them", f.line, f.lang))
		default:
			for i, l := range f.lines {
				if readmePrompt.MatchString(l) {
					problems = append(problems, fmt.Sprintf("%d: %q looks like a command in a ```%s block: put commands in ```console blocks, so that TestREADME runs them", f.line+i, l, f.lang))
				}
			}
		}
	}
	return blocks, problems
}

// readmePrompt matches a command line of a ```console block: "$ cmd", or
// "host$ cmd" for a terminal on another host, indented or not.
var readmePrompt = regexp.MustCompile(`^\s*([A-Za-z][A-Za-z0-9_-]*)?\$ (.*)$`)

// readmeVarUse matches a use of a shell variable: $NAME or ${NAME}.
var readmeVarUse = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

// readmeSingleQuoted matches a single-quoted word, in which bash expands
// nothing.
var readmeSingleQuoted = regexp.MustCompile(`'[^']*'`)

// readmeInherited are the variables every terminal has before its first
// command.
var readmeInherited = map[string]bool{"HOME": true, "PATH": true, "USER": true, "PWD": true}

// readmeTerminals returns what makes the commands of one block depend on
// another terminal: a variable used in a terminal (a prompt) that did not
// set it earlier in the block, and a command typed in a terminal whose
// node keeps running.
func readmeTerminals(cmds []readmeCmd) (problems []string) {
	set := map[string]map[string]bool{} // prompt → variables set
	busy := map[string]int{}            // prompt → line of its running node
	for _, c := range cmds {
		if c.goCmd {
			continue
		}
		term := c.host + "$"
		if l, ok := busy[c.host]; ok {
			problems = append(problems, fmt.Sprintf("%d: %q is typed in the terminal %q, whose node of line %d keeps running: give it a terminal of its own (another prompt, \"b$ \")", c.line, c.text, term, l))
		}
		text := c.text
		if i := strings.Index(text, " #"); i >= 0 {
			text = text[:i]
		}
		for _, m := range readmeVarUse.FindAllStringSubmatch(readmeSingleQuoted.ReplaceAllString(text, ""), -1) {
			if !readmeInherited[m[1]] && !set[c.host][m[1]] {
				problems = append(problems, fmt.Sprintf("%d: %q uses $%s, which no earlier command of its terminal (%q) in this block sets: each block must run as written in a fresh terminal, so set it there (derive it again, or read it from a file)", c.line, c.text, m[1], term))
			}
		}
		if c.assign != "" {
			if set[c.host] == nil {
				set[c.host] = map[string]bool{}
			}
			set[c.host][c.assign] = true
		}
		if c.keeps {
			busy[c.host] = c.line
		}
	}
	return problems
}

// readmeKeeps matches the trailing comment that marks a long-running node.
var readmeKeeps = regexp.MustCompile(`\s#[^'"]*\bkeeps running\b[^'"]*$`)

// readmeAgain matches the trailing comment of a command that a reader may
// have to run again while the mesh settles ("run it again until …").
var readmeAgain = regexp.MustCompile(`\s#[^'"]*\brun it again until\b[^'"]*$`)

// readmeAssign matches a command that sets a shell variable.
var readmeAssign = regexp.MustCompile(`^(export\s+)?([A-Za-z_][A-Za-z0-9_]*)=`)

// readmeFence is a fenced block of the README: its language and lines.
type readmeFence struct {
	lang  string
	line  int // README line of the first line inside the fence
	lines []string
}

// readmeFences splits a Markdown text into its fenced blocks.
func readmeFences(src string) ([]readmeFence, error) {
	var out []readmeFence
	var cur *readmeFence
	for i, l := range strings.Split(src, "\n") {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "```") {
			if cur != nil {
				cur.lines = append(cur.lines, strings.TrimRight(l, " \t\r"))
			}
			continue
		}
		if cur == nil {
			cur = &readmeFence{lang: strings.TrimSpace(strings.TrimPrefix(t, "```")), line: i + 2}
			continue
		}
		if t != "```" {
			return nil, fmt.Errorf("%d: a fence opens inside the block of line %d", i+1, cur.line-1)
		}
		out = append(out, *cur)
		cur = nil
	}
	if cur != nil {
		return nil, fmt.Errorf("%d: the block is never closed", cur.line-1)
	}
	return out, nil
}

// readmeCmd is a command of a ```console block.
type readmeCmd struct {
	line   int      // README line of the command
	host   string   // the prompt's name: its terminal in the block ("" for "$")
	text   string   // as written, continuation lines included
	want   []string // output lines shown after it
	keeps  bool     // a node that keeps running: run in the background
	goCmd  bool     // a go command: checked, not run
	again  bool     // marked "run it again until …": may be run again for a while
	assign string   // the variable the command sets, if it sets one
	export bool     // the command exports it
}

// readmeCommands parses the commands of a ```console block and the output
// shown after each.
func readmeCommands(f readmeFence) ([]readmeCmd, error) {
	var out []readmeCmd
	for i := 0; i < len(f.lines); i++ {
		m := readmePrompt.FindStringSubmatch(f.lines[i])
		if m == nil {
			if len(out) == 0 {
				return nil, fmt.Errorf("%d: output before any command (commands start with \"$ \")", f.line+i)
			}
			if w := strings.TrimSpace(f.lines[i]); w != "…" && w != "" {
				out[len(out)-1].want = append(out[len(out)-1].want, f.lines[i])
			}
			continue
		}
		c := readmeCmd{line: f.line + i, host: m[1], text: m[2]}
		for strings.HasSuffix(c.text, `\`) {
			if i++; i == len(f.lines) {
				return nil, fmt.Errorf("%d: the command goes on (\\) past the end of its block", c.line)
			}
			c.text += "\n" + f.lines[i]
		}
		c.keeps = readmeKeeps.MatchString(c.text)
		c.again = readmeAgain.MatchString(c.text)
		c.goCmd = strings.HasPrefix(c.text, "go ")
		c.assign, c.export = readmeAssignment(c.text)
		if c.keeps && c.goCmd {
			return nil, fmt.Errorf("%d: a go command cannot keep running here: the test does not run go commands", c.line)
		}
		out = append(out, c)
	}
	return out, nil
}

// readmeAssignment returns the variable that a command sets, if it is an
// assignment (NAME=value or export NAME=value, with a value of one word, a
// "quoted" one or a $(command)); not for a command run with a variable in
// its environment (NAME=value cmd …).
func readmeAssignment(text string) (name string, export bool) {
	m := readmeAssign.FindStringSubmatch(text)
	if m == nil {
		return "", false
	}
	val := text[len(m[0]):]
	if i := strings.Index(val, " #"); i >= 0 {
		val = strings.TrimSpace(val[:i])
	}
	switch {
	case strings.HasPrefix(val, "$(") && strings.HasSuffix(val, ")"),
		strings.HasPrefix(val, `"`) && strings.HasSuffix(val, `"`),
		!strings.ContainsAny(val, " \t\n"):
		return m[2], m[1] != ""
	}
	return "", false
}

// checkGoCommand checks that a go command names packages of the module at
// root that exist (and are commands, for go run and go install).
func checkGoCommand(root, text string) error {
	f := strings.Fields(text)
	if len(f) < 2 {
		return errors.New("no go subcommand")
	}
	switch f[1] {
	case "run", "install", "build", "test", "vet":
	default:
		return fmt.Errorf("go %s: TestREADME checks only go run, install, build, test and vet", f[1])
	}
	var pkgs []string
	for _, a := range f[2:] {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if a != "." && !strings.HasPrefix(a, "./") {
			if f[1] == "run" && len(pkgs) > 0 {
				break // the program's own arguments
			}
			return fmt.Errorf("%q: name packages by their path in this module (./cmd/mcpv2), which the test can check", a)
		}
		pkgs = append(pkgs, a)
		if f[1] == "run" {
			break // the rest are the program's arguments
		}
	}
	if len(pkgs) == 0 {
		return errors.New("names no package")
	}
	for _, p := range pkgs {
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(strings.TrimSuffix(p, "..."), "/")))
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			if strings.HasSuffix(p, "...") {
				if st, err := os.Stat(dir); err == nil && st.IsDir() {
					continue
				}
			}
			return fmt.Errorf("%s: no Go package there", p)
		}
		if f[1] != "run" && f[1] != "install" {
			continue
		}
		main := false
		for _, fn := range files {
			b, err := os.ReadFile(fn)
			if err != nil {
				return err
			}
			if !strings.HasSuffix(fn, "_test.go") && regexp.MustCompile(`(?m)^package main\b`).Match(b) {
				main = true
				break
			}
		}
		if !main {
			return fmt.Errorf("%s: not a command (package main)", p)
		}
	}
	return nil
}

// readmePort is a fixed port that a README node listens on.
type readmePort struct {
	port int
	udp  bool // also UDP (QUIC): a --p2p-port
	line int
}

func (p readmePort) proto() string {
	if p.udp {
		return "TCP and UDP, --p2p-port"
	}
	return "TCP, --port"
}

// readmePorts returns the fixed ports of the README's nodes: --p2p-port
// (4001 unless given, or --listen) and --port.
func readmePorts(cmds []readmeCmd) []readmePort {
	var out []readmePort
	for _, c := range cmds {
		f := strings.Fields(c.text)
		node := false
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "mcpv2" && f[i+1] == "node" {
				node = true
			}
		}
		if !node || c.goCmd {
			continue
		}
		flag := func(name string) (string, bool) {
			for i, a := range f {
				if v, ok := strings.CutPrefix(a, name+"="); ok {
					return v, true
				}
				if a == name && i+1 < len(f) {
					return f[i+1], true
				}
				if a == name {
					return "", true
				}
			}
			return "", false
		}
		_, listen := flag("--listen")
		if v, ok := flag("--p2p-port"); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				out = append(out, readmePort{n, true, c.line})
			}
		} else if !listen {
			out = append(out, readmePort{4001, true, c.line})
		}
		if v, ok := flag("--port"); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				out = append(out, readmePort{n, false, c.line})
			}
		}
	}
	return out
}

// readmePortFree reports whether port can be bound on every IPv4 interface, over
// TCP and, with udp, UDP.
func readmePortFree(port int, udp bool) error {
	ln, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return err
	}
	ln.Close()
	if udp {
		pc, err := net.ListenPacket("udp4", fmt.Sprintf("0.0.0.0:%d", port))
		if err != nil {
			return err
		}
		pc.Close()
	}
	return nil
}

// readmeEnv is the environment of the README's commands: the caller's
// without MCPV2_* (cleanEnv) and without what would change how bash starts
// or where it is, HOME set to home, and the test-built mcpv2 first on PATH.
func readmeEnv(home string) []string {
	var env []string
	for _, kv := range testenv.CleanEnv() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "HOME", "PATH", "PWD", "OLDPWD", "BASH_ENV", "ENV", "CDPATH", "SHELLOPTS", "BASHOPTS":
		default:
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "PATH="+filepath.Dir(binPath)+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// readmeDone marks the end of a command's output in the shell session.
const readmeDone = "__mcpv2_readme_done__"

// readmeCmdTimeout bounds one command of the README (a race-built binary;
// find and send join the mesh first).
const readmeCmdTimeout = 90 * time.Second

// readmeMachine is the machine of the README's walkthrough: its working
// directory, environment, the argv prefix its shells start through, and
// the nodes that keep running.
type readmeMachine struct {
	dir  string
	env  []string
	wrap []string
	bg   []*readmeBg
}

// command is bash with args, started through the machine's wrap, in its
// directory and environment, in a process group of its own.
func (m *readmeMachine) command(args ...string) *exec.Cmd {
	argv := append(append(append([]string(nil), m.wrap...), "bash", "--noprofile", "--norc"), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = m.dir, m.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// stop stops the nodes, the last started first.
func (m *readmeMachine) stop(t *testing.T) {
	for i := len(m.bg) - 1; i >= 0; i-- {
		m.bg[i].stop(t)
	}
}

// readmeShell is a terminal of the README's commands: one bash session, in
// a process group of its own, fed the commands on its stdin.
type readmeShell struct {
	m      *readmeMachine
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    chan string // stdout lines; closed at EOF
	errs   chan string // stderr lines; closed at EOF
	broken string      // why the session is unusable, once it is

	vars []readmeVar // set by the commands so far, in order
}

// readmeVar is a shell variable that a README command set.
type readmeVar struct {
	name, value string
	export      bool
}

// terminal opens a new terminal on the machine: a fresh bash session.
func (m *readmeMachine) terminal(t *testing.T) *readmeShell {
	t.Helper()
	cmd := m.command()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &readmeShell{m: m, cmd: cmd, stdin: stdin, out: readmeLines(stdout), errs: readmeLines(stderr)}
}

// close ends the session (the terminal is closed), killing it if it does
// not end within 10 s.
func (s *readmeShell) close() {
	s.stdin.Close()
	done := make(chan struct{})
	go func() {
		for range s.out {
		}
		for range s.errs {
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	_ = s.cmd.Wait()
}

// readmeLines sends the lines of r, without their newline, until EOF.
func readmeLines(r io.Reader) chan string {
	ch := make(chan string, 256)
	go func() {
		defer close(ch)
		br := bufio.NewReader(r)
		for {
			l, err := br.ReadString('\n')
			if l != "" {
				ch <- strings.TrimSuffix(l, "\n")
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// run runs c in the session and checks its exit status, the variable it
// sets and its output.
func (s *readmeShell) run(t *testing.T, c readmeCmd) {
	t.Helper()
	// A command marked "run it again until …" waits for the mesh (a node
	// found by skill); the README promises that within seconds, and issue
	// 9's target is 15 s after the node's banner.
	start := time.Now()
	retryUntil := start.Add(readmeRetryFor)
	for n := 1; ; n++ {
		msg, final := s.attempt(c)
		if msg == "" {
			t.Logf("README.md:%d: %s: ok in %.1fs (attempt %d)", c.line, c.text, time.Since(start).Seconds(), n)
			return
		}
		if final || !c.again || time.Now().After(retryUntil) {
			if c.again && !final {
				msg = fmt.Sprintf("still, after %s of running it again: %s", readmeRetryFor, msg)
			}
			t.Errorf("README.md:%d: %q: %s%s", c.line, c.text, msg, s.logs())
			return
		}
		time.Sleep(time.Second)
	}
}

// readmeRetryFor bounds how long a command marked "run it again until …"
// is run again.
const readmeRetryFor = 15 * time.Second

// attempt runs c once in the session and checks its exit status, the
// variable it sets and its output: it returns what is wrong ("" if
// nothing), and whether running it again is pointless.
func (s *readmeShell) attempt(c readmeCmd) (msg string, final bool) {
	if s.broken != "" {
		return "not run: " + s.broken, true
	}
	// The command as written, in a group so that a trailing comment ends at
	// the newline; then its status (and the variable it set) after a
	// newline of our own, on stdout, and a mark on stderr.
	value := "''"
	if c.assign != "" {
		value = `"$` + c.assign + `"`
	}
	script := fmt.Sprintf("{ %s\n} </dev/null\n__readme_rc=$?\nprintf '\\n%s %%d %%s\\n' \"$__readme_rc\" %s\nprintf '\\n%s\\n' >&2\n",
		c.text, readmeDone, value, readmeDone)
	if _, err := io.WriteString(s.stdin, script); err != nil {
		s.broken = fmt.Sprintf("the shell session ended: %v", err)
		return s.broken, true
	}
	deadline := time.After(readmeCmdTimeout)
	out, mark, ok := readUntilMark(s.out, deadline)
	var errs []string
	if ok {
		errs, _, ok = readUntilMark(s.errs, deadline)
	}
	outputs := fmt.Sprintf("\nstdout:\n%s\nstderr:\n%s", strings.Join(out, "\n"), strings.Join(errs, "\n"))
	if !ok {
		s.broken = fmt.Sprintf("the command of README.md:%d did not finish in %s (or the shell died)", c.line, readmeCmdTimeout)
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		return fmt.Sprintf("did not finish in %s (an unclosed quote?)%s", readmeCmdTimeout, outputs), true
	}
	rcStr, val, _ := strings.Cut(strings.TrimPrefix(mark, readmeDone+" "), " ")
	if rc, _ := strconv.Atoi(rcStr); rc != 0 {
		return fmt.Sprintf("exit status %d%s", rc, outputs), false
	}
	if c.assign != "" {
		if val == "" {
			return fmt.Sprintf("left $%s empty%s", c.assign, outputs), false
		}
		s.setVar(readmeVar{c.assign, val, c.export})
	}
	if missing, ok := matchReadmeOutput(c.want, out); !ok {
		return fmt.Sprintf("no output line matches %q, shown in the README (\"…\" matches anything)%s", missing, outputs), false
	}
	return "", false
}

// readUntilMark reads lines from ch until the readmeDone mark; it returns
// the lines before it (without the empty line that the mark's own leading
// newline makes after output that ended in one) and the mark line.
func readUntilMark(ch chan string, deadline <-chan time.Time) (lines []string, mark string, ok bool) {
	for {
		select {
		case l, open := <-ch:
			if !open {
				return lines, "", false
			}
			if strings.HasPrefix(l, readmeDone) {
				if n := len(lines); n > 0 && lines[n-1] == "" {
					lines = lines[:n-1]
				}
				return lines, l, true
			}
			lines = append(lines, l)
		case <-deadline:
			return lines, "", false
		}
	}
}

func (s *readmeShell) setVar(v readmeVar) {
	for i := range s.vars {
		if s.vars[i].name == v.name {
			s.vars[i].value = v.value
			s.vars[i].export = s.vars[i].export || v.export
			return
		}
	}
	s.vars = append(s.vars, v)
}

// logs is the stderr of the background nodes, for failure messages.
func (s *readmeShell) logs() string {
	var b strings.Builder
	for _, n := range s.m.bg {
		fmt.Fprintf(&b, "\n--- stderr of README.md:%d (%s):\n%s", n.line, n.text, n.stderr())
	}
	return b.String()
}

// matchReadmeOutput reports whether the lines of want each match a line of
// got, in order, field by field (readmeLineRegexp); if not, it returns the
// first line that matches nothing.
func matchReadmeOutput(want, got []string) (string, bool) {
	i := 0
	for _, w := range want {
		re := readmeLineRegexp(w)
		for i < len(got) && !re.MatchString(strings.Join(strings.Fields(got[i]), " ")) {
			i++
		}
		if i == len(got) {
			return w, false
		}
		i++
	}
	return "", true
}

// readmeLineRegexp returns the regexp that an output line shown in the
// README stands for, to match against a line of output whose runs of
// white space are each made one space: its fields separated by one space
// (so a table matches whatever its column widths), "…" within a field
// matching anything, and a field that is only "…" standing for any
// number of fields, none included.
func readmeLineRegexp(w string) *regexp.Regexp {
	fields := strings.Fields(w)
	var b strings.Builder
	b.WriteString("^")
	gap := false // a separator is owed before the next field
	for i, f := range fields {
		if f == "…" {
			switch {
			case len(fields) == 1:
				b.WriteString(".*")
			case i == len(fields)-1 && gap:
				b.WriteString("(?: .*)?")
			case i == len(fields)-1:
				b.WriteString(".*")
			default:
				if gap {
					b.WriteString(" ")
				}
				b.WriteString("(?:.* )?")
				gap = false
			}
			continue
		}
		if gap {
			b.WriteString(" ")
		}
		parts := strings.Split(f, "…")
		for j := range parts {
			parts[j] = regexp.QuoteMeta(parts[j])
		}
		b.WriteString(strings.Join(parts, ".*"))
		gap = true
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// readmeBg is a README node that keeps running: bash -c with the variables
// set so far and the command as written, in a process group of its own.
type readmeBg struct {
	line int
	text string
	cmd  *exec.Cmd

	mu     sync.Mutex
	out    []string     // stdout lines, guarded by mu
	errb   bytes.Buffer // stderr, guarded by mu
	banner chan struct{}
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
	failed bool  // its start was reported as failed
}

// background starts c, waits for its banner (the MCPV2_DATA_DIR line, its
// last) and checks the output shown for it.
func (s *readmeShell) background(t *testing.T, c readmeCmd) {
	t.Helper()
	if s.broken != "" {
		t.Errorf("README.md:%d: not run: %s", c.line, s.broken)
		return
	}
	// A TERM trap makes bash wait for the node to shut down (as Ctrl-C in
	// its terminal would), rather than leave it to whoever adopts it.
	var script strings.Builder
	script.WriteString("trap : TERM INT\n")
	for _, v := range s.vars {
		if v.export {
			script.WriteString("export ")
		}
		fmt.Fprintf(&script, "%s='%s'\n", v.name, strings.ReplaceAll(v.value, "'", `'\''`))
	}
	script.WriteString(c.text + "\n")
	cmd := s.m.command("-c", script.String())
	b := &readmeBg{line: c.line, text: c.text, cmd: cmd, banner: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &b.mu, w: &b.errb}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.m.bg = append(s.m.bg, b)
	go func() {
		sc := bufio.NewScanner(stdout)
		seen := false
		for sc.Scan() {
			b.mu.Lock()
			b.out = append(b.out, sc.Text())
			b.mu.Unlock()
			if !seen && strings.HasPrefix(sc.Text(), "MCPV2_DATA_DIR=") {
				close(b.banner)
				seen = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		b.err = cmd.Wait()
		close(b.exited)
	}()
	select {
	case <-b.banner:
	case <-b.exited:
		b.failed = true
		t.Errorf("README.md:%d: %q exited before its banner: %v\nstdout:\n%s\nstderr:\n%s", c.line, c.text, b.err, strings.Join(b.stdout(), "\n"), b.stderr())
		return
	case <-time.After(readmeCmdTimeout):
		b.failed = true
		t.Errorf("README.md:%d: %q printed no banner in %s\nstdout:\n%s\nstderr:\n%s", c.line, c.text, readmeCmdTimeout, strings.Join(b.stdout(), "\n"), b.stderr())
		return
	}
	t.Logf("README.md:%d: %s: banner in %.1fs", c.line, c.text, time.Since(started).Seconds())
	if missing, ok := matchReadmeOutput(c.want, b.stdout()); !ok {
		t.Errorf("README.md:%d: %q: no banner line matches %q, shown in the README (\"…\" matches anything)\nstdout:\n%s", c.line, c.text, missing, strings.Join(b.stdout(), "\n"))
	}
}

func (b *readmeBg) stdout() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.out...)
}

func (b *readmeBg) stderr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.errb.String()
}

// stop sends SIGTERM to the node's process group (Ctrl-C in its
// terminal) and waits for it to exit; SIGKILL after 20 s. A node that keeps
// running must have kept running until then, and must exit cleanly.
func (b *readmeBg) stop(t *testing.T) {
	select {
	case <-b.exited:
		if b.failed {
			return
		}
		t.Errorf("README.md:%d: %q keeps running, the README says, but it exited before the end: %v\nstderr:\n%s", b.line, b.text, b.err, b.stderr())
		return
	default:
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-b.exited:
		if b.err != nil {
			t.Errorf("README.md:%d: %q: exit after SIGTERM: %v\nstderr:\n%s", b.line, b.text, b.err, b.stderr())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("README.md:%d: %q did not exit within 20s of SIGTERM\nstderr:\n%s", b.line, b.text, b.stderr())
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.exited
	}
}

// TestREADMEConvention: how TestREADME reads a README — which lines are
// commands, output, nodes that keep running, variables and go commands —
// and what it refuses.
func TestREADMEConvention(t *testing.T) {
	src := "# Title\n\n```console\n" +
		"$ mcpv2 node --port 8000    # terminal 1: keeps running\n" +
		"MCPV2_PEER_ID=12D3KooW…\n" +
		"…\n" +
		"relay$ ADDR=$(mcpv2 id | grep -m1 /tcp/ | cut -d= -f2)\n" +
		"   b$ curl -s -X POST http://127.0.0.1:8000/mcpv2 \\\n" +
		"    -d '{\"a\":1}'\n" +
		"{\"pong\":true,…}\n" +
		"   c$ MCPV2_SESSION_TTL=60 mcpv2 node --p2p-port 0 --listen /ip4/127.0.0.1/tcp/0    # keeps running\n" +
		"relay$ mcpv2 find x --bootstrap $ADDR    # listed within seconds: run it again until it is\n" +
		"   b$ export PATH=\"$PATH:/x\"    # a comment\n" +
		"   b$ go run ./cmd/mcpv2 node\n" +
		"```\n\n```json\n{\"grants\": {}}\n```\n\n```\ncmd/   the CLI\n```\n"
	blocks, problems := readmeParse(src)
	if len(problems) != 0 || len(blocks) != 1 {
		t.Fatalf("blocks %d, problems %q", len(blocks), problems)
	}
	cmds := blocks[0].cmds
	want := []readmeCmd{
		{line: 4, text: "mcpv2 node --port 8000    # terminal 1: keeps running", want: []string{"MCPV2_PEER_ID=12D3KooW…"}, keeps: true},
		{line: 7, host: "relay", text: "ADDR=$(mcpv2 id | grep -m1 /tcp/ | cut -d= -f2)", assign: "ADDR"},
		{line: 8, host: "b", text: "curl -s -X POST http://127.0.0.1:8000/mcpv2 \\\n    -d '{\"a\":1}'", want: []string{`{"pong":true,…}`}},
		{line: 11, host: "c", text: "MCPV2_SESSION_TTL=60 mcpv2 node --p2p-port 0 --listen /ip4/127.0.0.1/tcp/0    # keeps running", keeps: true},
		{line: 12, host: "relay", text: "mcpv2 find x --bootstrap $ADDR    # listed within seconds: run it again until it is", again: true},
		{line: 13, host: "b", text: `export PATH="$PATH:/x"    # a comment`, assign: "PATH", export: true},
		{line: 14, host: "b", text: "go run ./cmd/mcpv2 node", goCmd: true},
	}
	if len(cmds) != len(want) {
		t.Fatalf("got %d commands, want %d: %+v", len(cmds), len(want), cmds)
	}
	for i := range want {
		if fmt.Sprintf("%+v", cmds[i]) != fmt.Sprintf("%+v", want[i]) {
			t.Errorf("command %d:\n got %+v\nwant %+v", i, cmds[i], want[i])
		}
	}
	ports := readmePorts(cmds)
	if fmt.Sprint(ports) != fmt.Sprint([]readmePort{{4001, true, 4}, {8000, false, 4}}) {
		t.Errorf("ports %v, want 4001 (TCP+UDP) and 8000 of line 4 only", ports)
	}

	for _, bad := range []struct{ src, problem string }{
		{"```sh\nmcpv2 id\n```\n", "a ```sh block"},
		{"```\n$ mcpv2 id\n```\n", "looks like a command"},
		{"```console\n$ mcpv2 call /ip4/127.0.0.1/tcp/4001/p2p/12D3KooW… ping\n```\n", "placeholder"},
		{"```console\nMCPV2_PEER_ID=x\n$ mcpv2 id\n```\n", "output before any command"},
		{"```console\n$ mcpv2 id \\\n```\n", "past the end of its block"},
		{"```json\n{\"grants\": {\n```\n", "not JSON"},
		{"```console\n$ mcpv2 id\n", "never closed"},
		// Each block is run in fresh terminals, one per prompt.
		{"```console\n$ A=x\n```\n\n```console\n$ echo $A\n```\n", "uses $A, which no earlier command of its terminal"},
		{"```console\na$ A=x\n  b$ echo \"${A}\"\n```\n", "uses $A, which no earlier command of its terminal (\"b$\")"},
		{"```console\n$ echo $A    # A is set by the next line\n$ A=x\n```\n", "uses $A"},
		{"```console\n$ mcpv2 node    # keeps running\n$ mcpv2 id\n```\n", "whose node of line 2 keeps running"},
	} {
		if _, problems := readmeParse(bad.src); len(problems) != 1 || !strings.Contains(problems[0], bad.problem) {
			t.Errorf("%q: problems %q, want one about %q", bad.src, problems, bad.problem)
		}
	}

	// Single quotes expand nothing; a comment uses nothing; variables a
	// terminal opens with are there.
	if _, problems := readmeParse("```console\n$ curl -d '{\"a\":\"$A\"}' $HOME/x    # not $B\n```\n"); len(problems) != 0 {
		t.Errorf("problems %q, want none", problems)
	}

	for _, c := range []struct {
		text    string
		name    string
		exports bool
	}{
		{`S=$(curl -s http://127.0.0.1:8000/mcpv2/session | cut -d'"' -f4)`, "S", false},
		{"A=x", "A", false},
		{"MCPV2_SESSION_TTL=1800 mcpv2 node", "", false},
		{"mcpv2 id", "", false},
		{`export PATH="$PATH:$(go env GOPATH)/bin"`, "PATH", true},
	} {
		if name, exports := readmeAssignment(c.text); name != c.name || exports != c.exports {
			t.Errorf("%s: sets %q (export %v), want %q (export %v)", c.text, name, exports, c.name, c.exports)
		}
	}

	out := []string{"MCPV2_PEER_ID=12D3KooWabc", "MCPV2_P2P_ADDRESS=/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWabc", "MCPV2_BOUND_PORT=8000"}
	for _, c := range []struct {
		want []string
		ok   bool
	}{
		{[]string{"MCPV2_PEER_ID=12D3KooW…", "MCPV2_BOUND_PORT=8000"}, true},
		{[]string{"MCPV2_BOUND_PORT=…"}, true},
		{[]string{"MCPV2_BOUND_PORT=8000", "MCPV2_PEER_ID=12D3KooW…"}, false}, // out of order
		{[]string{"MCPV2_BOUND_PORT=8001"}, false},
		{[]string{"MCPV2_PEER_ID=12D3KooW"}, false}, // a whole line, not a prefix
	} {
		if _, ok := matchReadmeOutput(c.want, out); ok != c.ok {
			t.Errorf("%q against %q: match %v, want %v", c.want, out, ok, c.ok)
		}
	}
	// A table matches field by field, whatever its column widths (issue
	// 26: short agent names made the NAME column narrower than the
	// README's); a field "…" is any number of fields, none included.
	table := []string{
		"SCORE  PEER         NAME   REACHABLE  SKILLS",
		"3.0    12D3KooWabc  alice  true       ping,ask",
		"3.0    12D3KooWdef  relay  true       ping,ask",
	}
	wide := []string{
		"SCORE  PEER         NAME            REACHABLE  SKILLS",
		"3.0    12D3KooWabc  mcpv2-QRpmHH37  true       ping,ask",
		"3.0    12D3KooWdef  alice           true       ping,ask",
	}
	for _, c := range []struct {
		want []string
		ok   bool
	}{
		{[]string{"SCORE  PEER  …  NAME  …  REACHABLE  SKILLS", "…  12D3KooW…  alice  …  true  …"}, true},
		{[]string{"SCORE PEER NAME REACHABLE SKILLS", "3.0 12D3KooWdef relay true ping,ask"}, true},
		{[]string{"…  NAME  …", "…  alice  …", "… relay …"}, true},
		{[]string{"…"}, true},
		{[]string{"SCORE  PEER  NAME  SKILLS"}, false}, // a field missing
		{[]string{"…  12D3KooW…  bob  …"}, false},
		{[]string{"…  alic  …"}, false},               // a whole field
		{[]string{"… relay …", "…  alice  …"}, false}, // out of order
	} {
		if _, ok := matchReadmeOutput(c.want, table); ok != c.ok {
			t.Errorf("%q against %q: match %v, want %v", c.want, table, ok, c.ok)
		}
	}
	if _, ok := matchReadmeOutput([]string{"SCORE  PEER  …  NAME  …  REACHABLE  SKILLS", "…  12D3KooW…  alice  …  true  …"}, wide); !ok {
		t.Errorf("the README's find table does not match a wide one: %q", wide)
	}

	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cmd, problem string }{
		{"go run ./cmd/mcpv2 node", ""},
		{"go install ./cmd/mcpv2", ""},
		{"go test -race ./...", ""},
		{"go run ./examples/twopeers", ""},
		{"go run ./cmd/nope", "no Go package"},
		{"go install ./protocol", "not a command"},
		{"go test ./nope/...", "no Go package"},
		{"go run github.com/mcpv2/mcpv2/cmd/mcpv2@latest", "by their path in this module"},
		{"go env GOPATH", "checks only"},
		{"go test -race", "names no package"},
	} {
		err := checkGoCommand(root, c.cmd)
		if c.problem == "" && err != nil || c.problem != "" && (err == nil || !strings.Contains(err.Error(), c.problem)) {
			t.Errorf("%s: %v, want %q", c.cmd, err, c.problem)
		}
	}
}
