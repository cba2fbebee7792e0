package mcp

import (
	"encoding/json"
	"testing"
)

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

// FuzzAsksTaskBody: any bytes are a tools/call that asks for a task, or
// not; one that does is a JSON object whose method is tools/call and
// whose params.task is an object.
func FuzzAsksTaskBody(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nap","arguments":{},"task":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nap","task":{"ttl":60000}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nap","task":null}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"task":{}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"task":{}}}]`, `"task"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !asksTaskBody(data) {
			return
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				Task map[string]any `json:"task"`
			} `json:"params"`
		}
		if err := json.Unmarshal(data, &m); err != nil || m.Method != "tools/call" || m.Params.Task == nil {
			t.Fatalf("%q asks for a task, but decodes as %+v (%v)", data, m, err)
		}
	})
}

// FuzzParseTaskListen: any bytes are a subscriptions/listen for task
// notifications, or not; one that is has that method, a request ID that
// is not null, and notifications.taskIds an array, and declaresTasks
// never panics on its _meta.
func FuzzParseTaskListen(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"l1","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}},"notifications":{"taskIds":["a","b"]}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"taskIds":[]}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["a"]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":"a"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"notifications":{"taskIds":["a"]}}}`, `"taskIds"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l := parseTaskListen(data)
		if l == nil {
			return
		}
		_ = declaresTasks(l.Params.Meta)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Notifications struct {
					TaskIDs []string `json:"taskIds"`
				} `json:"notifications"`
			} `json:"params"`
		}
		if err := json.Unmarshal(data, &m); err != nil || m.Method != "subscriptions/listen" || len(m.ID) == 0 || string(m.ID) == "null" {
			t.Fatalf("parseTaskListen took %q", data)
		}
	})
}
