package main

import (
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Text that a peer or a caller supplied (a card's name, an error message, a
// skill name in the audit log, an answer) reaches the operator's terminal
// only through appendEscaped, in one of three spellings: printable (text
// that may span lines), printableLine and oneLine (one field of a line), and
// printableJSON (a JSON document). Each keeps ordinary text as it is:
// letters of any script, marks, punctuation, symbols, emoji and spaces. It
// shows every other code point (see hidden) as the escape strconv.Quote
// would write for it (\x1b, \u202e, \U000e0041; invalid UTF-8 as \x9b), so
// that the operator sees that something was there, and nothing drives the
// terminal or reorders its line. A backslash in the text stays as it is:
// the escapes make the text safe to show, not reversible.

// escapeMode says how appendEscaped spells what it escapes.
type escapeMode int

const (
	// escapeText keeps new lines and tabs: text of several lines.
	escapeText escapeMode = iota
	// escapeLine escapes new lines and tabs as well: one field of a line.
	escapeLine
	// escapeJSON keeps new lines and tabs (a JSON document's white space)
	// and writes JSON escapes (\u202e).
	escapeJSON
)

// printable returns s for a terminal (see hidden): new lines and tabs
// stay, anything else that is not ordinary text is escaped visibly.
func printable(s string) string { return string(appendEscaped(nil, s, escapeText)) }

// printableLine is printable for one field of a line: new lines, carriage
// returns and tabs are escaped as well, so that the text cannot start a line
// of its own or move the cursor back over the line.
func printableLine(s string) string { return string(appendEscaped(nil, s, escapeLine)) }

// printableJSON returns the JSON document b with every code point that
// printable would escape written as a JSON escape (\u202e, a surrogate
// pair beyond the BMP; invalid UTF-8 as \ufffd). When b is valid JSON as
// encoding/json writes it (Marshal, Compact, Indent: no carriage return
// between tokens), the result is the same JSON value, safe to print: valid
// JSON holds such code points only inside strings, where the escapes mean
// what the raw characters meant. encoding/json itself escapes C0 controls,
// U+2028 and U+2029, but not DEL, C1 controls (U+009B, CSI), bidi or
// zero-width characters.
func printableJSON(b []byte) []byte { return appendEscaped(nil, string(b), escapeJSON) }

// hidden reports whether r, raw on a terminal, could drive it, hide text,
// or mislead the reader: controls (C0, DEL, C1), format characters (the
// bidi controls U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C, the
// zero-width U+200B–U+200D, U+2060, U+FEFF, the tags U+E0000–U+E007F…),
// line and paragraph separators, private-use, surrogate and unassigned code
// points (all that strconv.IsGraphic refuses), and the invisible fillers of
// Unicode's Other_Default_Ignorable_Code_Point (U+3164, U+115F, U+034F…).
// The one exception is a zero-width joiner inside an emoji sequence (👩‍💻):
// between two symbols it joins glyphs and hides nothing. before and after
// are the text on either side of r.
func hidden(r rune, before, after string) bool {
	if r == '\u200d' {
		p, _ := utf8.DecodeLastRuneInString(before)
		n, _ := utf8.DecodeRuneInString(after)
		return !emojiPart(p) || n == utf8.RuneError || !unicode.Is(unicode.So, n)
	}
	return !strconv.IsGraphic(r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
}

// emojiPart reports whether r may end an emoji before a joiner: a symbol,
// the emoji presentation selector, or a skin-tone modifier.
func emojiPart(r rune) bool {
	return r != utf8.RuneError && unicode.Is(unicode.So, r) || r == '\ufe0f' || r >= 0x1f3fb && r <= 0x1f3ff
}

// appendEscaped appends s to b, escaping what hidden reports (and invalid
// UTF-8) in the spelling of mode.
func appendEscaped(b []byte, s string, mode escapeMode) []byte {
	for i := 0; i < len(s); {
		var n int
		b, n = appendRuneAt(b, s, i, mode)
		i += n
	}
	return b
}

// appendRuneAt appends the code point (or invalid byte) of s at i, escaped
// as mode says, and returns how many bytes of s it took.
func appendRuneAt(b []byte, s string, i int, mode escapeMode) ([]byte, int) {
	const hex = "0123456789abcdef"
	c := s[i]
	if c >= 0x20 && c < 0x7f || (c == '\n' || c == '\t') && mode != escapeLine {
		return append(b, c), 1 // printable ASCII, and the white space that mode keeps
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && n == 1:
		if mode == escapeJSON {
			return append(b, `\ufffd`...), n
		}
		return append(b, '\\', 'x', hex[c>>4], hex[c&0xf]), n
	case !hidden(r, s[:i], s[i+n:]):
		return append(b, s[i:i+n]...), n
	case mode == escapeJSON:
		u := []rune{r}
		if r1, r2 := utf16.EncodeRune(r); r1 != unicode.ReplacementChar {
			u = []rune{r1, r2}
		}
		for _, x := range u {
			b = append(b, '\\', 'u', hex[x>>12&0xf], hex[x>>8&0xf], hex[x>>4&0xf], hex[x&0xf])
		}
		return b, n
	}
	q := strconv.QuoteRuneToASCII(r) // '\x1b', '\u202e', '\U000e0041', '\n'
	return append(b, q[1:len(q)-1]...), n
}

// oneLine is printableLine cut to at most n runes: when s does not fit, it
// ends in "…" after the whole escapes that fit before it.
func oneLine(s string, n int) string {
	var b []byte
	width := 0
	for i := 0; i < len(s); {
		start := len(b)
		var size int
		b, size = appendRuneAt(b, s, i, escapeLine)
		width += utf8.RuneCount(b[start:])
		if width > n || width > n-1 && i+size < len(s) {
			return string(b[:start]) + "…"
		}
		i += size
	}
	return string(b)
}
