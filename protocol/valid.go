package protocol

import (
	"encoding/binary"
	"unicode/utf16"
	"unicode/utf8"
)

// A call's payload is checked for being JSON more than once on its way (the
// slot on arrival, the arguments a client sends, the result it reads back),
// and most of it is string content. JSON v2 checks a string a byte at a
// time, about 1 ns a byte here (docs/benchmarks.md); sureJSON checks eight
// at a time for the bytes that end the plain run of a string (a quote, a
// backslash, a control byte, a byte of a multi-byte character) and goes a
// byte at a time only at those.
//
// It is one-sided: it says yes only for text that jsontext also accepts
// under decodeOptions (RFC 8259 JSON in UTF-8; duplicate names allowed), and
// it says no for anything it is not sure of — invalid text, but also
// nesting deeper than sureDepth — so that the caller asks jsontext, whose
// answer stands. FuzzSureJSON holds it to that.

// sureDepth is the deepest nesting sureJSON follows (the protocol allows
// MaxNestingDepth in a message); deeper text is left to jsontext.
const sureDepth = MaxNestingDepth

// Masks of the word-at-a-time string scan.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plainWord reports that none of the eight bytes of w (little-endian, as
// read) is a quote, a backslash, a control byte (< 0x20) or a byte >= 0x80:
// all eight may stand in a JSON string as they are.
func plainWord(w uint64) bool { return stopBits(w) == 0 }

// stopBits has the high bit of a byte of the result set where w has a byte
// that ends a plain run of string (see plainWord), and possibly above such
// a byte, never elsewhere. A byte below 0x80 is zero in q or s (a quote, a
// backslash) or below 0x20 exactly when subtracting from it borrows into
// its high bit (the classic haszero/hasless; a borrow from the byte below
// only follows a byte that is flagged itself); a byte >= 0x80 is flagged
// by w itself, and subtracting from it sets no high bit it lacks.
func stopBits(w uint64) uint64 {
	q := w ^ (lsb * '"')
	s := w ^ (lsb * '\\')
	return ((q - lsb) | (s - lsb) | (w - lsb*0x20) | w) & msb
}

// sureJSON reports that data is exactly one JSON value, with only JSON
// whitespace around it, that ValidJSON accepts. False means "ask ValidJSON".
func sureJSON(data []byte) bool {
	i := skipSpace(data, 0)
	end, ok := sureValue(data, i, 0)
	return ok && skipSpace(data, end) == len(data)
}

// sureValue checks the value that starts at b[i] and returns the index just
// after it; ok false means "not sure" (invalid, or beyond what it follows).
func sureValue(b []byte, i, depth int) (end int, ok bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return sureString(b, i)
	case c == '{':
		return sureObject(b, i, depth+1)
	case c == '[':
		return sureArray(b, i, depth+1)
	case c == 't':
		return i + 4, len(b)-i >= 4 && string(b[i:i+4]) == "true"
	case c == 'f':
		return i + 5, len(b)-i >= 5 && string(b[i:i+5]) == "false"
	case c == 'n':
		return i + 4, len(b)-i >= 4 && string(b[i:i+4]) == "null"
	case c == '-' || c >= '0' && c <= '9':
		return sureNumber(b, i)
	}
	return i, false
}

// sureObject checks the object that starts at b[i] == '{'.
func sureObject(b []byte, i, depth int) (int, bool) {
	if depth > sureDepth {
		return i, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		var ok bool
		if i, ok = sureString(b, i); !ok {
			return i, false
		}
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return i, false
		}
		if i, ok = sureValue(b, skipSpace(b, i+1), depth); !ok {
			return i, false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '}':
			return i + 1, true
		case ',':
			i = skipSpace(b, i+1)
		default:
			return i, false
		}
	}
}

// sureArray checks the array that starts at b[i] == '['.
func sureArray(b []byte, i, depth int) (int, bool) {
	if depth > sureDepth {
		return i, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = sureValue(b, i, depth); !ok {
			return i, false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ']':
			return i + 1, true
		case ',':
			i = skipSpace(b, i+1)
		default:
			return i, false
		}
	}
}

// sureString checks the string that starts at b[i] == '"': valid escapes
// (a \u escape of a surrogate only as half of a pair), no control bytes,
// valid UTF-8. Runs of plain bytes go eight at a time (plainRun); after a
// byte that is not plain it goes a byte at a time until sixteen plain ones
// in a row make the word-at-a-time scan worth its call again, so that
// text full of escapes or non-ASCII letters costs no more than a
// byte-at-a-time check would.
func sureString(b []byte, i int) (int, bool) {
	i++
	for {
		i += plainRun(b[i:])
		for plain := 0; plain < 16; {
			if i >= len(b) {
				return i, false
			}
			switch c := b[i]; {
			case c == '"':
				return i + 1, true
			case c == '\\':
				n := escapeLen(b[i:])
				if n == 0 {
					return i, false
				}
				i, plain = i+n, 0
			case c < 0x20:
				return i, false
			case c < utf8.RuneSelf:
				i, plain = i+1, plain+1
			default:
				r, n := utf8.DecodeRune(b[i:])
				if r == utf8.RuneError && n == 1 {
					return i, false
				}
				i, plain = i+n, 0
			}
		}
	}
}

// plainRun is the length of the run of plain string bytes (see plainWord)
// that s starts with, counted eight bytes at a time; it may stop up to
// fifteen bytes short of the end of the run.
func plainRun(s []byte) int {
	n := 0
	for len(s) >= 16 {
		if stopBits(binary.LittleEndian.Uint64(s))|stopBits(binary.LittleEndian.Uint64(s[8:16])) != 0 {
			break
		}
		s = s[16:]
		n += 16
	}
	if len(s) >= 8 && plainWord(binary.LittleEndian.Uint64(s)) {
		n += 8
	}
	return n
}

// escapeLen is the length of the valid escape at the start of e (e[0] ==
// '\\'), or 0: a \u escape of a surrogate counts only as the first of a
// high-low pair, 12 bytes.
func escapeLen(e []byte) int {
	if len(e) < 2 {
		return 0
	}
	switch e[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
	default:
		return 0
	}
	r1, ok := hex4(e[2:])
	if !ok {
		return 0
	}
	if !utf16.IsSurrogate(r1) {
		return 6
	}
	if len(e) < 12 || e[6] != '\\' || e[7] != 'u' {
		return 0
	}
	r2, ok := hex4(e[8:])
	if !ok || utf16.DecodeRune(r1, r2) == utf8.RuneError {
		return 0
	}
	return 12
}

// hex4 reads four hex digits.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// sureNumber checks the number that starts at b[i] (RFC 8259 §6); a number
// runs to the first byte that cannot continue it.
func sureNumber(b []byte, i int) (int, bool) {
	digits := func() bool { // at least one digit at i, all of them consumed
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if i >= len(b) || b[i] < '1' || b[i] > '9' || !digits() {
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return i, false
		}
	}
	// jsontext refuses a number run into a letter or digit ("1x", "01"):
	// only a delimiter or whitespace may follow.
	if i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
		default:
			return i, false
		}
	}
	return i, true
}
