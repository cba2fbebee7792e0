package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/chzyer/readline"
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
// Up and Down walk the history (kept in shellHistoryPath, mode 0600, without
// the lines that carry a secret), Ctrl-L clears the screen, Tab completes
// command names and the ports and peer IDs of the peers this shell started,
// Ctrl-C drops the line (and on an empty line leaves), Ctrl-D on an empty
// line leaves.
type lineEditor struct {
	rl        *readline.Instance
	completer *shellCompleter
	closeOnce sync.Once
	closeErr  error
}

// newLineEditor opens the line editor on the terminal. A history file that
// cannot be kept is no reason to refuse the editor: the history then lives
// as long as the shell, and warn says why.
func newLineEditor(sh *shell, warn func(string)) (*lineEditor, error) {
	hist := shellHistoryPath(sh.cfg.DataDir)
	if err := prepareHistory(hist); err != nil {
		warn(fmt.Sprintf("the shell's history is not kept after it ends: %v", err))
		hist = ""
	}
	completer := &shellCompleter{}
	rl, err := readline.NewEx(&readline.Config{
		Prompt:                 shellPrompt,
		HistoryFile:            hist,
		HistoryLimit:           shellHistoryLimit,
		DisableAutoSaveHistory: true, // saved by next, without secrets
		HistorySearchFold:      true,
		AutoComplete:           completer,
		Stdout:                 sh.out,
		EOFPrompt:              "exit",
		FuncGetWidth:           terminalWidth,
	})
	if err != nil {
		return nil, fmt.Errorf("shell: open the line editor: %w", err)
	}
	if hist != "" {
		// readline rewrites a history over its limit into a new file
		// created 0666 less the umask: take it back to the owner.
		_ = os.Chmod(hist, 0o600)
	}
	return &lineEditor{rl: rl, completer: completer}, nil
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

// prepareHistory creates the history file 0600 (readline would create it
// 0666 less the umask) and narrows an existing one to that: the history
// holds the addresses and prompts the user typed.
func prepareHistory(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	err = f.Chmod(0o600)
	return errors.Join(err, f.Close())
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
	if strings.TrimSpace(line) != "" && !carriesSecret(line) {
		_ = e.rl.SaveHistory(line)
	}
	return line, nil
}

func (*lineEditor) ownPrompt() bool { return true }

func (e *lineEditor) close() error {
	e.closeOnce.Do(func() { e.closeErr = e.rl.Close() })
	return e.closeErr
}

// carriesSecret reports whether a line holds a secret that the history
// file must not keep: a --secret option or a session token.
func carriesSecret(line string) bool {
	return strings.Contains(line, "--secret") || strings.Contains(line, "sessionId=")
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
