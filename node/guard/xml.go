package guard

import (
	"github.com/mcpv2/mcpv2/internal/lazyre"
	"regexp"
	"strings"
	"sync"
)

// specialTokens are the chat-template tokens of the common model families:
// ChatML, Llama 2 and 3, Gemma, Mistral, GPT's end of text.
var specialTokens = sync.OnceValue(func() *rule {
	return &rule{
		vector: VectorXMLTagInjection,
		re: regexp.MustCompile(`<\|\s*(?:im_start|im_end|im_sep|endoftext|end_of_text|begin_of_text|start_header_id|end_header_id|eot_id|eom_id|system|user|assistant|endofprompt|fim_prefix|fim_middle|fim_suffix|python_tag)\s*\|>` +
			`|<<\s*/?\s*sys\s*>>|\[\s*/?\s*sys\s*\]|\[\s*/?\s*inst\s*\]|<\s*/?\s*(?:start_of_turn|end_of_turn|im_start|im_end)\s*>|</s>\s*<s>|\[\s*/?\s*system\s*\]`),
		anchors: list("<| |> << [inst [/inst [ turn> <im_ </im_ </s> [system [/system [sys [/sys"),
		back:    12,
		fwd:     40,
		weight:  1,
	}
})

// mentionBefore and mentionAfter recognise a token that is talked about
// ("wraps the turn in [INST] and [/INST] tokens") rather than used.
var (
	mentionBefore = lazyre.New("(?:\\b(?:the|in|with|like|as|token|tokens|and|or|by|e\\.g\\.|such as|starts? with|begins? with|uses?|called|named|between|about|mean|means|is|are|does|do|what|what's|of)\\s*|[`'\"“‘(])$")
	mentionAfter  = lazyre.New("^(?:\\s*(?:and|or|tokens?|tags?|elements?|markers?|delimiters?|format|template|is|are|mean|means|do|does|as|closes|opens|in|around|for|to|with|before|after|between|at|on|when|inside|stands?)\\b|\\s*[,?)`'\"”’;]|\\s*\\.(?:\\s|$))")
	// mentionStrong is text after a token or tag that alone says it is
	// being talked about.
	mentionStrong = lazyre.New(`^\s*(?:(?:is|are)\s+(?:the|a|an|used|called|how|what|for)|means?|stands?\s+for|marks|closes|opens)\b`)
)

// roleTag finds tags; the tag names are judged in code.
var roleTag = lazyre.New(`<\s*(/?)\s*([a-z][a-z0-9_:-]*)\s*>`)

// privilegedParts are the words (of a tag name split at _ - :) that claim
// a privileged role; a tag with one, followed by a sentence, is an
// injection: <system>, <system_instruction>, <admin>, <developer_note>.
var privilegedParts = map[string]bool{
	"system": true, "systemprompt": true, "sys": true, "developer": true, "dev": true, "admin": true,
	"administrator": true, "root": true, "trusted": true, "operator": true, "assistant": true,
	"im_start": true, "override": true, "priority": true, "supervisor": true, "sudo": true,
}

// inputParts are the words of tag names that wrap input or data; closing
// one that was never opened is how injected text pretends that the input
// ended: </user>, </document>, </email_body>, </search_result>.
var inputParts = map[string]bool{
	"user": true, "input": true, "human": true, "query": true, "question": true, "context": true,
	"document": true, "documents": true, "doc": true, "docs": true, "file": true, "content": true,
	"contents": true, "result": true, "results": true, "tool": true, "function": true, "data": true,
	"untrusted": true, "external": true, "email": true, "mail": true, "body": true, "page": true,
	"webpage": true, "web": true, "search": true, "text": true, "message": true, "prompt": true,
	"conversation": true, "history": true, "article": true, "review": true, "comment": true,
	"instructions": true, "instruction": true, "snippet": true, "retrieved": true, "source": true,
	"transcript": true, "output": true, "system": true, "attachment": true, "resume": true, "cv": true,
}

// tagHas reports whether a part of the tag name is in set.
func tagHas(name string, set map[string]bool) bool {
	if set[name] {
		return true
	}
	for _, p := range strings.FieldsFunc(name, func(r rune) bool { return r == '_' || r == '-' || r == ':' }) {
		if set[p] {
			return true
		}
	}
	return false
}

// mentioned reports whether the token or tag at t[s:e] is talked about
// rather than used.
func mentioned(t string, s, e int) bool {
	after := t[e:min(len(t), e+24)]
	return mentionStrong().MatchString(after) || (mentionBefore().MatchString(t[max(0, s-24):s]) && mentionAfter().MatchString(after))
}

// xmlTags calls fn with the view range of each injected role tag or special
// token in v, until fn returns false; budget is as for rule.find. It
// returns false when the budget ran out.
func xmlTags(v *view, budget *int, fn func(s, e int) bool) bool {
	t := v.text
	more := true
	if !specialTokens().find(v, budget, func(s, e int) bool {
		if !mentioned(t, s, e) {
			more = fn(s, e)
		}
		return more
	}) {
		return false
	}
	if !more || !strings.Contains(t, "<") {
		return true
	}
	opened := map[string]bool{}
	if budget != nil {
		if len(t) > *budget {
			*budget = 0
			return false
		}
		*budget -= len(t) / 4 // the tag expression has a literal prefix: cheap
	}
	for _, m := range roleTag().FindAllStringSubmatchIndex(t, -1) {
		closing := m[3] > m[2]
		name := t[m[4]:m[5]]
		if !closing {
			if tagHas(name, privilegedParts) && sentenceFollows(t[m[1]:]) && !mentioned(t, m[0], m[1]) && !fn(m[0], m[1]) {
				return true
			}
			if len(opened) < 256 {
				opened[name] = true
			}
			continue
		}
		if tagHas(name, inputParts) && !opened[name] && !mentioned(t, m[0], m[1]) && !fn(m[0], m[1]) {
			return true
		}
	}
	return true
}

// tagCue finds a word that makes the text in a privileged tag read as
// orders to the model rather than a data sample.
var tagCue = lazyre.New(`\b` + alt(roleCue, fenceCue, `call`, `delete`, `now`, `execute`, `run`, `print`, `output`, `tell`, `write`, `say`, `rank`, `merge`, `praise`, `transfer`, `summari[sz]e`, `shortlist(?:ed)?`, `should`, `policy`, `everything`, `disabled?`, `enabled?`) + `\b`)

// sentenceFollows reports whether the text before the next tag holds at
// least three words and an order: a privileged tag that carries
// instructions, not a data field or a sample reply.
func sentenceFollows(s string) bool {
	if len(s) > 160 {
		s = s[:160]
	}
	if i := strings.IndexByte(s, '<'); i >= 0 {
		s = s[:i]
	}
	if !tagCue().MatchString(s) {
		return false
	}
	words, in := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := (c >= 'a' && c <= 'z') || c == '\''
		if letter && !in {
			words++
		}
		in = letter
	}
	return words >= 3
}
