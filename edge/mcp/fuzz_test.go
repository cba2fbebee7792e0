package mcp

import "testing"

// FuzzParsePrompts: any bytes are a prompts file or a reason naming it;
// every prompt loaded renders with its required arguments, within the cap.
func FuzzParsePrompts(f *testing.F) {
	for _, s := range []string{
		`{"prompts":[{"name":"review","description":"d","arguments":[{"name":"code","required":true}],"template":"Review {{.code}}"}]}`,
		`{"prompts":[{"name":"e","arguments":[{"name":"tone","enum":["a","b"]}],"template":"{{if eq .tone \"a\"}}A{{end}}"}]}`,
		`{"prompts":[{"name":"loop","template":"{{range $i := .x}}{{end}}"}]}`,
		`{"prompts":[{"name":"bad name!","template":"x"}]}`,
		`{"prompts":[{"name":"x","template":"{{.undeclared}}"}]}`,
		`{"prompts":null}`, `[]`, `{"prompts":[{}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := ParsePrompts("fuzz.json", data)
		if err != nil {
			return
		}
		for _, p := range ps {
			args := map[string]string{}
			for _, a := range p.Arguments {
				if a.Required {
					args[a.Name] = "v"
					if len(a.Enum) > 0 {
						args[a.Name] = a.Enum[0]
					}
				}
			}
			if text, perr := p.render(args); perr == nil && len(text) > maxRendered {
				t.Fatalf("rendered %d bytes, over the cap", len(text))
			}
		}
	})
}
