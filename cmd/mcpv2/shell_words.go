package main

import (
	"errors"
	"fmt"
	"strings"
)

// splitWords splits a shell line into words as a POSIX shell would, for the
// part of its grammar that a prompt needs: blanks separate words (a form
// feed, Ctrl-L, and a vertical tab are blanks too, so that a Ctrl-L typed
// where no line editor clears the screen is not part of a word); '…' keeps
// everything literally; "…" keeps everything but lets a backslash escape " and
// \; outside quotes a backslash escapes any character. Adjacent pieces join
// ("a"'b'c is one word), and "" is an empty word. An unterminated quote or a
// trailing backslash is an error that says which. Nothing else is special:
// no variables, globs or comments inside a line.
//
// It is written here rather than taken from a library (google/shlex is the
// only candidate in reach and would be a new module): the grammar is these
// sixty lines, and owning it lets the error messages name the open quote.
func splitWords(line string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
		quote  rune // 0, '\'' or '"'
		escape bool // the previous rune was a backslash
		opened int  // byte offset of the open quote, for the message
	)
	for i, r := range line {
		switch {
		case escape:
			escape = false
			if quote == '"' && r != '"' && r != '\\' {
				cur.WriteRune('\\') // POSIX: inside "…" only some escapes mean anything
			}
			cur.WriteRune(r)
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case quote == '"':
			switch r {
			case '"':
				quote = 0
			case '\\':
				escape = true
			default:
				cur.WriteRune(r)
			}
		case r == '\\':
			escape, inWord = true, true
		case r == '\'' || r == '"':
			quote, inWord, opened = r, true, i
		case r == ' ' || r == '\t' || r == '\r' || r == '\n' || r == '\f' || r == '\v':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	switch {
	case quote != 0:
		return nil, fmt.Errorf("unterminated %c quote (opened at column %d): close it, or escape it with a backslash", quote, opened+1)
	case escape:
		return nil, errors.New("a backslash ends the line: nothing follows it to escape")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// quoteWord renders w so that splitWords reads it back as the one word w.
func quoteWord(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\r\n'\"\\") {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// shellOpts are the options of one shell command: name (without dashes) →
// whether it takes a value.
type shellOpts map[string]bool

// shellArgs are a command's words sorted into positional arguments and
// options.
type shellArgs struct {
	pos  []string
	opts map[string]string // a boolean option given bare is "true"
}

// parseOpts sorts words into positional arguments and the options of spec,
// which may come anywhere: --name value, --name=value, and for a boolean
// --name or --name=true|false. "--" ends the options, so that a prompt may
// begin with a dash. An unknown option or a missing value is an error that
// names the command.
func parseOpts(cmd string, words []string, spec shellOpts) (shellArgs, error) {
	a := shellArgs{opts: map[string]string{}}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "--" {
			a.pos = append(a.pos, words[i+1:]...)
			break
		}
		if !strings.HasPrefix(w, "--") || len(w) == 2 {
			a.pos = append(a.pos, w)
			continue
		}
		name, val, hasVal := strings.Cut(w[2:], "=")
		takesValue, known := spec[name]
		switch {
		case !known:
			return shellArgs{}, fmt.Errorf("%s: unknown option --%s (type help for the options of each command)", cmd, name)
		case takesValue && !hasVal:
			if i+1 >= len(words) {
				return shellArgs{}, fmt.Errorf("%s: --%s needs a value", cmd, name)
			}
			i++
			val = words[i]
		case !takesValue && !hasVal:
			val = "true"
		case !takesValue && val != "true" && val != "false":
			return shellArgs{}, fmt.Errorf("%s: --%s is true or false, not %q", cmd, name, val)
		}
		a.opts[name] = val
	}
	return a, nil
}
