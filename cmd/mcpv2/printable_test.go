package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPrintable: what a peer or a caller can put in a text the CLI prints,
// and what the operator sees of it.
func TestPrintable(t *testing.T) {
	for _, tc := range []struct {
		name, in, text, line string
	}{
		{"ascii", "hello, world", "hello, world", "hello, world"},
		{"letters of any script", "héllo Ωμέγα 日本語 עברית العربية", "héllo Ωμέγα 日本語 עברית العربية", "héllo Ωμέγα 日本語 עברית العربية"},
		{"emoji", "ok 🙂 ❤️ 👍🏽 🇫🇷", "ok 🙂 ❤️ 👍🏽 🇫🇷", "ok 🙂 ❤️ 👍🏽 🇫🇷"},
		{"emoji joined", "👩‍💻 👨‍👩‍👧 🏳️‍🌈 👩🏽‍🚀", "👩‍💻 👨‍👩‍👧 🏳️‍🌈 👩🏽‍🚀", "👩‍💻 👨‍👩‍👧 🏳️‍🌈 👩🏽‍🚀"},
		{"spaces and backslash", "a\u00a0b\u3000c \\x1b", "a\u00a0b\u3000c \\x1b", "a\u00a0b\u3000c \\x1b"},
		{"CSI", "a\x1b[31mred\x1b[0m", `a\x1b[31mred\x1b[0m`, `a\x1b[31mred\x1b[0m`},
		{"OSC title", "\x1b]0;owned\x07", `\x1b]0;owned\a`, `\x1b]0;owned\a`},
		{"OSC 8 link", "\x1b]8;;http://evil\x1b\\x\x1b]8;;\x1b\\", `\x1b]8;;http://evil\x1b\x\x1b]8;;\x1b\`, `\x1b]8;;http://evil\x1b\x\x1b]8;;\x1b\`},
		{"C1 CSI encoded", "\u009b2J", `\u009b2J`, `\u009b2J`},
		{"C1 CSI raw byte", "\x9b2J", `\x9b2J`, `\x9b2J`},
		{"invalid UTF-8", "a\xff\xc3(", `a\xff\xc3(`, `a\xff\xc3(`},
		{"NUL BEL BS DEL", "\x00\x07\x08\x7f", `\x00\a\b\x7f`, `\x00\a\b\x7f`},
		{"new line, tab, carriage return", "a\nb\tc\rd", "a\nb\tc\\rd", `a\nb\tc\rd`},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`, `abc\u202edcba`},
		{"bidi embeddings and isolates", "\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069", `\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069`, `\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069`},
		{"bidi marks", "\u200e\u200f\u061c", `\u200e\u200f\u061c`, `\u200e\u200f\u061c`},
		{"zero width", "p\u200bi\u200cn\u200dg\u2060\ufeff", `p\u200bi\u200cn\u200dg\u2060\ufeff`, `p\u200bi\u200cn\u200dg\u2060\ufeff`},
		{"joiner after an emoji, before a letter", "🙂\u200dx", `🙂\u200dx`, `🙂\u200dx`},
		{"joiner at the ends", "\u200d🙂\u200d", `\u200d🙂\u200d`, `\u200d🙂\u200d`},
		{"line and paragraph separators, NEL", "a\u2028b\u2029c\u0085", `a\u2028b\u2029c\u0085`, `a\u2028b\u2029c\u0085`},
		{"tags", "x\U000e0041\U000e007f", `x\U000e0041\U000e007f`, `x\U000e0041\U000e007f`},
		{"invisible fillers", "\u3164\u115f\u034f", `\u3164\u115f\u034f`, `\u3164\u115f\u034f`},
		{"private use and unassigned", "\ue000\U0010fffd\U000effff", `\ue000\U0010fffd\U000effff`, `\ue000\U0010fffd\U000effff`},
		{"soft hyphen", "in\u00advisible", `in\u00advisible`, `in\u00advisible`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := printable(tc.in); got != tc.text {
				t.Errorf("printable(%q) = %q; want %q", tc.in, got, tc.text)
			}
			if got := printableLine(tc.in); got != tc.line {
				t.Errorf("printableLine(%q) = %q; want %q", tc.in, got, tc.line)
			}
		})
	}
}

// TestPrintableJSON: the same JSON value, with what printable escapes
// written as JSON escapes.
func TestPrintableJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"name":"ok 🙂 日本語"}`, `{"name":"ok 🙂 日本語"}`},
		{"{\n  \"a\": [\n\t1\n  ]\n}", "{\n  \"a\": [\n\t1\n  ]\n}"},
		{`{"name":"x` + "\u202e" + `y"}`, `{"name":"x\u202ey"}`},
		{`{"name":"` + "\u009b\u200b\x7f" + `"}`, `{"name":"\u009b\u200b\u007f"}`},
		{`{"name":"` + "\U000e0041" + `"}`, `{"name":"\udb40\udc41"}`},
		{`{"name":"` + "\xff" + `"}`, `{"name":"\ufffd"}`},
		{`{"name":"\u001b[2J"}`, `{"name":"\u001b[2J"}`},
	} {
		got := string(printableJSON([]byte(tc.in)))
		if got != tc.want {
			t.Errorf("printableJSON(%q) = %q; want %q", tc.in, got, tc.want)
		}
		var a, b any
		if err := json.Unmarshal([]byte(tc.in), &a); err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if err := json.Unmarshal([]byte(got), &b); err != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("printableJSON(%q) = %q: %v, %v; want the same value", tc.in, got, b, err)
		}
	}
}

// TestOneLine: one escaped line of at most n runes; an escape is never cut.
func TestOneLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\x1b[1mb\n\tc", 80, `a\x1b[1mb\n\tc`},
		{"abcdef", 6, "abcdef"},
		{"abcdefg", 6, "abcde…"},
		{"日本語日本語日本語", 4, "日本語…"},
		{"ab\u202ecd", 6, "ab…"},
		{"ab\u202e", 8, `ab\u202e`},
		{"ab\u202e", 7, "ab…"},
		{"\x1b", 1, "…"},
	} {
		if got := oneLine(tc.in, tc.n); got != tc.want {
			t.Errorf("oneLine(%q, %d) = %q; want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// FuzzPrintable: whatever the text, what printable and printableLine return
// is valid UTF-8 without a code point that hidden reports (printable keeps
// new lines and tabs), and ordinary text comes back unchanged; a JSON
// document keeps its value.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"", "hello 🙂", "a\x1b[31mb", "\x1b]0;t\x07", "\u009b\x9b", "x\u202ey\u200b",
		"👩‍💻", "\u200d🙂\u200d", "a\nb\r\tc", "\xff\xfe", `{"a":"b` + "\u202e" + `"}`, "\U000e0041\u3164"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		text, line := printable(s), printableLine(s)
		for _, out := range []struct {
			name, s string
			keep    string
		}{{"printable", text, "\n\t"}, {"printableLine", line, ""}} {
			if !utf8.ValidString(out.s) {
				t.Fatalf("%s(%q) = %q: not valid UTF-8", out.name, s, out.s)
			}
			for i, r := range out.s {
				if hidden(r, out.s[:i], out.s[i+utf8.RuneLen(r):]) && !strings.ContainsRune(out.keep, r) {
					t.Fatalf("%s(%q) = %q: %U raw at %d", out.name, s, out.s, r, i)
				}
			}
		}
		ordinary := utf8.ValidString(s)
		for i, r := range s {
			if !ordinary {
				break
			}
			ordinary = !hidden(r, s[:i], s[i+utf8.RuneLen(r):]) || r == '\n' || r == '\t'
		}
		if ordinary && text != s {
			t.Fatalf("printable(%q) = %q: want it unchanged", s, text)
		}
		for _, n := range []int{1, 5, 80} {
			o := oneLine(s, n)
			if utf8.RuneCountInString(o) > n {
				t.Fatalf("oneLine(%q, %d) = %q: longer than %d", s, n, o, n)
			}
			if cut, ok := strings.CutSuffix(o, "…"); ok && o != line {
				if !strings.HasPrefix(line, cut) {
					t.Fatalf("oneLine(%q, %d) = %q: not a prefix of %q", s, n, o, line)
				}
			} else if o != line {
				t.Fatalf("oneLine(%q, %d) = %q; want %q", s, n, o, line)
			}
		}
		var compact bytes.Buffer
		if json.Compact(&compact, []byte(s)) == nil {
			j := printableJSON(compact.Bytes())
			var a, b any
			if json.Unmarshal([]byte(s), &a) != nil || json.Unmarshal(j, &b) != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("printableJSON(%q) = %q: not the same JSON value", compact.Bytes(), j)
			}
			for i, r := range string(j) {
				if hidden(r, string(j[:i]), string(j[i+utf8.RuneLen(r):])) && !strings.ContainsRune("\n\t", r) {
					t.Fatalf("printableJSON(%q) = %q: %U raw at %d", s, j, r, i)
				}
			}
		}
	})
}
