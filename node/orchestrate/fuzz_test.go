package orchestrate

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzParsePlan: ParsePlan never panics; a plan it accepts validates, and
// survives a JSON round trip unchanged.
func FuzzParsePlan(f *testing.F) {
	for _, s := range []string{
		`{"subtasks":[{"id":"a","text":"t","skill":"echo","arguments":{"x":1}}]}`,
		`{"subtasks":[{"id":"a","skill":"s","arguments":{}},{"id":"b","skill":"s","depends_on":["a"],"arguments":{"q":"{{.a.text}}","v":"{{json .a.result}}"}}],"source":"llm"}`,
		`{"subtasks":[{"id":"a","skill":"s","arguments":{},"depends_on":["b"]},{"id":"b","skill":"s","arguments":{},"depends_on":["a"]}]}`,
		`{"subtasks":[{"id":"a","skill":"s","tags":["x"],"arguments":{"q":"{{if .}}{{end}}"}}]}`,
		`{"subtasks":[{"id":"A","skill":"s","arguments":[]}]}`,
		`{"subtasks":null}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePlan(data)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("ParsePlan accepted a plan Validate refuses: %v", err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := ParsePlan(b)
		if err != nil {
			t.Fatalf("round trip refused: %v\n%s", err, b)
		}
		b2, _ := json.Marshal(q)
		if !reflect.DeepEqual(b, b2) {
			t.Fatalf("round trip changed the plan:\n%s\n%s", b, b2)
		}
	})
}

// FuzzHeuristic: any request gives a valid plan (or none, when it holds no
// clause), and its arguments render over empty results of its dependencies.
func FuzzHeuristic(f *testing.F) {
	for _, s := range []string{
		"what is 7 times 6, what is the weather in Tokyo, and how many engineers are in Platform",
		"research golang generics, compute 2 plus 2, summarize",
		"read 'my file.txt' and then summarize it",
		"list employees in Engineering with salary over 100000",
		"explain {{.x}} and {{json .}}",
		"subtract 007 from -0.50",
		";;;",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, req string) {
		p := Heuristic(req)
		if len(p.Subtasks) == 0 {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("invalid plan for %q: %v", req, err)
		}
		data := map[string]any{}
		for _, st := range p.Subtasks {
			if _, err := renderArgs(st.Arguments, data); err != nil {
				t.Fatalf("subtask %s of %q does not render: %v", st.ID, req, err)
			}
			data[st.ID] = resultData(&SubtaskResult{Result: json.RawMessage(`"x"`)})
		}
	})
}

// FuzzRenderArgs: rendering any template over a fixed result never panics
// and yields a JSON object within the cap.
func FuzzRenderArgs(f *testing.F) {
	for _, s := range []string{
		`{"q":"{{.a.text}}"}`,
		`{"q":"{{json .a.result}}","r":["{{.a.raw}}"]}`,
		`{"q":"{{with .a.result.list}}{{index . 0}}{{end}}"}`,
		`{"q":"{{printf \"%099999d\" 1}}"}`,
		`{"q":"{{.a.result.missing}}"}`,
	} {
		f.Add(s)
	}
	data := map[string]any{"a": resultData(&SubtaskResult{Skill: "s", Agent: "p",
		Result: json.RawMessage(`{"result":"r","list":[1,2,3],"n":1.5}`)})}
	f.Fuzz(func(t *testing.T, args string) {
		if len(args) > MaxArgumentsBytes {
			return
		}
		st := Subtask{ID: "b", Skill: "s", DependsOn: []string{"a"}, Arguments: json.RawMessage(args)}
		if err := (Plan{Subtasks: []Subtask{{ID: "a", Skill: "s"}, st}}).Validate(); err != nil {
			return
		}
		out, err := renderArgs(st.Arguments, data)
		if err != nil {
			return
		}
		if len(out) > MaxRenderedBytes {
			t.Fatalf("rendered %d bytes", len(out))
		}
		if _, err := decodeObject(out); err != nil {
			t.Fatalf("rendered %s: %v", out, err)
		}
	})
}
