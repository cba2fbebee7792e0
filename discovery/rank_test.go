package discovery

import (
	"testing"

	"github.com/mcpv2/mcpv2/protocol"
)

func TestScore(t *testing.T) {
	card := protocol.AgentCard{
		Description: "A polyglot agent; it can Translate, summarise & OCR.",
		Skills: []protocol.SkillDescriptor{
			{Name: "translate_history", Description: "Converts chat history between providers", Tags: []string{"llm", "convert"}},
			{Name: "ocr", Description: "Reads text in images", Tags: []string{"image"}},
		},
		Capabilities: protocol.Capabilities{Providers: []string{"gemini", "claude"}},
	}
	tests := []struct {
		name      string
		card      protocol.AgentCard
		query     string
		reachable bool
		want      float64
	}{
		{"skill name", card, "ocr", false, 2.0 + 0.5}, // "OCR" is also a description word
		{"skill name, reachable", card, "ocr", true, 2.0 + 0.5 + 1.0},
		{"snake_case skill name", card, "translate_history", false, 2.0 + 0.5}, // "translate" and "history" are description words
		{"skill name is case-insensitive", card, "OCR", false, 2.5},
		{"tag", card, "convert", false, 1.5},
		{"tag, reachable", card, "image", true, 1.5 + 1.0}, // "images" is not "image"
		{"another tag", card, "llm", false, 1.5},
		{"capability name (LLM provider)", card, "gemini", false, 2.0},
		{"description word only", card, "summarise", false, 0.5},
		{"description word, any case, punctuation ignored", card, "TRANSLATE", false, 0.5},
		{"one word of a multi-word query", card, "chat bot", false, 0.5},
		{"no match", card, "sql", false, 0},
		{"no match, reachable: reachability alone", card, "sql", true, 1.0},
		{"empty query", card, "", true, 1.0},
		{"whitespace query", card, "   ", false, 0},
		{"name and tag equal", protocol.AgentCard{Skills: []protocol.SkillDescriptor{{Name: "ping", Tags: []string{"ping"}}}}, "ping", true, 2.0 + 1.5 + 1.0},
		{"each part counts once", protocol.AgentCard{Skills: []protocol.SkillDescriptor{
			{Name: "ping", Description: "ping ping", Tags: []string{"ping"}},
			{Name: "ping", Description: "ping", Tags: []string{"ping", "ping"}},
		}}, "ping", false, 2.0 + 1.5 + 0.5},
		{"empty card", protocol.AgentCard{}, "ping", true, 1.0},
		{"substring is not a word", protocol.AgentCard{Description: "pinging"}, "ping", false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := score(tc.card, tc.query, tc.reachable); got != tc.want {
				t.Fatalf("score(%q, reachable=%v) = %v, want %v", tc.query, tc.reachable, got, tc.want)
			}
			wantMatch := tc.want
			if tc.reachable {
				wantMatch -= ScoreReachable
			}
			if got := matchScore(tc.card, tc.query); got != wantMatch {
				t.Fatalf("matchScore(%q) = %v, want %v", tc.query, got, wantMatch)
			}
		})
	}
}
