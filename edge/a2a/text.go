package a2a

import (
	"encoding/json"
	"fmt"
)

// Text skills: what a plain-text message (no data part naming a skill, no
// file) runs. "ask" (the default) answers the text whole; "orchestrate"
// (mcpv2 node --a2a-text orchestrate) has the node's orchestrator split
// it into subtasks, each run by the best agent for its skill, and answers
// with the parts and their aggregate, as the seed's A2A agent decomposed
// a text task into tool calls.
const (
	// TextAsk sends a text message to ask.
	TextAsk = "ask"
	// TextOrchestrate sends a text message to orchestrate, as its request.
	TextOrchestrate = "orchestrate"
)

// WithTextSkill sets the skill a plain-text message runs: TextAsk (the
// default) or TextOrchestrate. The node must have that skill (orchestrate
// needs the mesh); a caller must be granted it, as any skill.
func WithTextSkill(name string) Option {
	return func(c *config) error {
		switch name {
		case TextAsk, TextOrchestrate:
			c.textSkill = name
			return nil
		}
		return fmt.Errorf("a2a: WithTextSkill: %q is not %s or %s", name, TextAsk, TextOrchestrate)
	}
}

// callsOf is callsOf with the face's text skill: a message that asks ask
// with its text alone runs the text skill with it instead. A data part
// naming ask, or a message with files, is left as it is.
func (f *Face) callsOf(m Message, prev *call) ([]call, *rpcError) {
	calls, e := callsOf(m, prev)
	if e != nil || f.textSkill == "" || f.textSkill == TextAsk || len(calls) != 1 || calls[0].Skill != TextAsk || !textOnly(m) {
		return calls, e
	}
	var a struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(calls[0].Args, &a); err != nil || a.Query == "" {
		return calls, e
	}
	b, _ := json.Marshal(map[string]string{"request": a.Query})
	return []call{{Skill: f.textSkill, Args: b}}, nil
}

// textOnly says whether m carries no data object and no file: its text
// is all that callsOf acted on.
func textOnly(m Message) bool {
	for _, p := range m.Parts {
		if _, ok := p.Data.(map[string]any); ok || p.File != nil {
			return false
		}
	}
	return true
}
