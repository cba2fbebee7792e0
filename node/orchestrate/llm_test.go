package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpv2/mcpv2/node/llm"
	"github.com/mcpv2/mcpv2/protocol"
)

// chatServer is an OpenAI-compatible chat completions server whose answer
// the test sets; it records the request bodies.
type chatServer struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	reply  string
	bodies []string
}

func newChatServer(t *testing.T) *chatServer {
	t.Helper()
	s := &chatServer{status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(body))
		status, reply := s.status, s.reply
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if status != http.StatusOK {
			io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
			return
		}
		resp := map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": reply}}},
		}
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(s.Close)
	return s
}

// set makes the server answer text with status.
func (s *chatServer) set(status int, text string) {
	s.mu.Lock()
	s.status, s.reply = status, text
	s.mu.Unlock()
}

// body returns the i-th request body.
func (s *chatServer) body(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies[i]
}

// backend returns an OpenAI backend talking to s.
func (s *chatServer) backend(t *testing.T) llm.Backend {
	t.Helper()
	c := s.Client()
	t.Cleanup(c.CloseIdleConnections)
	b, err := llm.NewOpenAI(s.URL+"/v1/", "gpt-test", "sk-test", llm.WithHTTPClient(c))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var meshSkills = []protocol.SkillDescriptor{
	{Name: "calculator", Description: "Arithmetic on two numbers", Tags: []string{"math"},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"operation":{"type":"string"},"a":{"type":"number"},"b":{"type":"number"}}}`)},
	{Name: "weather", Description: "Current weather of a city", Tags: []string{"weather"}},
	{Name: "ask", Description: "Ask the language model"},
}

const validLLMPlan = "Here is the plan:\n```json\n" + `{
  "subtasks": [
    {"id": "mul", "text": "7 times 6", "skill": "calculator", "arguments": {"operation": "multiply", "a": 7, "b": 6}},
    {"id": "wx", "text": "weather in Tokyo", "skill": "weather", "tags": ["weather"], "arguments": {"city": "Tokyo"}},
    {"id": "sum", "text": "summarize", "skill": "ask", "depends_on": ["mul", "wx"],
     "arguments": {"query": "Summarize: {{.mul.text}} and {{.wx.text}}"}}
  ]
}` + "\n```\n"

func TestLLMPlanner(t *testing.T) {
	const req = "what is 7 times 6, what is the weather in Tokyo, and summarize"
	srv := newChatServer(t)
	planner := NewLLMPlanner(srv.backend(t), meshSkills)

	// (a) A valid plan is taken as it is.
	srv.set(http.StatusOK, validLLMPlan)
	p, err := planner.Plan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if p.Source != SourceLLM || len(p.Subtasks) != 3 || p.Subtasks[2].Skill != "ask" || len(p.Subtasks[2].DependsOn) != 2 {
		t.Fatalf("plan %+v", p)
	}
	// The prompt listed the mesh's skills, their schemas, and the plan schema,
	// and the request went as the user's message.
	var sent struct {
		Messages []struct{ Role, Content string }
	}
	if err := json.Unmarshal([]byte(srv.body(0)), &sent); err != nil {
		t.Fatal(err)
	}
	var system, user string
	for _, m := range sent.Messages {
		switch m.Role {
		case "system":
			system = m.Content
		case "user":
			user = m.Content
		}
	}
	for _, s := range []string{"- calculator: Arithmetic on two numbers (tags: math)", `"operation":{"type":"string"}`,
		"- weather: Current weather of a city", `"depends_on"`, `{{index . "ID" "text"}}`} {
		if !strings.Contains(system, s) {
			t.Errorf("system prompt lacks %q:\n%s", s, system)
		}
	}
	if user != req {
		t.Errorf("user message %q", user)
	}

	// (b) Garbage and near misses fall back to the heuristic, saying why.
	for _, c := range []struct{ answer, why string }{
		{"Sure! I would call the calculator first.", "no JSON object"},
		{`{"subtasks": "all of them"}`, "schema"},
		{`{"subtasks":[{"id":"a","text":"t","skill":"calculator"}]}`, "schema"}, // no arguments
		{`{"subtasks":[{"id":"a","text":"t","skill":"teleport","arguments":{}}]}`, `skill "teleport" is not known on the mesh`},
		{`{"subtasks":[{"id":"a","text":"t","skill":"ask","arguments":{},"depends_on":["b"]},{"id":"b","text":"t","skill":"ask","arguments":{},"depends_on":["a"]}]}`,
			"dependency cycle: a → b → a"},
		{`{"subtasks":[{"id":"a","text":"t","skill":"ask","arguments":{"q":"{{.zz.text}}"}}]}`, `refers to "zz"`},
	} {
		srv.set(http.StatusOK, c.answer)
		p, err := planner.Plan(context.Background(), req)
		if err != nil {
			t.Fatalf("%q: %v", c.answer, err)
		}
		if !strings.HasPrefix(p.Source, "heuristic (llm plan invalid: ") || !strings.Contains(p.Source, c.why) {
			t.Errorf("%q: source %q, want the reason %q", c.answer, p.Source, c.why)
		}
		h := Heuristic(req)
		if len(p.Subtasks) != len(h.Subtasks) || p.Subtasks[0].Skill != "calculator" {
			t.Errorf("%q: fallback plan %+v", c.answer, p.Subtasks)
		}
	}

	// A failing backend falls back too.
	srv.set(http.StatusServiceUnavailable, "")
	p, err = planner.Plan(context.Background(), req)
	// The reason names the status but not the backend's own text, which may
	// name internal hosts: the source reaches remote callers.
	if err != nil || p.Source != "heuristic (llm failed: the openai backend answered HTTP 503)" || strings.Contains(p.Source, "overloaded") ||
		strings.Contains(p.Source, srv.URL) {
		t.Errorf("backend failure: %q %v", p.Source, err)
	}
	// A cancelled context is an error, not a fallback.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := planner.Plan(ctx, req); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := planner.Plan(context.Background(), ""); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("empty request: %v", err)
	}
}

// TestLLMPlannerLocal: the local responder answers prose, never a plan,
// so the planner falls back to the heuristic.
func TestLLMPlannerLocal(t *testing.T) {
	req := "what is 7 times 6, what is the weather in Tokyo, and how many engineers are in Platform"
	p, err := NewLLMPlanner(llm.NewLocal(), nil).Plan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Source, "heuristic (llm plan invalid: ") || len(p.Subtasks) != 3 {
		t.Errorf("source %q, %d subtasks", p.Source, len(p.Subtasks))
	}
	p, err = NewLLMPlanner(nil, nil).Plan(context.Background(), req)
	if err != nil || p.Source != "heuristic (llm failed: no backend)" {
		t.Errorf("nil backend: %q %v", p.Source, err)
	}
}

// TestLLMPlannerRun drives a whole run from an LLM plan.
func TestLLMPlannerRun(t *testing.T) {
	srv := newChatServer(t)
	srv.set(http.StatusOK, validLLMPlan)
	m := newMesh()
	m.add("calc", []string{"calculator"}, []string{"math"}, answer(map[string]any{"result": 42}))
	m.add("wx", []string{"weather"}, []string{"weather"}, answer(map[string]any{"summary": "sunny, 18 °C"}))
	m.add("llm", []string{"ask"}, []string{"llm"}, func(_ context.Context, _ string, args json.RawMessage) (json.RawMessage, error) {
		var in struct{ Query string }
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]string{"response": "echo: " + in.Query})
	})
	o := mustNew(t, m, WithPlanner(NewLLMPlanner(srv.backend(t), meshSkills)))
	res, err := o.Run(ctxT(t), "what is 7 times 6, what is the weather in Tokyo, and summarize", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusCompleted || res.Plan.Source != SourceLLM {
		t.Fatalf("%q %q", res.Status, res.Plan.Source)
	}
	if got := string(res.Subtasks[2].Result); got != `{"response":"echo: Summarize: 42 and sunny, 18 °C"}` {
		t.Errorf("summary result %s", got)
	}
}

func TestLLMSummarizer(t *testing.T) {
	srv := newChatServer(t)
	srv.set(http.StatusOK, "7 times 6 is 42; the weather part failed.")
	s := NewLLMSummarizer(srv.backend(t))
	parts := []SubtaskResult{
		{ID: "a", Skill: "calculator", Text: "7 times 6", Status: StateDone, Result: json.RawMessage(`{"result":42}`)},
		{ID: "b", Skill: "weather", Text: "weather in Tokyo", Status: StateFailed, Error: "no agent found"},
	}
	got, err := s.Summarize(context.Background(), "the request", parts)
	if err != nil || got != "7 times 6 is 42; the weather part failed." {
		t.Fatalf("%q %v", got, err)
	}
	for _, want := range []string{"Request: the request", `1. 7 times 6 [skill calculator, done]: {\"result\":42}`, "2. weather in Tokyo [skill weather, failed]: no agent found"} {
		if !strings.Contains(srv.body(0), want) {
			t.Errorf("prompt lacks %q:\n%s", want, srv.body(0))
		}
	}
	if _, err := NewLLMSummarizer(nil).Summarize(context.Background(), "r", parts); err == nil {
		t.Error("nil backend summarized")
	}
}

func TestPlanSchema(t *testing.T) {
	a, b := PlanSchema(), PlanSchema()
	if a == b || a.Properties["subtasks"] == nil {
		t.Fatal("PlanSchema is not a fresh, parsed schema")
	}
	rs, err := resolvedPlanSchema()
	if err != nil {
		t.Fatal(err)
	}
	// Every valid heuristic plan also matches the schema.
	for _, req := range []string{"what is 7 times 6, weather in Oslo, and summarize them", "hello"} {
		raw, _ := json.Marshal(Heuristic(req))
		var inst any
		_ = json.Unmarshal(raw, &inst)
		if err := rs.Validate(inst); err != nil {
			t.Errorf("%q: %v\n%s", req, err, raw)
		}
	}
}
