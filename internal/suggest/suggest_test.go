package suggest

import "testing"

func TestNearest(t *testing.T) {
	names := []string{"h", "ping", "ask", "translate_history", "upload_file", "node", "call"}
	for _, tc := range []struct{ word, want string }{
		{"pnig", "ping"},
		{"translat_history", "translate_history"},
		{"nodee", "node"},
		{"Ping", "ping"},
		{"ping", ""},     // itself: nothing to suggest
		{"zzzzzzzz", ""}, // nothing close
		{"", ""},         // nothing typed
		{"uplod_file", "upload_file"},
		{"xk", ""}, // two letters, two edits from "ask": too far to be a slip
		{"v", ""},  // one letter is one edit from every other
		{"H", "h"}, // but a case slip of one letter is one
	} {
		if got := Nearest(tc.word, names); got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	if got := Hint("pnig", names); got != ` (did you mean "ping"?)` {
		t.Errorf("Hint = %q", got)
	}
	if got := Hint("zzzzzzzz", names); got != "" {
		t.Errorf("Hint of nothing close = %q", got)
	}
}
