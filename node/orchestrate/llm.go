package orchestrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpv2/mcpv2/node/llm"
	"github.com/mcpv2/mcpv2/protocol"
)

// planSchemaJSON is the JSON Schema of a plan, as a language model is asked
// to write one. Validate checks more (unique ids, known dependencies, no
// cycle, templates).
const planSchemaJSON = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "mcpv2 orchestration plan",
  "type": "object",
  "required": ["subtasks"],
  "additionalProperties": false,
  "properties": {
    "subtasks": {
      "type": "array",
      "minItems": 1,
      "maxItems": 32,
      "items": {
        "type": "object",
        "required": ["id", "text", "skill", "arguments"],
        "additionalProperties": false,
        "properties": {
          "id": {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$", "description": "unique short id"},
          "text": {"type": "string", "description": "the part of the request this subtask serves"},
          "skill": {"type": "string", "minLength": 1, "description": "the skill to call"},
          "tags": {"type": "array", "maxItems": 8, "items": {"type": "string", "minLength": 1}, "description": "extra keys to find agents by"},
          "arguments": {"type": "object", "description": "the skill's arguments; string values may be Go templates over the results of depends_on"},
          "depends_on": {"type": "array", "items": {"type": "string"}, "description": "ids of the subtasks whose results this one needs"}
        }
      }
    },
    "source": {"type": "string"}
  }
}`

// PlanSchema returns the JSON Schema of a plan (a fresh copy: the caller
// may change it).
func PlanSchema() *jsonschema.Schema {
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(planSchemaJSON), &s); err != nil {
		panic("orchestrate: the plan schema does not parse: " + err.Error())
	}
	return &s
}

// resolvedPlanSchema is PlanSchema, resolved once for validation.
var resolvedPlanSchema = sync.OnceValues(func() (*jsonschema.Resolved, error) {
	return PlanSchema().Resolve(nil)
})

// Prompt limits of the LLM planner and summarizer.
const (
	// maxPromptSkills caps the skills listed in the planner's prompt.
	maxPromptSkills = 64
	// maxPromptDescription caps a skill's description in the prompt.
	maxPromptDescription = 300
	// maxPromptSchema caps a skill's input schema in the prompt.
	maxPromptSchema = 2048
	// maxPromptResult caps a part's result in the summarizer's prompt.
	maxPromptResult = 2048
	// maxReason caps the reason a fallback plan gives.
	maxReason = 200
)

// llmPlanner is NewLLMPlanner's Planner.
type llmPlanner struct {
	backend llm.Backend
	skills  map[string]bool
	system  string
}

// NewLLMPlanner returns a Planner that asks backend for a JSON plan. The
// prompt lists skills (those known on the mesh: at most 64, each
// description and input schema shortened) and the plan's JSON Schema. The
// answer (a ```json fence or text around the object is tolerated) must
// match the schema, pass ParsePlan, and use only the listed skills (when
// skills is not empty); its Source is then "llm". Otherwise, and when the
// backend fails, the plan is Heuristic's, with Source "heuristic (llm plan
// invalid: <why>)" or "heuristic (llm failed: <why>)". The planner fails only
// for an invalid request or when ctx ends. A nil backend always falls back.
// It is safe for concurrent use.
func NewLLMPlanner(backend llm.Backend, skills []protocol.SkillDescriptor) Planner {
	p := &llmPlanner{backend: backend, skills: map[string]bool{}}
	var list strings.Builder
	for _, sk := range skills {
		if len(p.skills) >= maxPromptSkills {
			break
		}
		if sk.Name == "" || p.skills[sk.Name] {
			continue
		}
		p.skills[sk.Name] = true
		fmt.Fprintf(&list, "- %s: %s", sk.Name, oneLine(sk.Description, maxPromptDescription))
		if len(sk.Tags) > 0 {
			fmt.Fprintf(&list, " (tags: %s)", oneLine(strings.Join(sk.Tags, ", "), maxPromptDescription))
		}
		var schema bytes.Buffer
		if len(sk.InputSchema) > 0 && json.Compact(&schema, sk.InputSchema) == nil && schema.Len() <= maxPromptSchema {
			fmt.Fprintf(&list, "\n  input schema: %s", schema.String())
		}
		list.WriteByte('\n')
	}
	skillText := list.String()
	if skillText == "" {
		skillText = "(none known; use the usual skills: calculator, weather, web_search, database_query, file_reader, ask)\n"
	}
	p.system = `You plan work for a mesh of agents. Split the user's request into subtasks; each subtask calls one skill on one agent.
Answer with one JSON object and nothing else, matching this JSON Schema:
` + planSchemaJSON + `
Rules:
- ids are short, lower case, made of a-z, 0-9, '_' and '-', unique.
- "text" quotes the part of the request the subtask serves.
- "skill" is one of the skills listed below, and "arguments" follows its input schema.
- A subtask that needs another's result lists that id in "depends_on" and uses the result in a string argument
  through Go template syntax: {{index . "ID" "text"}} is the result as text, {{json (index . "ID" "result")}}
  the result as JSON (a string argument that is exactly that action is replaced by the JSON value itself).
- Independent subtasks do not depend on each other, so that they run at the same time. At most 32 subtasks.
Skills known on the mesh:
` + skillText
	return p
}

// Plan asks the backend, falling back to Heuristic.
func (p *llmPlanner) Plan(ctx context.Context, request string) (Plan, error) {
	if err := checkRequest(request); err != nil {
		return Plan{}, err
	}
	fallback := func(why string, err error) (Plan, error) {
		h, herr := HeuristicPlanner{}.Plan(ctx, request)
		if herr != nil {
			return Plan{}, herr
		}
		h.Source = fmt.Sprintf("%s (%s: %s)", SourceHeuristic, why, oneLine(err.Error(), maxReason))
		return h, nil
	}
	if p.backend == nil {
		return fallback("llm failed", errors.New("no backend"))
	}
	resp, err := p.backend.Complete(ctx, llm.Request{
		System:   p.system,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: request}},
	})
	if err != nil {
		if ctx.Err() != nil {
			return Plan{}, fmt.Errorf("orchestrate: llm plan: %w", ctx.Err())
		}
		return fallback("llm failed", backendReason(p.backend.Name(), err))
	}
	plan, err := p.parse(resp.Text)
	if err != nil {
		return fallback("llm plan invalid", err)
	}
	return plan, nil
}

// backendReason says why a backend call failed without what its error
// text may hold (an internal URL, a dial error naming a host): the plan's
// source reaches remote callers of the orchestrate skill.
func backendReason(backend string, err error) error {
	var le *llm.Error
	switch {
	case errors.As(err, &le) && le.StatusCode > 0:
		return fmt.Errorf("the %s backend answered HTTP %d", backend, le.StatusCode)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the %s backend timed out", backend)
	}
	return fmt.Errorf("the %s backend failed or is unreachable", backend)
}

// parse checks a model's answer as a plan.
func (p *llmPlanner) parse(answer string) (Plan, error) {
	data := extractJSON(answer)
	if data == "" {
		return Plan{}, errors.New("no JSON object in the answer")
	}
	if len(data) > MaxPlanBytes {
		return Plan{}, fmt.Errorf("%d bytes, at most %d allowed", len(data), MaxPlanBytes)
	}
	var inst any
	if err := json.Unmarshal([]byte(data), &inst); err != nil {
		return Plan{}, fmt.Errorf("not JSON: %w", err)
	}
	rs, err := resolvedPlanSchema()
	if err != nil {
		return Plan{}, err
	}
	if err := rs.Validate(inst); err != nil {
		return Plan{}, fmt.Errorf("schema: %w", err)
	}
	plan, err := ParsePlan([]byte(data))
	if err != nil {
		return Plan{}, err
	}
	if len(p.skills) > 0 {
		for _, st := range plan.Subtasks {
			if !p.skills[st.Skill] {
				return Plan{}, fmt.Errorf("subtask %q: skill %q is not known on the mesh", st.ID, truncate(st.Skill, 80))
			}
		}
	}
	plan.Source = SourceLLM
	return plan, nil
}

// extractJSON returns the JSON object of a model's answer: the text from
// its first '{' to its last '}', which drops a ```json fence and prose
// around it.
func extractJSON(s string) string {
	i := strings.IndexByte(s, '{')
	j := strings.LastIndexByte(s, '}')
	if i < 0 || j < i {
		return ""
	}
	return s[i : j+1]
}

// llmSummarizer is NewLLMSummarizer's Summarizer.
type llmSummarizer struct {
	backend llm.Backend
}

// NewLLMSummarizer returns a Summarizer that asks backend to write the
// answer from the request and the parts (each result shortened to 2 KiB).
// It is safe for concurrent use; a nil backend fails every call.
func NewLLMSummarizer(backend llm.Backend) Summarizer {
	return &llmSummarizer{backend: backend}
}

// Summarize asks the backend for the answer.
func (s *llmSummarizer) Summarize(ctx context.Context, request string, parts []SubtaskResult) (string, error) {
	if s.backend == nil {
		return "", errors.New("orchestrate: summarize: no backend")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Request: %s\n\nParts:\n", request)
	for i, p := range parts {
		fmt.Fprintf(&b, "%d. %s [skill %s, %s]: ", i+1, oneLine(p.Text, maxPromptDescription), p.Skill, p.Status)
		if p.Status == StateDone {
			b.WriteString(truncate(string(p.Result), maxPromptResult))
		} else {
			b.WriteString(oneLine(p.Error, maxPromptDescription))
		}
		b.WriteByte('\n')
	}
	resp, err := s.backend.Complete(ctx, llm.Request{
		System: "You combine the results of the parts of a request, each answered by another agent, into one short answer " +
			"to the request. Use only the results given. Say plainly which parts failed or were skipped, and why.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: b.String()}},
	})
	if err != nil {
		return "", fmt.Errorf("orchestrate: summarize: %w", err)
	}
	return resp.Text, nil
}
