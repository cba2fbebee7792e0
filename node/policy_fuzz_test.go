package node

import (
	"testing"
)

// FuzzParsePolicy feeds arbitrary policy files to the parser: it never
// panics, and an accepted policy answers Allows without panicking and keeps
// ping open to everyone.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{
		`{"grants":{"12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA":["ask","upload_file"],"*":["translate_history"]}}`,
		`{"grants":{"*":["*"]}}`,
		`{"grants":{}}`,
		`{"grants":{"bob":["ask"]}}`,
		`{"grants":{"*":[""]}}`,
		`{"grant":{}}`,
		`[`, ``, `null`, `{"grants":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy("fuzz.json", data)
		if err != nil {
			return
		}
		if !p.Allows("12D3KooWStranger", "ping") {
			t.Fatal("ping is not open")
		}
		_ = p.Allows("12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA", "ask")
	})
}
