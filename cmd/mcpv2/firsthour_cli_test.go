package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/node/store"
)

// Issue 26 ("the first hour"): what a new user trips on at the command line.

// TestFirstHourFlagValueIsAFlag: a flag that takes a value, followed by
// another flag (an empty $RELAY in `--bootstrap $RELAY --p2p-port 0`), is
// refused naming both, not with the node's "unexpected argument "0"".
func TestFirstHourFlagValueIsAFlag(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"node", "--data-dir", dir, "--bootstrap", "--p2p-port", "0"},
			`--bootstrap needs a value, but got "--p2p-port" (another flag; was a shell variable empty?): give one, or quote an empty value as --bootstrap=""`},
		{[]string{"call", "/ip4/127.0.0.1/tcp/1/p2p/x", "ping", "--secret", "-s3cret"},
			`--secret needs a value, but got "-s3cret", which looks like a flag: if it is the value, write --secret=-s3cret`},
		{[]string{"node", "--data-dir", dir, "--bootstrap"},
			`--bootstrap needs a value, but it is the last argument: give one, or quote an empty value as --bootstrap=""`},
		{[]string{"key", "add", "k1", "--grant", "--data-dir", dir},
			`--grant needs a value, but got "--data-dir" (another flag;`},
	} {
		out, errOut, code := run(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("mcpv2 %v: exit %d, stderr %q, want %q", tc.args, code, errOut, tc.want)
		}
		if strings.Contains(errOut, "unexpected argument") || out != "" {
			t.Errorf("mcpv2 %v: the old message or output: stdout %q stderr %q", tc.args, out, errOut)
		}
	}
	// A value that starts with '-' still works: with '=', and a negative
	// number as the next word; an empty one quoted as the message says.
	for _, args := range [][]string{
		{"config", "show", "--data-dir", dir, "--find-rate-limit=-1"},
		{"config", "show", "--data-dir", dir, "--find-rate-limit", "-1"},
	} {
		out, errOut, code := run(t, args...)
		if code != 0 || !regexp.MustCompile(`(?m)^find-rate-limit\s+= -1(\.0)?\s+# flag$`).MatchString(out) {
			t.Errorf("mcpv2 %v: exit %d, stderr %q, stdout without find-rate-limit = -1:\n%s", args, code, errOut, out)
		}
	}
	out, errOut, code := run(t, "config", "show", "--data-dir", dir, "--bootstrap=", "--p2p-port", "0")
	if code != 0 || !regexp.MustCompile(`(?m)^p2p-port\s+= 0\s+# flag$`).MatchString(out) {
		t.Errorf(`--bootstrap="" --p2p-port 0: exit %d, stderr %q, stdout:\n%s`, code, errOut, out)
	}
}

// TestFirstHourDidYouMean: a mistyped command or flag gets the nearest
// one and a pointer to --help on one line, not the help dump or "No help
// topic".
func TestFirstHourDidYouMean(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nodee"}, `mcpv2: unknown command "nodee" (did you mean "node"?) — see mcpv2 --help`},
		{[]string{"help", "nodee"}, `mcpv2: unknown command "nodee" (did you mean "node"?) — see mcpv2 --help`},
		{[]string{"node", "--prot", "8000", "--data-dir", dir}, `mcpv2: unknown flag --prot (did you mean --port?) — see mcpv2 node --help`},
		{[]string{"ping", "--cuont", "2", "/ip4/127.0.0.1/tcp/1"}, `mcpv2: unknown flag --cuont (did you mean --count?) — see mcpv2 ping --help`},
		{[]string{"--verison"}, `mcpv2: unknown flag --verison (did you mean --version?) — see mcpv2 --help`},
		{[]string{"key", "ad", "k1", "--data-dir", dir}, `mcpv2: unknown subcommand of mcpv2 key "ad" (did you mean "add"?) — see mcpv2 key --help`},
		{[]string{"node", "--zzzzzzzz", "--data-dir", dir}, `mcpv2: unknown flag --zzzzzzzz — see mcpv2 node --help`},
		{[]string{"node", "--port", "abc", "--data-dir", dir}, `mcpv2: node: invalid value "abc" for flag -port: parse error — see mcpv2 node --help`},
	} {
		out, errOut, code := run(t, tc.args...)
		if code == 0 || strings.TrimSpace(errOut) != tc.want {
			t.Errorf("mcpv2 %v: exit %d, stderr %q, want %q", tc.args, code, errOut, tc.want)
		}
		for _, old := range []string{"No help topic", "Incorrect Usage", "USAGE:", "OPTIONS:"} {
			if strings.Contains(out+errOut, old) {
				t.Errorf("mcpv2 %v: printed %q (the old help dump):\n%s%s", tc.args, old, out, errOut)
			}
		}
	}
}

// TestFirstHourHelpHelp: `mcpv2 help help` (and `help h`) prints help's
// own help, as before issue 26, not "unknown command "help"".
func TestFirstHourHelpHelp(t *testing.T) {
	for _, word := range []string{"help", "h"} {
		out, errOut, code := run(t, "help", word)
		if code != 0 || !strings.Contains(out, "help - Shows a list of commands or help for one command") || strings.Contains(errOut, "unknown command") {
			t.Errorf("mcpv2 help %s: exit %d, stdout %q, stderr %q", word, code, out, errOut)
		}
	}
}

// TestFirstHourDashPositional: a positional argument that starts with '-'
// but is no flag (a negative number, "-5 plus 3") reaches the command
// wherever it stands, and after "--" any word does; none of them is read
// as a flag ("flag provided but not defined").
func TestFirstHourDashPositional(t *testing.T) {
	node := startNode(t, "")
	addr, client := node.tcpAddr(t), t.TempDir()
	// The node's ping gets -1 as its arguments and refuses them as no
	// object: the word was ARGS_JSON, not a flag.
	for _, args := range [][]string{
		{"call", addr, "ping", "-1", "--data-dir", client},
		{"call", addr, "ping", "--data-dir", client, "--", "-1"},
		{"call", "--data-dir", client, "--", addr, "ping", "-1"},
	} {
		out, errOut, code := run(t, args...)
		if code == 0 || out != "" || !strings.Contains(errOut, `invalid params for ping`) || !strings.Contains(errOut, `-1 has type "integer", want "object"`) {
			t.Errorf("mcpv2 %q: exit %d, stdout %q, stderr %q: want ping's refusal of the arguments -1", args, code, out, errOut)
		}
	}
	// After "--", a word that looks like a flag is an argument too.
	out, errOut, code := run(t, "call", addr, "ping", "--data-dir", client, "--", "-x.txt")
	if code == 0 || out != "" || strings.TrimSpace(errOut) != "mcpv2: call: ARGS_JSON is not valid JSON: -x.txt" {
		t.Errorf("call … -- -x.txt: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The request "-5 plus 3" is planned (the mesh has no calculator).
	out, errOut, _ = run(t, "orchestrate", "-5 plus 3", "--bootstrap", addr, "--data-dir", client, "--attempts", "1", "--subtask-timeout", "2s")
	if !strings.Contains(out, "-5 plus 3") || strings.Contains(errOut, "flag provided") || strings.Contains(errOut, "usage:") {
		t.Errorf(`orchestrate "-5 plus 3": stdout %q, stderr %q: want the request planned`, out, errOut)
	}
}

// TestFirstHourAuditNoMatch: `mcpv2 audit --outcome blocked` with no
// matching call prints the table's header and says on stderr that nothing
// matched, naming the filter; a match prints as before.
func TestFirstHourAuditNoMatch(t *testing.T) {
	dir := t.TempDir()
	rec, _ := json.Marshal(store.AuditRecord{Time: time.Now(), Caller: "12D3KooWAbcdefghijklmnopqrstuvwxyz", Via: "mesh", Method: "tools/call", Skill: "ping", Outcome: "ok"})
	writeFile(t, filepath.Join(dir, "audit.jsonl"), string(rec)+"\n")
	out, errOut, code := run(t, "audit", "--data-dir", dir, "--outcome", "blocked")
	if code != 0 || !strings.HasPrefix(out, "TIME") || strings.Count(out, "\n") != 1 || !strings.Contains(out, "OUTCOME") {
		t.Errorf("audit --outcome blocked: exit %d, stdout %q, want the header alone", code, out)
	}
	if strings.TrimSpace(errOut) != "mcpv2: audit: no calls match (outcome=blocked)" {
		t.Errorf("audit --outcome blocked: stderr %q", errOut)
	}
	out, errOut, code = run(t, "audit", "--data-dir", dir, "--outcome", "blocked", "--skill", "ask", "--json")
	if code != 0 || out != "" || strings.TrimSpace(errOut) != "mcpv2: audit: no calls match (skill=ask, outcome=blocked)" {
		t.Errorf("audit --json no match: exit %d, stdout %q (want no JSON lines), stderr %q", code, out, errOut)
	}
	out, errOut, code = run(t, "audit", "--data-dir", dir, "--outcome", "ok")
	if code != 0 || errOut != "" || strings.Count(out, "\n") != 2 || !strings.Contains(out, "ping") {
		t.Errorf("audit --outcome ok: exit %d, stderr %q, stdout %q: want the header and the call", code, errOut, out)
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, errOut, code := run(t, "audit", "--data-dir", missing); code == 0 || !strings.Contains(errOut, "audit: no data dir "+missing+": no node has run there yet") {
		t.Errorf("audit of a missing data dir: exit %d, stderr %q", code, errOut)
	}
	out, errOut, _ = run(t, "audit", "--data-dir", t.TempDir())
	if !strings.HasPrefix(out, "TIME") || strings.TrimSpace(errOut) != "mcpv2: audit: no calls logged yet" {
		t.Errorf("audit of an empty log: stdout %q stderr %q", out, errOut)
	}
}

// TestFirstHourHelpDefaults walks every command and subcommand of the real
// binary's --help: no flag shows its default twice ("(default 2m)
// (default: 0s)"), --timeout shows the default its command applies, and
// --port says that without it there is no edge, not "(default: 0)".
func TestFirstHourHelpDefaults(t *testing.T) {
	var paths [][]string
	for _, cmd := range newApp().Commands {
		paths = append(paths, []string{cmd.Name})
		for _, sub := range cmd.Subcommands {
			paths = append(paths, []string{cmd.Name, sub.Name})
		}
	}
	flagLine := regexp.MustCompile(`^\s+-`)
	seen := map[string]bool{}
	for _, p := range paths {
		out, errOut, code := run(t, append(p, "--help")...)
		if code != 0 || !strings.Contains(out, "NAME:") {
			t.Fatalf("mcpv2 %v --help: exit %d, stderr %q", p, code, errOut)
		}
		for _, line := range strings.Split(out, "\n") {
			if !flagLine.MatchString(line) {
				continue
			}
			flag := strings.Fields(line)[0]
			seen[flag] = true
			if n := strings.Count(line, "(default"); n > 1 {
				t.Errorf("mcpv2 %v --help: %s shows its default %d times:\n%s", p, flag, n, line)
			}
			// A usage that says what the default is gets no "(default: …)"
			// of urfave/cli's besides ("off by default … (default: false)").
			for _, own := range []string{"by default", "the default when"} {
				if strings.Contains(line, own) && strings.Contains(line, "(default:") {
					t.Errorf("mcpv2 %v --help: %s says its default twice (%q and urfave/cli's):\n%s", p, flag, own, line)
				}
			}
			switch flag {
			case "--timeout":
				want := map[string]string{"find": "1m", "orchestrate": "5m", "send": "none over the mesh", "mcp": "none"}[p[0]]
				if want == "" {
					want = "2m"
				}
				if !strings.Contains(line, "(default: "+want) || strings.Contains(line, "0s") {
					t.Errorf("mcpv2 %v --help: --timeout does not say its default %q:\n%s", p, want, line)
				}
			case "--port":
				if !strings.Contains(line, "(default: no HTTP edge)") || strings.Contains(line, "(default: 0)") {
					t.Errorf("mcpv2 %v --help: --port does not say that its default is no edge:\n%s", p, line)
				}
			}
		}
	}
	for _, f := range []string{"--timeout", "--port", "--max-command-runs"} {
		if !seen[f] {
			t.Errorf("no command's help showed %s: the walk missed it", f)
		}
	}
}

// TestFirstHourLLMNeedsModel: --llm openai without a model names
// --llm-model and its variable.
func TestFirstHourLLMNeedsModel(t *testing.T) {
	for _, args := range [][]string{
		{"node", "--data-dir", t.TempDir(), "--p2p-port", "0", "--no-mdns", "--llm", "openai"},
		{"orchestrate", "--data-dir", t.TempDir(), "--llm", "openai", "what is 7 times 6"},
	} {
		_, errOut, code := run(t, args...)
		if code == 0 || !strings.Contains(errOut, "--llm openai needs a model: pass --llm-model NAME (or set MCPV2_LLM_MODEL)") {
			t.Errorf("mcpv2 %v: exit %d, stderr %q: want it to name --llm-model", args, code, errOut)
		}
		if strings.Contains(errOut, "a model name is required") {
			t.Errorf("mcpv2 %v: the old message: %q", args, errOut)
		}
	}
}

// runPTY runs the mcpv2 CLI with stdout and/or stderr on a pseudo-terminal
// (as a user's terminal) and the other on a pipe; it returns what the
// pipe and the terminal got, and the exit code.
func runPTY(t *testing.T, stdoutTTY bool, args ...string) (piped, tty string, code int) {
	t.Helper()
	ptmx, tt, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 160}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = testenv.CleanEnv()
	var pipe bytes.Buffer
	if stdoutTTY {
		cmd.Stdout, cmd.Stderr = tt, &pipe
	} else {
		cmd.Stdout, cmd.Stderr = &pipe, tt
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tt.Close()
	var term bytes.Buffer
	read := make(chan struct{})
	go func() { io.Copy(&term, ptmx); close(read) }() // ends with EIO once the child exits
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("mcpv2 %v: %v", args, err)
	}
	<-read
	return pipe.String(), term.String(), code
}

// TestFirstHourSendBar: on a terminal `mcpv2 send` draws one progress bar,
// rewritten in place with \r; piped, it prints the progress lines as
// before.
func TestFirstHourSendBar(t *testing.T) {
	client := t.TempDir()
	b := receiver(t, client)
	path, _ := bigFile(t, 3<<20, 7)
	sum := blake3File(t, path) // send prints the blake3 of a blob 1.2.0 transfer
	// About 3 s at 1 MiB/s: a line every 0.25 s would be a dozen lines.
	out, tty, code := runPTY(t, false, "send", path, b.tcpAddr(t), "--data-dir", client, "--limit-rate", "1M")
	var r sendResult
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.BLAKE3 != sum {
		t.Fatalf("send on a terminal: exit %d, stdout %q, terminal %q", code, out, tty)
	}
	if n := strings.Count(tty, "\n"); n > 2 {
		t.Errorf("send on a terminal printed %d lines, want one bar:\n%q", n, tty)
	}
	if n := strings.Count(tty, "\r"); n < 5 {
		t.Errorf("send on a terminal redrew its bar %d times, want it rewritten with \\r as bytes go:\n%q", n, tty)
	}
	if !strings.Contains(tty, "stored") || !strings.Contains(tty, "100%") || !strings.Contains(tty, "3.1/3.1 MB") || strings.Contains(tty, "sent 1") {
		t.Errorf("send on a terminal: the bar's last state is not the stored file, or a plain progress line showed:\n%q", tty)
	}
	// Piped: the lines of before, and no bar.
	out, errs, code := run(t, "send", path, b.tcpAddr(t), "--data-dir", client, "--name", "again.bin", "--limit-rate", "2M")
	if code != 0 || !strings.Contains(out, sum) {
		t.Fatalf("send piped: exit %d, %q %q", code, out, errs)
	}
	if !strings.Contains(errs, "sending 3145728 bytes (attempt 1)\n") || strings.Count(errs, "\nsent ") < 3 || strings.Contains(errs, "\r") {
		t.Errorf("send piped: want the progress lines and no \\r:\n%q", errs)
	}
}

// TestFirstHourTools: `mcpv2 tools` prints one line per skill on a
// terminal or with --brief, and the full schemas as JSON when piped or
// with --json.
func TestFirstHourTools(t *testing.T) {
	b := startNode(t, "")
	client := t.TempDir()
	addr := b.tcpAddr(t)
	lineRE := regexp.MustCompile(`(?m)^ping\s+Liveness check: .+$`)
	_, tty, code := runPTY(t, true, "tools", addr, "--data-dir", client)
	if code != 0 || !lineRE.MatchString(tty) || strings.Contains(tty, "inputSchema") || strings.Count(tty, "\n") > 30 {
		t.Errorf("tools on a terminal: exit %d, want one line per skill:\n%s", code, tty)
	}
	out, errs, code := run(t, "tools", addr, "--data-dir", client, "--brief")
	if code != 0 || !lineRE.MatchString(out) || strings.Contains(out, "{") || !strings.Contains(errs, "--json") {
		t.Errorf("tools --brief: exit %d, stdout:\n%s\nstderr %q", code, out, errs)
	}
	briefLines := strings.Count(out, "\n")
	for _, args := range [][]string{{"tools", addr, "--data-dir", client}, {"tools", addr, "--data-dir", client, "--json"}} {
		out, errs, code := run(t, args...)
		var tl struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &tl) != nil || len(tl.Tools) != briefLines || len(tl.Tools[0].InputSchema) == 0 {
			t.Errorf("mcpv2 %v: exit %d, want the full JSON of %d tools: %q %q", args, code, briefLines, out, errs)
		}
	}
	_, tty, _ = runPTY(t, true, "tools", addr, "--data-dir", client, "--json")
	if !strings.Contains(tty, `"inputSchema"`) {
		t.Errorf("tools --json on a terminal: want the schemas:\n%s", tty)
	}
	if _, errs, code := run(t, "tools", addr, "--brief", "--json"); code == 0 || !strings.Contains(errs, "pick one") {
		t.Errorf("tools --brief --json: exit %d, stderr %q", code, errs)
	}
}
