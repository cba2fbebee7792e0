package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/chzyer/readline"

	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// shellHistoryLimit is how many lines the shell's history keeps.
const shellHistoryLimit = 1000

// errLeave is what a line source returns for Ctrl-C on an empty line of
// the line editor: leave, as SIGINT does while a command runs.
var errLeave = errors.New("Ctrl-C on an empty line")

// lineSource gives the shell its lines, one at a time, each when asked.
type lineSource interface {
	// next returns the next line, io.EOF at the end of input, or errLeave.
	next() (string, error)
	// ownPrompt reports whether next prints the prompt itself.
	ownPrompt() bool
	// close ends a pending next, and puts the terminal back as it was.
	close() error
}

// plainLines reads lines from a pipe or a file (or a terminal when no line
// editor can), for scripts and tests: the shell prints the prompt.
type plainLines struct{ sc *bufio.Scanner }

// newPlainLines reads lines of up to 1 MiB from in.
func newPlainLines(in io.Reader) plainLines {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return plainLines{sc: sc}
}

func (p plainLines) next() (string, error) {
	if p.sc.Scan() {
		return p.sc.Text(), nil
	}
	if err := p.sc.Err(); err != nil {
		return "", err
	}
	return "", io.EOF
}

func (plainLines) ownPrompt() bool { return false }
func (plainLines) close() error    { return nil }

// shellHistoryPath is where the line editor keeps the shell's history: in
// the data dir, beside the peers the shell starts, so that each data dir
// (each identity) has its own, as ~/.bash_history is each user's.
func shellHistoryPath(dataDir string) string {
	return filepath.Join(dataDir, "shell", "history")
}

// stdioIsTerminal reports whether the shell reads and writes a terminal,
// where the line editor serves; otherwise (a pipe either way) it reads
// plain lines, and prints no escape sequences into a file.
func stdioIsTerminal() bool {
	return readline.IsTerminal(int(os.Stdin.Fd())) && readline.IsTerminal(int(os.Stdout.Fd()))
}

// lineEditor reads lines from the terminal with github.com/chzyer/readline:
// Up and Down walk the history (every line typed in this shell, and the
// lines of shellHistoryPath, which keeps only what historyKeeps allows),
// Ctrl-L clears the screen, Tab completes command names and the ports and
// peer IDs of the peers this shell started, Ctrl-C drops the line (and on
// an empty line leaves), Ctrl-D on an empty line leaves.
//
// The history file is written here, not by readline: readline v1.5.1
// writes every line it is given to its HistoryFile, and has no way to keep
// a line in memory only (a line the shell refused, for Up to fix it).
type lineEditor struct {
	rl        *readline.Instance
	completer *shellCompleter
	hist      *os.File // the history file, appended to by next; nil when it is not kept
	closeOnce sync.Once
	closeErr  error
}

// newLineEditor opens the line editor on the terminal. A history file that
// cannot be kept is no reason to refuse the editor: the history then lives
// as long as the shell, and warn says why.
func newLineEditor(sh *shell, warn func(string)) (*lineEditor, error) {
	completer := &shellCompleter{}
	rl, err := readline.NewEx(&readline.Config{
		Prompt:                 shellPrompt,
		HistoryLimit:           shellHistoryLimit, // in memory; no HistoryFile: next keeps the file
		DisableAutoSaveHistory: true,              // saved by next
		HistorySearchFold:      true,
		AutoComplete:           completer,
		Stdout:                 sh.out,
		EOFPrompt:              "exit",
		FuncGetWidth:           terminalWidth,
	})
	if err != nil {
		return nil, fmt.Errorf("shell: open the line editor: %w", err)
	}
	lines, hist, err := openHistory(shellHistoryPath(sh.cfg.DataDir), shellHistoryLimit)
	if err != nil {
		warn(fmt.Sprintf("the shell's history is not kept after it ends: %v", err))
	}
	for _, l := range lines {
		_ = rl.SaveHistory(l) // in memory only: the editor has no file
	}
	return &lineEditor{rl: rl, completer: completer, hist: hist}, nil
}

// terminalWidth is the terminal's width, or 80 where it reports none (a
// pty whose size was never set): at width 0 the editor refuses to
// complete and garbles its redraws.
func terminalWidth() int {
	if w := readline.GetScreenWidth(); w > 0 {
		return w
	}
	return 80
}

// openHistory reads the history file at path and opens it for appending,
// mode 0600 (an existing one is narrowed to that: the history holds the
// addresses and prompts the user typed). It returns the last limit lines
// that historyKeeps allows, and rewrites the file to just those when it
// held more, held a line that historyKeeps refuses (one an older mcpv2
// kept, a secret in it), or does not end in a newline. On an error the file is not kept (nil), and the
// lines read so far are still returned.
func openHistory(path string, limit int) ([]string, *os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	all := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(b) == 0 {
		all = nil
	}
	var lines []string
	for _, l := range all {
		if historyKeeps(l) {
			lines = append(lines, l)
		}
	}
	lines = lines[max(0, len(lines)-limit):]
	if len(lines) != len(all) || len(b) > 0 && b[len(b)-1] != '\n' { // and an end cut short: the next line would join it
		if err := rewriteHistory(path, lines); err != nil {
			return lines, nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return lines, nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		return lines, nil, errors.Join(err, f.Close())
	}
	return lines, f, nil
}

// rewriteHistory replaces the file at path with lines (0600), through the
// project's one atomic writer.
func rewriteHistory(path string, lines []string) error {
	var text strings.Builder
	for _, l := range lines {
		text.WriteString(l + "\n")
	}
	return transport.WriteFile(path, []byte(text.String()))
}

func (e *lineEditor) next() (string, error) {
	line, err := e.rl.Readline()
	switch {
	case errors.Is(err, readline.ErrInterrupt):
		if strings.TrimSpace(line) == "" {
			return "", errLeave
		}
		return "", nil // the line is dropped, as in every shell
	case err != nil:
		return "", err
	}
	if strings.TrimSpace(line) != "" {
		// Up recalls any line until the shell ends (a refused one, to
		// fix it); the file keeps fewer.
		_ = e.rl.SaveHistory(line)
		if e.hist != nil && historyKeeps(line) {
			_, _ = e.hist.WriteString(line + "\n")
		}
	}
	return line, nil
}

func (*lineEditor) ownPrompt() bool { return true }

func (e *lineEditor) close() error {
	e.closeOnce.Do(func() {
		e.closeErr = e.rl.Close()
		if e.hist != nil {
			e.closeErr = errors.Join(e.closeErr, e.hist.Close())
		}
	})
	return e.closeErr
}

// credentialName matches a name that names a credential: of an option
// (--secret, --Key, --api-token) or of a query parameter (sessionId).
var credentialName = regexp.MustCompile(`(?i)secret|session|token|key|bearer|passw|auth|cred`)

// authHeader matches an Authorization header or a bearer token in a word:
// "Authorization: Bearer …", or the word bearer alone or before a blank.
var authHeader = regexp.MustCompile(`(?i)authorization|\bbearer(\s|$)`)

// historyKeeps reports whether the history file may keep line. It keeps
// only a line that the shell runs, and that carries no credential.
//
// A line the shell runs splits into words (splitWords), begins with a
// command (or is a # comment), and its options parse (parseOpts): exec's
// own first steps, which have no side effects. A line refused there (an
// unknown command, a misspelt option, an open quote) is not kept, as it
// may hold a secret typed beside a typo (ReadyTo --secrt=s3cret).
//
// A word carries a credential, in any case, when it is:
//   - an option (it begins with '-') whose name names a secret, a
//     session, a token, a key, a bearer, a password, auth or a credential:
//     --secret, --Secret=x, --key;
//   - or holds an API key's prefix, protocol.KeyPrefix (mcpv2_);
//   - or holds an Authorization header or a bearer token (authHeader);
//   - or is an address that protocol.ParseAddress decodes with a session
//     id; or has a query (after '?') with a percent-encoded key
//     (url.Query decodes session%49d to sessionId) or a key that names a
//     credential (sessionid, token); or is a URL with user info.
//
// A prompt that merely names a secret ("what is a secret key?") is kept:
// only options, API keys, Authorization or Bearer, and addresses count
// (a prompt that says Authorization or Bearer is not kept, to be safe).
// Up still recalls a line that is not kept, until the shell ends.
func historyKeeps(line string) bool {
	words, err := splitWords(line)
	if err != nil || len(words) == 0 {
		return false
	}
	if !strings.HasPrefix(words[0], "#") {
		cmd := lookupShellCmd(words[0])
		if cmd == nil {
			return false
		}
		if _, err := parseOpts(cmd.names[0], words[1:], cmd.opts); err != nil {
			return false
		}
	}
	for _, w := range words {
		if strings.HasPrefix(w, "-") {
			name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
			if credentialName.MatchString(name) {
				return false
			}
		}
		if strings.Contains(strings.ToLower(w), strings.ToLower(protocol.KeyPrefix)) || authHeader.MatchString(w) {
			return false
		}
		if a, err := protocol.ParseAddress(w); err == nil && a.SessionID != "" {
			return false
		}
		if _, q, ok := strings.Cut(w, "?"); ok {
			q, _, _ = strings.Cut(q, "#")
			for _, kv := range strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' }) {
				k, _, hasValue := strings.Cut(kv, "=")
				if strings.Contains(k, "%") || hasValue && credentialName.MatchString(k) {
					return false
				}
			}
		}
		if strings.Contains(w, "://") {
			if u, err := url.Parse(w); err == nil && u.User != nil {
				return false
			}
		}
	}
	return true
}

// shellCompleter completes, with Tab, the first word of a line as a
// command name and the others as a port or a peer ID of a peer this
// shell started (an address by the shell's one rule).
type shellCompleter struct {
	mu    sync.Mutex
	peers []string // ports and peer IDs, set by update between commands
}

// update takes the started peers' names, on the shell's goroutine between
// two commands (completion runs on the line editor's).
func (c *shellCompleter) update(peers []*shellPeer) {
	var words []string
	for _, p := range peers {
		words = append(words, strconv.Itoa(p.port), p.peerID)
	}
	c.mu.Lock()
	c.peers = words
	c.mu.Unlock()
}

// Do implements readline.AutoCompleter: the endings of the candidates that
// begin with the word before the cursor (in any case, as commands are
// read), each followed by a blank, and that word's length.
func (c *shellCompleter) Do(line []rune, pos int) ([][]rune, int) {
	head := string(line[:pos])
	start := strings.LastIndexAny(head, " \t") + 1
	word := head[start:]
	var cands []string
	if strings.TrimSpace(head[:start]) == "" {
		cands = shellCmdNames()
	} else {
		c.mu.Lock()
		cands = c.peers
		c.mu.Unlock()
	}
	var out [][]rune
	for _, cand := range cands {
		if len(cand) >= len(word) && strings.EqualFold(cand[:len(word)], word) {
			out = append(out, []rune(cand[len(word):]+" "))
		}
	}
	return out, len([]rune(word))
}
