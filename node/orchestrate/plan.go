package orchestrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"
)

// Plan limits.
const (
	// MaxSubtasks caps the subtasks of a plan.
	MaxSubtasks = 32
	// MaxPlanBytes caps the JSON that ParsePlan reads.
	MaxPlanBytes = 1 << 20
	// MaxArgumentsBytes caps one subtask's Arguments as written in the plan.
	MaxArgumentsBytes = 64 << 10
	// MaxRenderedBytes caps one subtask's arguments after its templates ran.
	MaxRenderedBytes = 1 << 20
	// maxIDLen caps a subtask id.
	maxIDLen = 64
	// maxSkillLen caps a skill name.
	maxSkillLen = 128
	// maxTags caps the tags of a subtask, maxTagLen each tag.
	maxTags   = 8
	maxTagLen = 64
	// maxSourceLen caps Plan.Source.
	maxSourceLen = 512
)

// Plan sources.
const (
	// SourceHeuristic marks a plan made by Heuristic.
	SourceHeuristic = "heuristic"
	// SourceLLM marks a plan written by a language model.
	SourceLLM = "llm"
	// SourceGiven marks a plan the caller gave.
	SourceGiven = "given"
)

// ErrInvalidPlan is wrapped by every error of Plan.Validate and ParsePlan.
var ErrInvalidPlan = errors.New("orchestrate: invalid plan")

// Subtask is one step of a plan: a skill to call on some agent, with its
// arguments, after the subtasks it depends on.
type Subtask struct {
	// ID names the subtask in DependsOn and in templates: 1 to 64 bytes of
	// [a-z0-9_-], unique in the plan.
	ID string `json:"id"`
	// Text is the part of the request the subtask serves; it is also what
	// candidates are ranked over.
	Text string `json:"text"`
	// Skill is the skill to call.
	Skill string `json:"skill"`
	// Tags are extra keys to find agents by (at most 8).
	Tags []string `json:"tags,omitempty"`
	// Arguments is the skill's JSON object of arguments (at most 64 KiB;
	// empty or null means {}). Its string values may be templates over the results
	// of DependsOn: see the package documentation for the data they see.
	Arguments json.RawMessage `json:"arguments"`
	// DependsOn lists the ids of the subtasks that must be done first.
	DependsOn []string `json:"depends_on,omitempty"`
}

// Plan is what a Planner makes of a request.
type Plan struct {
	// Subtasks are the steps, 1 to MaxSubtasks of them.
	Subtasks []Subtask `json:"subtasks"`
	// Source says who made the plan: "heuristic", "llm" or "given"; a
	// heuristic plan made because the language model's was unusable says why,
	// as "heuristic (llm plan invalid: …)".
	Source string `json:"source"`
}

// Validate checks the plan: 1 to MaxSubtasks subtasks; ids non-empty, at
// most 64 bytes of [a-z0-9_-] and unique; a non-empty skill name; at most 8
// tags; arguments empty, null or a JSON object of at most 64 KiB whose templates
// parse and refer to dependencies only; dependencies that exist, none on
// itself, none twice, and no cycle (the error names it, as "a → b → a", where
// → reads "depends on"). Every error wraps ErrInvalidPlan.
func (p Plan) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidPlan, fmt.Sprintf(format, args...))
	}
	if len(p.Subtasks) == 0 {
		return bad("no subtasks")
	}
	if len(p.Subtasks) > MaxSubtasks {
		return bad("%d subtasks, at most %d allowed", len(p.Subtasks), MaxSubtasks)
	}
	if len(p.Source) > maxSourceLen || !utf8.ValidString(p.Source) {
		return bad("source is longer than %d bytes or not UTF-8", maxSourceLen)
	}
	index := make(map[string]int, len(p.Subtasks))
	for i, st := range p.Subtasks {
		if err := validID(st.ID); err != nil {
			return bad("subtask %d: %v", i+1, err)
		}
		if _, dup := index[st.ID]; dup {
			return bad("subtask id %q is used twice", st.ID)
		}
		index[st.ID] = i
	}
	for _, st := range p.Subtasks {
		if err := st.validate(index); err != nil {
			return bad("subtask %q: %v", st.ID, err)
		}
	}
	if cyc := findCycle(p.Subtasks, index); cyc != nil {
		return bad("dependency cycle: %s", strings.Join(cyc, " → "))
	}
	return nil
}

// validID checks the shape of a subtask id.
func validID(id string) error {
	if id == "" {
		return errors.New("empty id")
	}
	if len(id) > maxIDLen {
		return fmt.Errorf("id %q is longer than %d bytes", truncate(id, 80), maxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("id %q: only a-z, 0-9, '_' and '-' are allowed", truncate(id, 80))
		}
	}
	return nil
}

// validate checks one subtask against the plan's ids.
func (st Subtask) validate(index map[string]int) error {
	if strings.TrimSpace(st.Skill) == "" {
		return errors.New("no skill")
	}
	if len(st.Skill) > maxSkillLen || !printable(st.Skill) {
		return fmt.Errorf("skill %q: longer than %d bytes or holds control characters", truncate(st.Skill, 80), maxSkillLen)
	}
	if len(st.Text) > MaxRequestBytes || !utf8.ValidString(st.Text) {
		return fmt.Errorf("text is longer than %d bytes or not UTF-8", MaxRequestBytes)
	}
	if len(st.Tags) > maxTags {
		return fmt.Errorf("%d tags, at most %d allowed", len(st.Tags), maxTags)
	}
	for _, t := range st.Tags {
		if strings.TrimSpace(t) == "" || len(t) > maxTagLen || !printable(t) {
			return fmt.Errorf("tag %q: empty, longer than %d bytes or holds control characters", truncate(t, 80), maxTagLen)
		}
	}
	deps := make(map[string]bool, len(st.DependsOn))
	for _, d := range st.DependsOn {
		switch {
		case d == st.ID:
			return errors.New("depends on itself")
		case deps[d]:
			return fmt.Errorf("depends on %q twice", truncate(d, 80))
		}
		if _, ok := index[d]; !ok {
			return fmt.Errorf("depends on %q, which is not a subtask of the plan", truncate(d, 80))
		}
		deps[d] = true
	}
	if len(st.Arguments) > MaxArgumentsBytes {
		return fmt.Errorf("arguments are %d bytes, at most %d allowed", len(st.Arguments), MaxArgumentsBytes)
	}
	if noArguments(st.Arguments) {
		return nil
	}
	args, err := decodeObject(st.Arguments)
	if err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	return walkStrings(args, func(s string) error {
		if !strings.Contains(s, "{{") {
			return nil
		}
		t, err := parseTemplate(s, nil)
		if err != nil {
			return err
		}
		return checkRefs(t, deps)
	})
}

// noArguments reports whether args is empty or JSON null, which mean {}.
func noArguments(args json.RawMessage) bool {
	a := bytes.TrimSpace(args)
	return len(a) == 0 || string(a) == "null"
}

// printable reports whether s is UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// decodeObject decodes data as one JSON object, numbers as json.Number.
func decodeObject(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a JSON object, got %s", jsonKind(v))
	}
	return m, nil
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// walkStrings calls f on every string value in v (not on object keys).
func walkStrings(v any, f func(string) error) error {
	switch x := v.(type) {
	case string:
		return f(x)
	case []any:
		for _, e := range x {
			if err := walkStrings(e, f); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range x {
			if err := walkStrings(e, f); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseTemplate parses one argument template with the functions of a
// render budget (a fresh, unused one when b is nil); definitions of named
// templates are refused.
func parseTemplate(s string, b *budget) (*template.Template, error) {
	if b == nil {
		b = &budget{left: MaxRenderedBytes}
	}
	t, err := template.New("arg").Funcs(b.funcs()).Option("missingkey=error").Parse(s)
	if err != nil {
		return nil, fmt.Errorf("template %q: %w", truncate(s, 80), err)
	}
	if len(t.Templates()) > 1 {
		return nil, fmt.Errorf("template %q: defining templates is not allowed", truncate(s, 80))
	}
	return t, nil
}

// checkRefs reports a field of the template's data (.x or $.x, where the
// dot is still the data) that names no dependency, and any {{template}} or
// {{range}}: without loops a template runs in time linear in its size.
func checkRefs(t *template.Template, deps map[string]bool) error {
	var err error
	var walk func(n parse.Node, root bool)
	ref := func(name string) {
		if err == nil && !deps[name] {
			err = fmt.Errorf("template %q refers to %q, which is not in depends_on", truncate(t.Root.String(), 80), truncate(name, 80))
		}
	}
	walk = func(n parse.Node, root bool) {
		switch x := n.(type) {
		case *parse.ListNode:
			if x == nil {
				return
			}
			for _, c := range x.Nodes {
				walk(c, root)
			}
		case *parse.ActionNode:
			walk(x.Pipe, root)
		case *parse.PipeNode:
			if x == nil {
				return
			}
			for _, c := range x.Cmds {
				walk(c, root)
			}
		case *parse.CommandNode:
			for _, a := range x.Args {
				walk(a, root)
			}
		case *parse.FieldNode:
			if root && len(x.Ident) > 0 {
				ref(x.Ident[0])
			}
		case *parse.VariableNode:
			if len(x.Ident) > 1 && x.Ident[0] == "$" {
				ref(x.Ident[1])
			}
		case *parse.ChainNode:
			walk(x.Node, root)
		case *parse.IfNode:
			walk(x.Pipe, root)
			walk(x.List, root)
			walk(x.ElseList, root)
		case *parse.RangeNode:
			if err == nil {
				err = fmt.Errorf("template %q: {{range}} is not allowed (use json to pass a list)", truncate(t.Root.String(), 80))
			}
		case *parse.WithNode:
			walk(x.Pipe, root)
			walk(x.List, false)
			walk(x.ElseList, root)
		case *parse.TemplateNode:
			if err == nil {
				err = fmt.Errorf("template %q: {{template}} is not allowed", truncate(t.Root.String(), 80))
			}
		}
	}
	walk(t.Root, true)
	return err
}

// findCycle returns a dependency cycle as ids (first == last), or nil.
func findCycle(sts []Subtask, index map[string]int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(sts))
	var stack []int
	var cycle []string
	var visit func(i int) bool
	visit = func(i int) bool {
		color[i] = grey
		stack = append(stack, i)
		for _, d := range sts[i].DependsOn {
			j, ok := index[d]
			if !ok {
				continue
			}
			switch color[j] {
			case grey:
				k := len(stack) - 1
				for stack[k] != j {
					k--
				}
				for _, s := range stack[k:] {
					cycle = append(cycle, sts[s].ID)
				}
				cycle = append(cycle, sts[j].ID)
				return true
			case white:
				if visit(j) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		return false
	}
	for i := range sts {
		if color[i] == white && visit(i) {
			return cycle
		}
	}
	return nil
}

// ParsePlan decodes a plan from JSON (at most MaxPlanBytes, unknown fields
// refused, nothing after the object) and validates it. An empty Source
// becomes "given"; missing or null arguments become {}. Every error wraps ErrInvalidPlan.
func ParsePlan(data []byte) (Plan, error) {
	if len(data) > MaxPlanBytes {
		return Plan{}, fmt.Errorf("%w: %d bytes, at most %d allowed", ErrInvalidPlan, len(data), MaxPlanBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrInvalidPlan, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Plan{}, fmt.Errorf("%w: data after the plan object", ErrInvalidPlan)
	}
	if p.Source == "" {
		p.Source = SourceGiven
	}
	for i := range p.Subtasks {
		if noArguments(p.Subtasks[i].Arguments) {
			p.Subtasks[i].Arguments = json.RawMessage("{}")
		}
	}
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// truncate cuts s to at most n bytes (n >= 3) on a rune boundary, the
// last three of them "…" marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)] + "…"
}
