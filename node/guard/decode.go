package guard

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds on the work spent decoding hidden payloads in one Scan.
const (
	// maxDepth is how deep decoded payloads are decoded again (base64
	// inside hex, say).
	maxDepth = 2
	// maxPayload is how many bytes of one encoded run are decoded.
	maxPayload = 16 << 10
	// decodeBudget is how many decoded bytes one Scan rescans in all.
	decodeBudget = 64 << 10
	// maxPayloads is how many encoded runs one Scan decodes.
	maxPayloads = 64
	// minRun is the shortest base64 or hex run that is decoded.
	minRun = 16
)

// payload is decoded text hidden in an encoded run of the original.
type payload struct {
	text       string
	start, end int // the run in the original text
}

// unescape decodes the escape sequences of s inline: \uXXXX, \u{X…},
// \xHH, HTML character references (&#105; &#x69; &lt; …) and URL
// percent-encoding (%20). It returns nil when s holds none, so that the
// caller skips the extra view.
func unescape(s string) (string, *unitMap) {
	if !strings.ContainsAny(s, `\&%`) {
		return "", nil
	}
	var out []byte
	var m unitMap
	decoded := 0
	emit := func(c byte, us, ue int) {
		out = append(out, c)
		m.start = append(m.start, int32(us))
		m.end = append(m.end, int32(ue))
	}
	emitRune := func(r rune, us, ue int) {
		var buf [utf8.UTFMax]byte
		n := utf8.EncodeRune(buf[:], r)
		for i := 0; i < n; i++ {
			emit(buf[i], us, ue)
		}
		decoded++
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && (s[i+1] == 'u' || s[i+1] == 'U'):
			if i+2 < len(s) && s[i+2] == '{' {
				if j := strings.IndexByte(s[i+3:min(len(s), i+12)], '}'); j > 0 {
					if r, ok := parseHex(s[i+3 : i+3+j]); ok {
						emitRune(r, i, i+4+j)
						i += 4 + j
						continue
					}
				}
			} else if i+6 <= len(s) {
				if r, ok := parseHex(s[i+2 : i+6]); ok {
					emitRune(r, i, i+6)
					i += 6
					continue
				}
			}
		case c == '\\' && i+3 < len(s) && s[i+1] == 'x':
			if r, ok := parseHex(s[i+2 : i+4]); ok {
				emit(byte(r), i, i+4)
				decoded++
				i += 4
				continue
			}
		case c == '%' && i+2 < len(s):
			if r, ok := parseHex(s[i+1 : i+3]); ok {
				emit(byte(r), i, i+3)
				decoded++
				i += 3
				continue
			}
		case c == '&':
			if j := strings.IndexByte(s[i+1:min(len(s), i+12)], ';'); j > 0 {
				ent := s[i+1 : i+1+j]
				if r, ok := entity(ent); ok {
					emitRune(r, i, i+2+j)
					i += 2 + j
					continue
				}
			}
		}
		emit(c, i, i+1)
		i++
	}
	if decoded == 0 {
		return "", nil
	}
	return string(out), &m
}

func parseHex(s string) (rune, bool) {
	if s == "" || len(s) > 8 {
		return 0, false
	}
	var r rune
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	if r > unicode.MaxRune {
		return utf8.RuneError, true
	}
	return r, true
}

// entity decodes an HTML character reference without its & and ;.
func entity(s string) (rune, bool) {
	if len(s) > 1 && s[0] == '#' {
		if s[1] == 'x' || s[1] == 'X' {
			return parseHex(s[2:])
		}
		var r rune
		for i := 1; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' || r > unicode.MaxRune {
				return 0, false
			}
			r = r*10 + rune(s[i]-'0')
		}
		if r > unicode.MaxRune {
			r = utf8.RuneError
		}
		return r, len(s) > 1
	}
	switch strings.ToLower(s) {
	case "lt":
		return '<', true
	case "gt":
		return '>', true
	case "amp":
		return '&', true
	case "quot":
		return '"', true
	case "apos":
		return '\'', true
	case "nbsp":
		return ' ', true
	case "sol":
		return '/', true
	case "lsqb":
		return '[', true
	case "rsqb":
		return ']', true
	case "verbar", "vert":
		return '|', true
	}
	return 0, false
}

func isB64(c byte) bool {
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' || c == '-' || c == '_'
}

func isHexDigit(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// encodedRuns finds base64 and hex runs in s and decodes those that hold
// text, spending at most budget decoded bytes; it returns the payloads and
// what is left of the budget.
func encodedRuns(s string, budget, count int) ([]payload, int, int) {
	var out []payload
	for i := 0; i < len(s) && budget > 0 && count < maxPayloads; {
		if !isB64(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isB64(s[j]) {
			j++
		}
		runEnd := j
		for runEnd < len(s) && runEnd-j < 2 && s[runEnd] == '=' {
			runEnd++
		}
		run := s[i:j]
		start := i
		i = runEnd
		if len(run) < minRun {
			continue
		}
		text, ok := decodeRun(run)
		if !ok {
			continue
		}
		if len(text) > budget {
			text = text[:budget]
		}
		budget -= len(text)
		count++
		out = append(out, payload{text: text, start: start, end: runEnd})
	}
	return out, budget, count
}

// decodeRun decodes a run as hex (when it is all hex digits, optionally
// after 0x) or as base64 (standard or URL alphabet, padding optional), and
// returns the result when it reads as text.
func decodeRun(run string) (string, bool) {
	h := run
	if len(h) > 2 && h[0] == '0' && (h[1] == 'x' || h[1] == 'X') {
		h = h[2:]
	}
	allHex := true
	for i := 0; i < len(h); i++ {
		if !isHexDigit(h[i]) {
			allHex = false
			break
		}
	}
	if allHex && len(h) >= minRun {
		if len(h) > 2*maxPayload {
			h = h[:2*maxPayload]
		}
		h = h[:len(h)&^1]
		b, err := hex.DecodeString(h)
		if err == nil && textual(b) {
			return string(b), true
		}
		return "", false
	}
	r := run
	if len(r) > maxPayload*4/3 {
		r = r[:(maxPayload*4/3)&^3]
	}
	if len(r)%4 == 1 {
		r = r[:len(r)-1]
	}
	enc := base64.RawStdEncoding
	if strings.ContainsAny(r, "-_") {
		enc = base64.RawURLEncoding
	}
	b, err := enc.DecodeString(r)
	if err != nil {
		return "", false
	}
	if !textual(b) {
		return "", false
	}
	return string(b), true
}

// textual reports whether b is UTF-8 text: at least 90% printable or space,
// with at least four letters.
func textual(b []byte) bool {
	if len(b) < 8 || !utf8.Valid(b) {
		return false
	}
	total, good, letters := 0, 0, 0
	for _, r := range string(b) {
		total++
		if unicode.IsPrint(r) || unicode.IsSpace(r) {
			good++
		}
		if unicode.IsLetter(r) {
			letters++
		}
	}
	return letters >= 4 && good*10 >= total*9
}
