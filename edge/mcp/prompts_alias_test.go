package mcp

import (
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/protocol"
)

// TestPromptAliases: the seed's names of the built-in prompts' arguments
// (summarize's "text", "style"; analyze's "text", "focus") render as
// today's do; both names given and disagreeing is -32602 naming both.
func TestPromptAliases(t *testing.T) {
	ps := map[string]Prompt{}
	for _, p := range builtinPrompts() {
		ps[p.Name] = p
	}
	sum, ana := ps["summarize"], ps["analyze"]
	for _, tc := range []struct {
		p    Prompt
		args map[string]string
		want []string
	}{
		{sum, map[string]string{"text": "Your long text here...", "style": "bullets"}, []string{"bullet points", "Your long text here..."}},
		{sum, map[string]string{"content": "abc", "text": "abc", "style": "detailed"}, []string{"detailed summary", "abc"}},
		{sum, map[string]string{"text": "abc"}, []string{"two or three sentences", "abc"}},
		{ana, map[string]string{"text": "I love it", "focus": "sentiment"}, []string{"sentiment", "I love it"}},
		{ana, map[string]string{"text": "x", "focus": "key_themes"}, []string{"key themes"}},
		{ana, map[string]string{"text": "x", "focus": "entities"}, []string{"named entities"}},
		{ana, map[string]string{"text": "x", "focus": "general"}, []string{"main claims"}},
	} {
		got, perr := tc.p.render(tc.args)
		if perr != nil {
			t.Errorf("%s %v: %v", tc.p.Name, tc.args, perr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s %v: %q lacks %q", tc.p.Name, tc.args, got, w)
			}
		}
	}
	for _, tc := range []struct {
		p    Prompt
		args map[string]string
		want string
	}{
		{sum, map[string]string{"content": "a", "text": "b"}, `"content" and "text" name the same argument and disagree`},
		{sum, map[string]string{"style": "brief"}, `needs argument "content" (or "text")`},
		{sum, map[string]string{"text": "a", "style": "epic"}, "want one of brief, detailed, bullets"},
		{ana, map[string]string{"text": "a", "focus": "mood"}, "want one of sentiment, key_themes, entities, general"},
		{ana, map[string]string{"text": "a", "body": "b"}, `has no argument "body"`},
	} {
		_, perr := tc.p.render(tc.args)
		if perr == nil || perr.Code != protocol.CodeInvalidParams || !strings.Contains(perr.Message, tc.want) {
			t.Errorf("%s %v: %v; want -32602 holding %q", tc.p.Name, tc.args, perr, tc.want)
		}
	}
	// prompts/list shows the alias as an argument of its own, and the
	// argument it names as required under either name.
	sp := sum.sdkPrompt()
	var names []string
	for _, a := range sp.Arguments {
		names = append(names, a.Name)
		if a.Required {
			t.Errorf("summarize lists %q as required; with an alias, neither name alone is", a.Name)
		}
	}
	if strings.Join(names, ",") != "content,text,style" || !strings.Contains(sp.Arguments[0].Description, `required, as "content" or "text"`) {
		t.Errorf("summarize's arguments %v: %q", names, sp.Arguments[0].Description)
	}
	// A prompts file may declare aliases; an alias that clashes is refused.
	if _, err := ParsePrompts("p.json", []byte(`{"prompts":[{"name":"x","arguments":[{"name":"a","aliases":["b"]},{"name":"b"}],"template":"{{.a}}"}]}`)); err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("an alias that is also an argument: %v", err)
	}
	got, err := ParsePrompts("p.json", []byte(`{"prompts":[{"name":"x","arguments":[{"name":"a","required":true,"aliases":["b"]}],"template":"<{{.a}}>"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s, perr := got[0].render(map[string]string{"b": "v"}); perr != nil || s != "<v>" {
		t.Errorf("file prompt by alias: %q %v", s, perr)
	}
}
