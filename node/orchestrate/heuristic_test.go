package orchestrate

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// want is one expected subtask of a heuristic plan.
type want struct {
	skill, args string
	deps        []string
}

func TestHeuristic(t *testing.T) {
	cases := []struct {
		request string
		want    []want
	}{
		{"what is 7 times 6, what is the weather in Tokyo, and how many engineers are in Platform", []want{
			{"calculator", `{"operation":"multiply","a":7,"b":6}`, nil},
			{"weather", `{"city":"Tokyo"}`, nil},
			{"database_query", `{"action":"count","department":"Platform","role":"engineer"}`, nil},
		}},
		// orchestrate --help's own example (issue 26: the weather was
		// dropped into the calculator's clause).
		{"what is 7 times 6, and the weather in Tokyo", []want{
			{"calculator", `{"operation":"multiply","a":7,"b":6}`, nil},
			{"weather", `{"city":"Tokyo"}`, nil},
		}},
		{"the weather in Paris and London", []want{
			{"weather", `{"city":"Paris and London"}`, nil},
		}},
		{"research golang generics, compute 2 plus 2, summarize", []want{
			{"web_search", `{"query":"golang generics"}`, nil},
			{"calculator", `{"operation":"add","a":2,"b":2}`, nil},
			{"ask", `{"query":"summarize\n\nResults of the earlier parts:\n- web_search: {{index . \"web_search\" \"text\"}}\n- calculator: {{index . \"calculator\" \"text\"}}"}`,
				[]string{"web_search", "calculator"}},
		}},
		{"subtract 3 from 10; what is 2 to the power of 10?", []want{
			{"calculator", `{"operation":"subtract","a":10,"b":3}`, nil},
			{"calculator", `{"operation":"power","a":2,"b":10}`, nil},
		}},
		{"What's the forecast for New York tomorrow? Also, what is seven times eight", []want{
			{"weather", `{"city":"New York"}`, nil},
			{"calculator", `{"operation":"multiply","a":7,"b":8}`, nil},
		}},
		{"what is the square root of 81 and 17 mod 5", []want{
			{"calculator", `{"operation":"sqrt","a":81}`, nil},
		}},
		{"divide 1000 by 8 and then what is 5 squared", []want{
			{"calculator", `{"operation":"divide","a":1000,"b":8}`, nil},
			{"calculator", `{"operation":"power","a":5,"b":2}`, nil},
		}},
		{"calculate 12.5 - 0.5", []want{{"calculator", `{"operation":"subtract","a":12.5,"b":0.5}`, nil}}},
		{"list all managers in the Sales department", []want{
			{"database_query", `{"action":"list","department":"Sales","role":"manager"}`, nil},
		}},
		{"list employees in Engineering with salary over 100000", []want{
			{"database_query", `{"action":"filter","department":"Engineering","where":"salary over 100000"}`, nil},
		}},
		{"how many people work in the Platform team", []want{
			{"database_query", `{"action":"count","department":"Platform"}`, nil},
		}},
		{"read the file notes.txt and analyze its sentiment", []want{
			{"file_reader", `{"path":"notes.txt"}`, nil},
			{"ask", `{"query":"analyze its sentiment\n\nResults of the earlier parts:\n- file_reader: {{index . \"file_reader\" \"text\"}}"}`, []string{"file_reader"}},
		}},
		{"open /etc/hosts", []want{{"file_reader", `{"path":"/etc/hosts"}`, nil}}},
		{"search for the latest Go release and then summarize the results", []want{
			{"web_search", `{"query":"the latest Go release"}`, nil},
			{"ask", `{"query":"summarize the results\n\nResults of the earlier parts:\n- web_search: {{index . \"web_search\" \"text\"}}"}`, []string{"web_search"}},
		}},
		{"look up the population of France, look up the population of Spain", []want{
			{"web_search", `{"query":"the population of France"}`, nil},
			{"web_search", `{"query":"the population of Spain"}`, nil},
		}},
		{"tell me a joke about cats and dogs", []want{{"ask", `{"query":"tell me a joke about cats and dogs"}`, nil}}},
		{"summarize the history of Rome", []want{{"ask", `{"query":"summarize the history of Rome"}`, nil}}},
		{"compute the meaning of life", []want{{"ask", `{"query":"compute the meaning of life"}`, nil}}},
		{"explain {{.x}} templates", []want{{"ask", `{"query":"explain {{\"{{\"}}.x}} templates"}`, nil}}},
	}
	for _, c := range cases {
		p := Heuristic(c.request)
		if err := p.Validate(); err != nil {
			t.Errorf("%q: invalid plan: %v", c.request, err)
			continue
		}
		if p.Source != SourceHeuristic || len(p.Subtasks) != len(c.want) {
			t.Errorf("%q: %d subtasks (source %q), want %d: %+v", c.request, len(p.Subtasks), p.Source, len(c.want), p.Subtasks)
			continue
		}
		for i, w := range c.want {
			st := p.Subtasks[i]
			if st.Skill != w.skill || !sameJSON(t, st.Arguments, []byte(w.args)) || !slices.Equal(st.DependsOn, w.deps) {
				t.Errorf("%q subtask %d:\n got %s %s deps %v\nwant %s %s deps %v", c.request, i, st.Skill, st.Arguments, st.DependsOn, w.skill, w.args, w.deps)
			}
			if len(st.Tags) == 0 || st.Text == "" {
				t.Errorf("%q subtask %d: tags %v text %q", c.request, i, st.Tags, st.Text)
			}
		}
	}
}

// TestHeuristicTagsAndIDs checks the tags of each skill and the ids.
func TestHeuristicTagsAndIDs(t *testing.T) {
	p := Heuristic("what is 1 plus 1; what is 2 plus 2; weather in Oslo; search for otters; how many staff are in Ops; read a.txt; hello there; compute the orbit")
	wantIDs := []string{"calculator", "calculator-2", "weather", "web_search", "database_query", "file_reader", "ask", "ask-2"}
	wantTags := [][]string{{"math"}, {"math"}, {"weather"}, {"search"}, {"database"}, {"files"}, {"llm"}, {"llm", "math"}}
	if len(p.Subtasks) != len(wantIDs) {
		t.Fatalf("%d subtasks: %+v", len(p.Subtasks), p.Subtasks)
	}
	for i, st := range p.Subtasks {
		if st.ID != wantIDs[i] || !slices.Equal(st.Tags, wantTags[i]) {
			t.Errorf("subtask %d: id %q tags %v, want %q %v", i, st.ID, st.Tags, wantIDs[i], wantTags[i])
		}
	}
}

// TestHeuristicLimits: many clauses fold into MaxSubtasks; huge and hostile
// input still gives a valid plan.
func TestHeuristicLimits(t *testing.T) {
	req := strings.Repeat("tell me a story; ", 50)
	p := Heuristic(req)
	if len(p.Subtasks) != MaxSubtasks {
		t.Fatalf("%d subtasks", len(p.Subtasks))
	}
	if last := p.Subtasks[MaxSubtasks-1].Text; strings.Count(last, "tell me a story") != 50-MaxSubtasks+1 {
		t.Errorf("last subtask %q", last)
	}
	for _, req := range []string{
		"explain " + strings.Repeat("{{", MaxRequestBytes),
		"explain " + strings.Repeat("\x01", MaxRequestBytes),
		"explain " + strings.Repeat("<&>", MaxRequestBytes),
		strings.Repeat("x", 3*MaxRequestBytes),
		"search for " + strings.Repeat("{{\x01", MaxRequestBytes),
		strings.Repeat("a; ", 31) + strings.Repeat("{{", MaxRequestBytes/2) + ", summarize them",
	} {
		p := Heuristic(req)
		if err := p.Validate(); err != nil {
			t.Errorf("%.30q: %v", req, err)
		}
	}
	if p := Heuristic(" ;?. "); len(p.Subtasks) != 0 {
		t.Errorf("no clause: %+v", p)
	}
	if _, err := (HeuristicPlanner{}).Plan(context.Background(), ""); err == nil {
		t.Error("empty request planned")
	}
}

// TestHeuristicRuns renders the dependent ask of a heuristic plan over real
// results, as the orchestrator will.
func TestHeuristicRuns(t *testing.T) {
	p := Heuristic("look up otters, compute 6 times 7, and summarize them")
	if len(p.Subtasks) != 3 {
		t.Fatalf("%+v", p.Subtasks)
	}
	data := map[string]any{
		"web_search": resultData(&SubtaskResult{Result: json.RawMessage(`{"results":"otters hold hands"}`)}),
		"calculator": resultData(&SubtaskResult{Result: json.RawMessage(`{"result":42}`)}),
	}
	got, err := renderArgs(p.Subtasks[2].Arguments, data)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"query":"summarize them\n\nResults of the earlier parts:\n- web_search: {\"results\":\"otters hold hands\"}\n- calculator: 42"}`
	if !sameJSON(t, got, []byte(want)) {
		t.Errorf("got %s\nwant %s", got, want)
	}
}
