package orchestrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := func(id string, deps ...string) Subtask {
		return Subtask{ID: id, Skill: "echo", DependsOn: deps, Arguments: json.RawMessage(`{}`)}
	}
	with := func(st Subtask, f func(*Subtask)) Subtask { f(&st); return st }
	many := make([]Subtask, MaxSubtasks+1)
	for i := range many {
		many[i] = ok(fmt.Sprintf("s%d", i))
	}
	cases := []struct {
		name string
		sts  []Subtask
		want string
	}{
		{"no subtasks", nil, "no subtasks"},
		{"too many", many, "33 subtasks, at most 32"},
		{"empty id", []Subtask{ok("")}, "empty id"},
		{"upper case id", []Subtask{ok("A")}, `id "A": only a-z`},
		{"long id", []Subtask{ok(strings.Repeat("a", 65))}, "longer than 64 bytes"},
		{"duplicate id", []Subtask{ok("a"), ok("a")}, `subtask id "a" is used twice`},
		{"no skill", []Subtask{with(ok("a"), func(s *Subtask) { s.Skill = " " })}, `subtask "a": no skill`},
		{"control in skill", []Subtask{with(ok("a"), func(s *Subtask) { s.Skill = "a\nb" })}, "control characters"},
		{"too many tags", []Subtask{with(ok("a"), func(s *Subtask) { s.Tags = strings.Fields("1 2 3 4 5 6 7 8 9") })}, "9 tags"},
		{"empty tag", []Subtask{with(ok("a"), func(s *Subtask) { s.Tags = []string{""} })}, "tag"},
		{"arguments not an object", []Subtask{with(ok("a"), func(s *Subtask) { s.Arguments = json.RawMessage(`[1]`) })}, "want a JSON object, got an array"},
		{"arguments not JSON", []Subtask{with(ok("a"), func(s *Subtask) { s.Arguments = json.RawMessage(`{"a":`) })}, "not valid JSON"},
		{"arguments too large", []Subtask{with(ok("a"), func(s *Subtask) {
			s.Arguments = json.RawMessage(`{"a":"` + strings.Repeat("x", MaxArgumentsBytes) + `"}`)
		})}, "at most 65536 allowed"},
		{"unknown dependency", []Subtask{ok("a", "ghost")}, `depends on "ghost", which is not a subtask`},
		{"self dependency", []Subtask{ok("a", "a")}, "depends on itself"},
		{"dependency twice", []Subtask{ok("a"), ok("b", "a", "a")}, `depends on "a" twice`},
		{"cycle", []Subtask{ok("x"), ok("a", "b"), ok("b", "c"), ok("c", "a")}, "dependency cycle: a → b → c → a"},
		{"two-cycle", []Subtask{ok("a", "b"), ok("b", "a")}, "dependency cycle: a → b → a"},
		{"bad template", []Subtask{ok("a"), with(ok("b", "a"), func(s *Subtask) { s.Arguments = json.RawMessage(`{"q":"{{.a"}`) })}, "template"},
		{"template refers to a non-dependency", []Subtask{ok("a"), ok("c"), with(ok("b", "a"), func(s *Subtask) {
			s.Arguments = json.RawMessage(`{"q":{"deep":["{{.c.text}}"]}}`)
		})}, `refers to "c", which is not in depends_on`},
		{"template refers through $", []Subtask{ok("a"), with(ok("b"), func(s *Subtask) { s.Arguments = json.RawMessage(`{"q":"{{$.a.text}}"}`) })}, `refers to "a"`},
		{"define", []Subtask{with(ok("a"), func(s *Subtask) { s.Arguments = json.RawMessage(`{"q":"{{define \"x\"}}y{{end}}"}`) })}, "defining templates"},
		{"range", []Subtask{ok("a"), with(ok("b", "a"), func(s *Subtask) { s.Arguments = json.RawMessage(`{"q":"{{range .a.result}}x{{end}}"}`) })}, "{{range}} is not allowed"},
		{"template call", []Subtask{with(ok("a"), func(s *Subtask) { s.Arguments = json.RawMessage(`{"q":"{{template \"arg\"}}"}`) })}, "{{template}} is not allowed"},
	}
	for _, c := range cases {
		err := Plan{Subtasks: c.sts}.Validate()
		if err == nil || !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an ErrInvalidPlan with %q", c.name, err, c.want)
		}
	}

	good := Plan{Subtasks: []Subtask{
		ok("a"),
		{ID: "b_2", Skill: "echo", Tags: []string{"x"}, DependsOn: []string{"a"}, Arguments: json.RawMessage(
			`{"q":"{{.a.text}} {{index . \"a\" \"raw\"}} {{if .a.result}}{{.a.result.x}}{{end}} {{with .a}}{{.skill}}{{end}} {{\"{{\"}}"}`)},
		{ID: "c-3", Skill: "echo"}, // no arguments: {}
	}}
	if err := good.Validate(); err != nil {
		t.Errorf("valid plan refused: %v", err)
	}
}

func TestParsePlan(t *testing.T) {
	p, err := ParsePlan([]byte(`{"subtasks":[{"id":"a","text":"t","skill":"echo","arguments":{"x":1}}]}`))
	if err != nil || p.Source != SourceGiven || p.Subtasks[0].Skill != "echo" {
		t.Fatalf("%+v %v", p, err)
	}
	for _, in := range []string{`{"subtasks":[{"id":"a","skill":"echo"}]}`, `{"subtasks":[{"id":"a","skill":"echo","arguments":null}]}`} {
		p, err := ParsePlan([]byte(in))
		if err != nil || string(p.Subtasks[0].Arguments) != "{}" {
			t.Errorf("%s: %s %v", in, p.Subtasks[0].Arguments, err)
		}
	}
	for _, c := range []struct{ in, want string }{
		{`{"subtasks":[{"id":"a","skill":"echo","arguments":{},"extra":1}]}`, `unknown field "extra"`},
		{`{"subtasks":[{"id":"a","skill":"echo","arguments":{}}]} {}`, "data after the plan"},
		{`{"subtasks":[{"id":"a","skill":"echo","arguments":"x"}]}`, "got a string"},
		{`[]`, "cannot unmarshal array"},
		{`{"subtasks":[]}`, "no subtasks"},
		{`{"subtasks":[{"id":"a","skill":"echo","arguments":{}}],"source":"` + strings.Repeat("s", 600) + `"}`, "source"},
		{strings.Repeat(" ", MaxPlanBytes+1), "at most 1048576 allowed"},
	} {
		if _, err := ParsePlan([]byte(c.in)); err == nil || !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60s: got %v, want %q", c.in, err, c.want)
		}
	}
}

// TestRender checks the template data shape and the json splice.
func TestRender(t *testing.T) {
	deps := map[string]any{
		"obj":  resultData(&SubtaskResult{Skill: "calc", Agent: "12D3x", Result: json.RawMessage(`{ "result": 42, "steps": [1, 2] }`)}),
		"str":  resultData(&SubtaskResult{Skill: "ask", Result: json.RawMessage(`"hello <world>"`)}),
		"ans":  resultData(&SubtaskResult{Result: json.RawMessage(`{"other":1,"answer":"yes"}`)}),
		"arr":  resultData(&SubtaskResult{Result: json.RawMessage(`[1,2]`)}),
		"flag": resultData(&SubtaskResult{Result: json.RawMessage(`{"done":true,"result":false}`)}),
	}
	cases := []struct{ args, want string }{
		{`{"t":"{{.obj.text}}|{{.str.text}}|{{.ans.text}}|{{.arr.text}}|{{.flag.text}}"}`, `{"t":"42|hello <world>|yes|[1,2]|false"}`},
		{`{"raw":"{{.obj.raw}}","skill":"{{.obj.skill}}","agent":"{{.obj.agent}}"}`, `{"raw":"{\"result\":42,\"steps\":[1,2]}","skill":"calc","agent":"12D3x"}`},
		{`{"n":"{{.obj.result.result}}","steps":"{{index .obj.result.steps 1}}","p":"{{printf \"%05d|%.2f\" 42 1.5}}","h":"{{html .str.text}}"}`,
			`{"n":"42","steps":"2","p":"00042|1.50","h":"hello &lt;world&gt;"}`},
		// Exactly one json action: the value itself.
		{`{"v":"{{json .obj.result}}","s":"{{json .str.result}}","p":"{{.obj.result.steps | json}}"}`, `{"v":{"result":42,"steps":[1,2]},"s":"hello <world>","p":[1,2]}`},
		// Anything else stays a string.
		{`{"v":"x{{json .obj.result.result}}","w":" {{json .obj.result.result}}"}`, `{"v":"x42","w":" 42"}`},
		{`{"lit":"{{\"{{\"}}x}}","plain":"no template","num":5,"nested":{"a":["{{.str.text}}"]}}`, `{"lit":"{{x}}","plain":"no template","num":5,"nested":{"a":["hello <world>"]}}`},
	}
	for _, c := range cases {
		got, err := renderArgs(json.RawMessage(c.args), deps)
		if err != nil {
			t.Errorf("%s: %v", c.args, err)
			continue
		}
		if !sameJSON(t, got, []byte(c.want)) {
			t.Errorf("%s:\n got %s\nwant %s", c.args, got, c.want)
		}
	}
	if got, err := renderArgs(nil, nil); err != nil || string(got) != "{}" {
		t.Errorf("empty arguments: %s %v", got, err)
	}
	if _, err := renderArgs(json.RawMessage(`{"x":"{{.obj.result.missing}}"}`), deps); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing key: %v", err)
	}
	big := map[string]any{"a": map[string]any{"text": strings.Repeat("x", 600<<10)}}
	if _, err := renderArgs(json.RawMessage(`{"x":"{{.a.text}}","y":"{{.a.text}}"}`), big); !errors.Is(err, errRenderTooLarge) {
		t.Errorf("oversized render: %v", err)
	}
	// Text functions spend the budget even when nothing is written.
	if _, err := renderArgs(json.RawMessage(`{"x":"{{if json .a}}{{end}}{{if print .a}}{{end}}"}`), big); !errors.Is(err, errRenderTooLarge) {
		t.Errorf("unwritten json and print: %v", err)
	}
	for _, f := range []string{`%099999d`, `%.99999f`, `%*d`, `%[1]*d`} {
		args := `{"x":"{{printf \"` + f + `\" 1 2}}"}`
		if _, err := renderArgs(json.RawMessage(args), big); err == nil || !strings.Contains(err.Error(), "printf") {
			t.Errorf("printf %s: %v", f, err)
		}
	}
}
