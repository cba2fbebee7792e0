package discovery

import (
	"strings"

	"github.com/mcpv2/mcpv2/protocol"
)

// taskStop lists words too common to rank a task's agents by.
var taskStop = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or of to in on at for by with from into is are was were be been am do does did
what how who which when where why this that these those it its me my you your we our they their i please can could would
will shall should may might must some any all there here than then also as if so not no up out about over under give tell show get make let find`) {
		m[w] = true
	}
	return m
}()

// TaskWords returns the words of a free-text task that rank agents for it:
// its lower-cased words but the common ones ("the", "and", "please"…).
func TaskWords(task string) map[string]bool {
	out := Words(task)
	for w := range out {
		if taskStop[w] {
			delete(out, w)
		}
	}
	return out
}

// ScoreTask ranks card for a task of words (TaskWords) with the weights of
// the MCP & A2A seed's find_agents_for_task: capability name match 2.0 (an
// LLM provider of the card is a word of the task), skill name match 2.0 (a
// skill's name, or every word of it, is in the task), skill tag match 1.5,
// description word match 0.5 (a word of the card's or a skill's
// description is a word of the task); each part counts once. The health
// bonus (ScoreReachable) is the caller's to add. Zero: no match.
func ScoreTask(card protocol.AgentCard, words map[string]bool) float64 {
	if len(words) == 0 {
		return 0
	}
	var capName, name, tag, desc bool
	for _, p := range card.Capabilities.Providers {
		capName = capName || words[strings.ToLower(p)]
	}
	texts := []string{card.Description}
	for _, sk := range card.Skills {
		if !name {
			nw := Words(sk.Name)
			all := len(nw) > 0
			for w := range nw {
				all = all && words[w]
			}
			name = all || words[strings.ToLower(sk.Name)]
		}
		for _, t := range sk.Tags {
			tag = tag || words[strings.ToLower(t)]
		}
		texts = append(texts, sk.Description)
	}
search:
	for _, t := range texts {
		for w := range Words(t) {
			if words[w] && !taskStop[w] {
				desc = true
				break search
			}
		}
	}
	s := matchSum(name, tag, desc)
	if capName {
		s += ScoreName
	}
	return s
}
