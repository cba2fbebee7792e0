package protocol

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// sureCases are texts with what jsontext says of them (under
// decodeOptions) and whether sureJSON must be sure of them: every ordinary
// shape is, and each way of being invalid is not.
var sureCases = []struct {
	in    string
	valid bool // jsontext's answer
	sure  bool // sureJSON must say true (only when valid)
}{
	{`{}`, true, true},
	{` {"a" : [1, -2.5e+3, 0, true, false, null, "x"]} `, true, true},
	{`"` + strings.Repeat("plain text ", 100) + `"`, true, true},
	{`"tab\tquote\"slash\/back\\ \b\f\n\r"`, true, true},
	{`"\u00e9\u20AC"`, true, true},
	{`"\ud83d\ude00"`, true, true},    // a surrogate pair
	{`"héllo wörld € 😀"`, true, true}, // UTF-8 in place
	{`[[[]],{"a":{"b":{}}}]`, true, true},
	{`{"a":1,"a":2}`, true, true}, // a repeated name: allowed, the last wins
	{`-0`, true, true},
	{`1E5`, true, true},
	{strings.Repeat("[", MaxNestingDepth) + strings.Repeat("]", MaxNestingDepth), true, true},
	{strings.Repeat("[", MaxNestingDepth+1) + strings.Repeat("]", MaxNestingDepth+1), true, false}, // deeper: jsontext's to say
	{``, false, false},
	{` `, false, false},
	{`{`, false, false},
	{`{"a"}`, false, false},
	{`{"a":1,}`, false, false},
	{`[1,]`, false, false},
	{`[1 2]`, false, false},
	{`01`, false, false},
	{`1.`, false, false},
	{`.5`, false, false},
	{`-`, false, false},
	{`1e`, false, false},
	{`1x`, false, false},
	{`tru`, false, false},
	{`nul`, false, false},
	{`truex`, false, false},
	{`"abc`, false, false},
	{`"a` + "\x01" + `b"`, false, false},
	{`"a` + "\n" + `b"`, false, false},
	{`"bad \x escape"`, false, false},
	{`"\u12"`, false, false},
	{`"\uzzzz"`, false, false},
	{`"\ud800"`, false, false},         // a lone high surrogate
	{`"\udc00"`, false, false},         // a lone low surrogate
	{`"\ud800\u0041"`, false, false},   // a high surrogate with no low one
	{"\"\xff\"", false, false},         // not UTF-8
	{"\"\xc3\"", false, false},         // cut short
	{"\"\xed\xa0\x80\"", false, false}, // an encoded surrogate
	{`{} {}`, false, false},
	{`{"a":1}x`, false, false},
	{"\u00a0{}", false, false}, // not JSON whitespace
}

func TestSureJSON(t *testing.T) {
	for _, c := range sureCases {
		if got := jsontext.Value(c.in).IsValid(decodeOptions); got != c.valid {
			t.Fatalf("jsontext says %v of %q; the case says %v", got, c.in, c.valid)
		}
		if got := sureJSON([]byte(c.in)); got != c.sure {
			t.Errorf("sureJSON(%.60q) = %v, want %v", c.in, got, c.sure)
		}
		if got := ValidJSON([]byte(c.in)); got != c.valid {
			t.Errorf("ValidJSON(%.60q) = %v, want %v", c.in, got, c.valid)
		}
	}
}

// TestPlainWord checks the word test against the byte test for every byte
// value at every position of a word of plain letters.
func TestPlainWord(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			w := uint64(0)
			for i := 7; i >= 0; i-- {
				w = w<<8 | uint64(b[i])
			}
			want := c >= 0x20 && c < 0x80 && c != '"' && c != '\\'
			if got := plainWord(w); got != want {
				t.Fatalf("plainWord with %#x at %d = %v, want %v", c, pos, got, want)
			}
		}
	}
}

// FuzzSureJSON: sureJSON is never sure of text jsontext refuses, and is
// sure of every valid text it is given that nests no deeper than it
// follows (so that ValidJSON seldom needs jsontext).
func FuzzSureJSON(f *testing.F) {
	for _, c := range sureCases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sure := sureJSON(data)
		valid := jsontext.Value(data).IsValid(decodeOptions)
		if sure && !valid {
			t.Fatalf("sureJSON accepted %q, which jsontext refuses", data)
		}
		if valid && !sure {
			var sh shape
			sh.scan(trimJSONSpace(data))
			if !sh.tooDeep {
				t.Fatalf("sureJSON is not sure of %q, valid and shallow", data)
			}
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	args := []byte(`{"payload":"` + strings.Repeat("x", 1024) + `"}`)
	mixed := []byte(`{"query":"` + strings.Repeat("lorem ipsum dolor \u00e9 \\n ", 40) + `","n":[1,2.5,-3e4],"ok":true}`)
	for _, bc := range []struct {
		name string
		in   []byte
	}{{"ping_1KiB", args}, {"mixed", mixed}} {
		b.Run(bc.name+"/jsontext", func(b *testing.B) {
			b.SetBytes(int64(len(bc.in)))
			for b.Loop() {
				if !jsontext.Value(bc.in).IsValid(decodeOptions) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(bc.name+"/ValidJSON", func(b *testing.B) {
			b.SetBytes(int64(len(bc.in)))
			for b.Loop() {
				if !ValidJSON(bc.in) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

// TestVerbatim holds verbatimString and AppendJSONString to encoding/json: for every byte value at
// every position of strings long enough for the word-at-a-time loop and
// its tail, verbatimString says yes exactly when json.Marshal writes the string
// as it is between quotes.
func TestVerbatim(t *testing.T) {
	for _, n := range []int{1, 8, 19, 40} {
		for pos := range n {
			for c := range 256 {
				b := []byte(strings.Repeat("k", n))
				b[pos] = byte(c)
				q, _ := json.Marshal(string(b))
				want := string(q) == `"`+string(b)+`"`
				if got := verbatimString(string(b)); got != want {
					t.Fatalf("verbatimString(%q) = %v, want %v", b, got, want)
				}
				if got := AppendJSONString(nil, string(b)); string(got) != string(q) {
					t.Fatalf("AppendJSONString(%q) = %s, want %s", b, got, q)
				}
			}
		}
	}
}

func BenchmarkAppendJSONString(b *testing.B) {
	id := "12D3KooWDGWf3A9cQHJfxnotujMP8625N3TAY5t7dBodDwwrPjBZ"
	buf := make([]byte, 0, 128)
	for b.Loop() {
		buf = AppendJSONString(buf[:0], id)
	}
}
