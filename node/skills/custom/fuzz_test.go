package custom

import (
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/node/skills"
)

// FuzzParse feeds arbitrary custom-skill files to the parser: it never
// panics, and whatever it accepts registers into a fresh registry (names are
// valid and unique, schemas compile).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"skills":[{"name":"greet","description":"Greets","tags":["demo"],"input_schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]},"handler":{"type":"template","template":"Hello, {{.name}}!"}}]}`,
		`{"skills":[{"name":"hook","description":"d","handler":{"type":"http","url":"http://127.0.0.1:9/x","timeout_s":2}}]}`,
		`{"skills":[]}`,
		`{"skills":[{"name":"bad name","handler":{"type":"template","template":"x"}}]}`,
		`{"skills":[{"name":"t","handler":{"type":"template","template":"{{"}}]}`,
		`{"skills":[{"name":"m","handler":{"type":"mcp","tool":"x"}}]}`,
		`{"skills":[{"name":"a","handler":{"type":"template","template":"x"}},{"name":"a","handler":{"type":"template","template":"y"}}]}`,
		`{"skills":[{"name":"s","input_schema":{"type":"strnig"},"handler":{"type":"template","template":"x"}}]}`,
		`{"skills":[{"name":"g","guard":false,"handler":{"type":"template","template":"x"}},{"name":"h","guard":{"q":"sql","*":"off","p":"sql+prompt"},"handler":{"type":"template","template":"x"}}]}`,
		`{"skills":[{"name":"g","guard":{"q":"html"},"handler":{"type":"template","template":"x"}}]}`,
		`[`, ``, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// No command handlers: they would resolve programs on this machine.
		if strings.Contains(string(data), "command") {
			return
		}
		l, err := New(skills.NewRegistry(nil), WithScratchDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		got, err := l.Parse(data)
		if err != nil {
			return
		}
		if _, err := l.Register(got); err != nil {
			t.Fatalf("accepted file does not register: %v\n%s", err, data)
		}
	})
}
