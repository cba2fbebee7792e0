package guard

import (
	"slices"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// view is a normalised copy of a text that the rules match against, with a
// map from each of its bytes back to the span of the original text that
// produced it, so that a match can be reported and removed in the original.
type view struct {
	text string
	// start[i] and end[i] bound the unit of the original text (a rune, or an
	// escape sequence such as "\u0069") that produced byte i.
	start, end []int32
	// obf[i] says that byte i came from an obfuscating unit: a homoglyph, a
	// compatibility form (fullwidth, mathematical letters), a leetspeak
	// digit, or a letter next to an invisible character.
	obf []bool
	// words indexes where the words of text start: each entry is a word's
	// two-byte key (see wordByte) in the high bits and its offset in the
	// low offsetBits, sorted. Built on first use by wordsAt.
	words   []uint32
	indexed bool
}

// wordByte maps a word byte to 0..36, or -1.
func wordByte(c byte) int {
	switch {
	case c >= 'a' && c <= 'z':
		return int(c - 'a')
	case c >= '0' && c <= '9':
		return 26 + int(c-'0')
	case c == '_':
		return 36
	}
	return -1
}

// offsetBits holds a view offset: a view of MaxScan bytes grows at most
// sixfold under NFKD (the longest compatibility decompositions), and 2 MiB
// holds that; words past it are not indexed.
const offsetBits = 21

// wordsAt calls fn with each offset where a word starting with the two
// bytes a, b begins in the view's text (words are runs of [a-z0-9_]; the
// view is lower case).
func (v *view) wordsAt(a, b byte, fn func(p int)) {
	if !v.indexed {
		v.indexed = true
		t := v.text
		for i := 0; i+1 < len(t) && i < 1<<offsetBits; i++ {
			x := wordByte(t[i])
			if x < 0 || (i > 0 && wordByte(t[i-1]) >= 0) {
				continue
			}
			if y := wordByte(t[i+1]); y >= 0 {
				v.words = append(v.words, uint32(x*37+y)<<offsetBits|uint32(i))
			}
		}
		slices.Sort(v.words)
	}
	x, y := wordByte(a), wordByte(b)
	if x < 0 || y < 0 {
		return
	}
	key := uint32(x*37+y) << offsetBits
	i, _ := slices.BinarySearch(v.words, key)
	for ; i < len(v.words) && v.words[i]&^(1<<offsetBits-1) == key; i++ {
		fn(int(v.words[i] & (1<<offsetBits - 1)))
	}
}

// span returns the original span of the view bytes [s, e).
func (v *view) span(s, e int) (int, int) {
	if e <= s {
		e = s + 1
	}
	if e > len(v.text) {
		e = len(v.text)
	}
	if s >= e {
		return int(v.start[len(v.start)-1]), int(v.end[len(v.end)-1])
	}
	return int(v.start[s]), int(v.end[e-1])
}

// obfuscated reports whether any byte in [s, e) came from an obfuscating unit.
func (v *view) obfuscated(s, e int) bool {
	for i := s; i < e && i < len(v.obf); i++ {
		if v.obf[i] {
			return true
		}
	}
	return false
}

// viewBuilder appends bytes to a view.
type viewBuilder struct {
	buf        []byte
	start, end []int32
	obf        []bool
}

func newViewBuilder(capacity int) *viewBuilder {
	return &viewBuilder{
		buf:   make([]byte, 0, capacity),
		start: make([]int32, 0, capacity),
		end:   make([]int32, 0, capacity),
		obf:   make([]bool, 0, capacity),
	}
}

func (b *viewBuilder) add(c byte, s, e int, obf bool) {
	b.buf = append(b.buf, c)
	b.start = append(b.start, int32(s))
	b.end = append(b.end, int32(e))
	b.obf = append(b.obf, obf)
}

func (b *viewBuilder) last() byte {
	if len(b.buf) == 0 {
		return '\n'
	}
	return b.buf[len(b.buf)-1]
}

func (b *viewBuilder) view() *view {
	return &view{text: string(b.buf), start: b.start, end: b.end, obf: b.obf}
}

// unitMap maps a position in the string being folded to the original text.
// A nil unitMap is the identity: the string is the original.
type unitMap struct {
	start, end []int32
}

func (m *unitMap) span(i, size int) (int, int) {
	if m == nil {
		return i, i + size
	}
	return int(m.start[i]), int(m.end[i+size-1])
}

// homoglyphs maps letters of other scripts that look like Latin letters to
// those letters. Read-only.
var homoglyphs = map[rune]byte{
	// Cyrillic
	'а': 'a', 'в': 'b', 'е': 'e', 'ё': 'e', 'к': 'k', 'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'с': 'c',
	'т': 't', 'у': 'y', 'х': 'x', 'і': 'i', 'ї': 'i', 'ј': 'j', 'ѕ': 's', 'ԁ': 'd', 'һ': 'h', 'ӏ': 'l',
	'ԛ': 'q', 'ԝ': 'w', 'ո': 'n', 'ս': 'u', 'օ': 'o',
	'А': 'a', 'В': 'b', 'Е': 'e', 'К': 'k', 'М': 'm', 'Н': 'h', 'О': 'o', 'Р': 'p', 'С': 'c', 'Т': 't',
	'У': 'y', 'Х': 'x', 'І': 'i', 'Ј': 'j', 'Ѕ': 's', 'Ԁ': 'd', 'Ӏ': 'l',
	// Greek
	'α': 'a', 'β': 'b', 'ε': 'e', 'η': 'n', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o', 'ρ': 'p', 'τ': 't',
	'υ': 'u', 'χ': 'x', 'ϲ': 'c', 'ϳ': 'j',
	'Α': 'a', 'Β': 'b', 'Ε': 'e', 'Ζ': 'z', 'Η': 'h', 'Ι': 'i', 'Κ': 'k', 'Μ': 'm', 'Ν': 'n', 'Ο': 'o',
	'Ρ': 'p', 'Τ': 't', 'Υ': 'y', 'Χ': 'x',
	// Latin look-alikes that NFKD leaves alone
	'ı': 'i', 'ȷ': 'j', 'ɑ': 'a', 'ɡ': 'g', 'ɩ': 'i', 'ʀ': 'r', 'ʏ': 'y', 'ɴ': 'n', 'ᴀ': 'a', 'ᴇ': 'e',
	'ᴏ': 'o', 'ᴛ': 't', 'ꜱ': 's', 'ᴜ': 'u', 'ᴠ': 'v', 'ᴡ': 'w', 'ᴢ': 'z', 'ʟ': 'l', 'ᴍ': 'm', 'ᴋ': 'k',
	'ᴘ': 'p', 'ᴄ': 'c', 'ᴅ': 'd', 'ꞯ': 'q', 'ʜ': 'h', 'ɪ': 'i',
}

// invisible reports characters that render as nothing and are removed
// before matching: zero-width characters, bidirectional controls, the soft
// hyphen, Unicode tags and the other format characters (category Cf), and
// variation selectors.
func invisible(r rune) bool {
	if r < 0x80 {
		return false
	}
	if r == 0x34f || (r >= 0xfe00 && r <= 0xfe0f) || (r >= 0xe0100 && r <= 0xe01ef) || r == 0x180b || r == 0x180c || r == 0x180d {
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// blank reports characters that show as blank space but are not spaces.
func blank(r rune) bool {
	switch r {
	case 0x2800, 0x3164, 0x115f, 0x1160, 0xffa0, 0x3000:
		return true
	}
	return false
}

// tagPayload collects text hidden in Unicode tag characters (U+E0020 to
// U+E007E shadow printable ASCII), so that it can be decoded and scanned.
type tagPayload struct {
	text       []byte
	start, end int
}

// fold builds the main normalised view of s: NFKD with combining marks
// dropped (so that compatibility forms such as fullwidth and mathematical
// letters become plain letters, and accents go), lower case, invisible
// characters removed, homoglyphs mapped to Latin letters, runs of horizontal
// space collapsed to one space, CR dropped. A newline is added at both ends
// so that line-start rules need no anchors. m maps s to the original text
// (nil: s is the original). Hidden Unicode-tag text is returned separately.
func fold(s string, m *unitMap) (*view, []tagPayload) {
	b := newViewBuilder(len(s) + 2)
	b.add('\n', 0, 0, false)
	var tags []tagPayload
	var cur *tagPayload
	pendingObf := false
	var one [utf8.UTFMax]byte
	emitSpace := func(c byte, us, ue int) {
		last := b.last()
		if c == ' ' && (last == ' ' || last == '\n') {
			return
		}
		if c == '\n' && last == ' ' && len(b.buf) > 1 {
			// Replace a trailing space with the newline.
			b.buf[len(b.buf)-1] = '\n'
			b.end[len(b.end)-1] = int32(ue)
			return
		}
		b.add(c, us, ue, false)
	}
	emitRune := func(r rune, us, ue int, obf bool) {
		if r < 0x80 {
			c := byte(r)
			switch {
			case c >= 'A' && c <= 'Z':
				c += 'a' - 'A'
			case c == '\r' || c == 0:
				return
			case c == '\t':
				emitSpace(' ', us, ue)
				return
			case c == '\v' || c == '\f':
				emitSpace('\n', us, ue)
				return
			case c == ' ' || c == '\n':
				emitSpace(c, us, ue)
				return
			}
			b.add(c, us, ue, obf || pendingObf)
			pendingObf = false
			return
		}
		if unicode.IsSpace(r) || blank(r) {
			if r == 0x2028 || r == 0x2029 || r == 0x85 {
				emitSpace('\n', us, ue)
			} else {
				emitSpace(' ', us, ue)
			}
			return
		}
		if c, ok := homoglyphs[r]; ok {
			b.add(c, us, ue, true)
			pendingObf = false
			return
		}
		r = unicode.ToLower(r)
		n := utf8.EncodeRune(one[:], r)
		for i := 0; i < n; i++ {
			b.add(one[i], us, ue, obf || pendingObf)
		}
		pendingObf = false
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		us, ue := m.span(i, size)
		i += size
		if r >= 0xe0000 && r <= 0xe007f {
			if r >= 0xe0020 && r <= 0xe007e {
				if cur == nil || cur.end != us {
					tags = append(tags, tagPayload{start: us})
					cur = &tags[len(tags)-1]
				}
				cur.text = append(cur.text, byte(r-0xe0000))
				cur.end = ue
			}
			pendingObf = true
			continue
		}
		if r == utf8.RuneError && size == 1 {
			emitSpace(' ', us, ue)
			continue
		}
		if invisible(r) {
			pendingObf = true
			continue
		}
		if r < 0x80 {
			emitRune(r, us, ue, false)
			continue
		}
		if _, ok := homoglyphs[r]; ok {
			emitRune(r, us, ue, true)
			continue
		}
		enc := s[i-size : i]
		kd := norm.NFKD.PropertiesString(enc).Decomposition()
		if kd == nil {
			if unicode.Is(unicode.Mn, r) {
				continue
			}
			emitRune(r, us, ue, false)
			continue
		}
		d := norm.NFD.PropertiesString(enc).Decomposition()
		compat := string(kd) != string(d)
		for j := 0; j < len(kd); {
			r2, sz := utf8.DecodeRune(kd[j:])
			j += sz
			if unicode.Is(unicode.Mn, r2) {
				continue
			}
			emitRune(r2, us, ue, compat && !unicode.IsSpace(r2))
		}
	}
	end := 0
	if m == nil {
		end = len(s)
	} else if len(m.end) > 0 {
		end = int(m.end[len(m.end)-1])
	}
	b.add('\n', end, end, false)
	// Drop payloads too short to carry text (a flag emoji's region tags).
	kept := tags[:0]
	for _, t := range tags {
		if len(t.text) >= 8 {
			kept = append(kept, t)
		}
	}
	return b.view(), kept
}

// leet maps the leetspeak characters to the letters they stand for, or
// returns 0.
func leet(c byte) byte {
	switch c {
	case '0':
		return 'o'
	case '1':
		return 'i'
	case '3':
		return 'e'
	case '4', '@':
		return 'a'
	case '5', '$':
		return 's'
	case '7':
		return 't'
	}
	return 0
}

// squash builds the letters-only view of a folded view: leetspeak
// characters become letters and everything that is not a letter is dropped,
// so that "i g n o r e", "i.g.n.o.r.e" and "1gn0r3" all read "ignore".
// Squash rules are written without spaces.
func squash(v *view) *view {
	b := newViewBuilder(len(v.text))
	for i := 0; i < len(v.text); i++ {
		c := v.text[i]
		obf := v.obf[i]
		switch {
		case c >= 'a' && c <= 'z':
		default:
			l := leet(c)
			if l == 0 || !leetContext(v.text, i) {
				continue
			}
			c, obf = l, true
		}
		b.add(c, int(v.start[i]), int(v.end[i]), obf)
	}
	return b.view()
}

// leetContext reports whether the character at i sits inside a word, next to
// a letter or another leet character.
func leetContext(s string, i int) bool {
	isWordish := func(c byte) bool { return (c >= 'a' && c <= 'z') || leet(c) != 0 }
	return (i > 0 && isWordish(s[i-1])) || (i+1 < len(s) && isWordish(s[i+1]))
}

// rot13 returns v with its letters rotated by 13 (same length, same map).
func rot13(v *view) *view {
	out := []byte(v.text)
	for i, c := range out {
		if c >= 'a' && c <= 'z' {
			out[i] = 'a' + (c-'a'+13)%26
		}
	}
	return &view{text: string(out), start: v.start, end: v.end, obf: v.obf}
}

// reversed returns v with its bytes in reverse order (ASCII only: squash
// views hold only letters), with the maps reversed too.
func reversed(v *view) *view {
	n := len(v.text)
	out := make([]byte, n)
	start := make([]int32, n)
	end := make([]int32, n)
	for i := 0; i < n; i++ {
		out[n-1-i] = v.text[i]
		start[n-1-i] = v.start[i]
		end[n-1-i] = v.end[i]
	}
	return &view{text: string(out), start: start, end: end, obf: v.obf}
}

// spanRev returns the original span of reversed-view bytes [s, e): the
// bytes run backwards through the original.
func (v *view) spanRev(s, e int) (int, int) {
	if e > len(v.text) {
		e = len(v.text)
	}
	if s >= e {
		return 0, 0
	}
	return int(v.start[e-1]), int(v.end[s])
}
