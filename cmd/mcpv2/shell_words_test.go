package main

import (
	"slices"
	"strings"
	"testing"
)

func TestShellSplitWords(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
		err  string
	}{
		{line: "", want: nil},
		{line: "   \t ", want: nil},
		{line: "PingTo addr", want: []string{"PingTo", "addr"}},
		{line: `SentTo "a quoted multi-word prompt" mcpv2://h:1/mcpv2`, want: []string{"SentTo", "a quoted multi-word prompt", "mcpv2://h:1/mcpv2"}},
		{line: `SentTo 'single "quoted"' x`, want: []string{"SentTo", `single "quoted"`, "x"}},
		{line: `a\ b c`, want: []string{"a b", "c"}},
		{line: `"say \"hi\" \\ \n"`, want: []string{`say "hi" \ \n`}},
		{line: `'it'\''s'`, want: []string{"it's"}},
		{line: `pre"mid dle"'post'`, want: []string{"premid dlepost"}},
		{line: `"" x ''`, want: []string{"", "x", ""}},
		{line: `x "?sessionId=a.b&c"`, want: []string{"x", "?sessionId=a.b&c"}},
		{line: "héllo  wörld", want: []string{"héllo", "wörld"}},
		{line: "\x0cPingTo 8001", want: []string{"PingTo", "8001"}}, // Ctrl-L where no line editor took it
		{line: "a\vb", want: []string{"a", "b"}},
		{line: `SentTo "unterminated`, err: `unterminated " quote (opened at column 8)`},
		{line: `'open`, err: `unterminated ' quote (opened at column 1)`},
		{line: `trailing\`, err: "a backslash ends the line"},
	} {
		got, err := splitWords(tc.line)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("splitWords(%q): err %v, want %q", tc.line, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
}

func TestShellParseOpts(t *testing.T) {
	spec := shellOpts{"port": true, "llm-mode": false}
	a, err := parseOpts("ReadyTo", []string{"x", "--port", "8001", "--llm-mode", "y", "--", "--port"}, spec)
	if err != nil || !slices.Equal(a.pos, []string{"x", "y", "--port"}) || a.opts["port"] != "8001" || a.opts["llm-mode"] != "true" {
		t.Fatalf("parseOpts: %+v, %v", a, err)
	}
	if a, err := parseOpts("ReadyTo", []string{"--port=9", "--llm-mode=false"}, spec); err != nil || a.opts["port"] != "9" || a.opts["llm-mode"] != "false" {
		t.Fatalf("parseOpts with =: %+v, %v", a, err)
	}
	for _, words := range [][]string{{"--bogus"}, {"--port"}, {"--llm-mode=maybe"}} {
		if _, err := parseOpts("ReadyTo", words, spec); err == nil || !strings.Contains(err.Error(), "ReadyTo") {
			t.Errorf("parseOpts(%q): err %v", words, err)
		}
	}
}

func TestShellLookupAnyCase(t *testing.T) {
	for name, want := range map[string]string{"readyto": "ReadyTo", "STOPPEER": "StopTo", "sendto": "SentTo", "Quit": "exit", "PINGTO": "PingTo"} {
		if c := lookupShellCmd(name); c == nil || c.names[0] != want {
			t.Errorf("lookupShellCmd(%q) = %v, want %s", name, c, want)
		}
	}
	if c := lookupShellCmd("ReadyToo"); c != nil {
		t.Errorf("lookupShellCmd(ReadyToo) = %v", c.names)
	}
}

// FuzzShellSplitWords: splitWords never panics, and words quoted with
// quoteWord split back into themselves.
func FuzzShellSplitWords(f *testing.F) {
	for _, s := range []string{`a "b c" 'd'`, `\`, `"`, `x\ y`, "é\t'\"'", `'it'\''s'`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words, err := splitWords(line)
		if err != nil {
			return
		}
		var q []string
		for _, w := range words {
			q = append(q, quoteWord(w))
		}
		again, err := splitWords(strings.Join(q, " "))
		if err != nil || !slices.Equal(again, words) {
			t.Fatalf("round trip of %q: %q -> %q, %v", line, words, again, err)
		}
	})
}
