package orchestrate

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/mcpv2/mcpv2/discovery"
	"github.com/mcpv2/mcpv2/protocol"
)

// Ranking weights: discovery's (SPEC §4), here applied to a subtask's text.
const (
	// scoreSkillName is added when the card offers the subtask's skill by
	// name (every candidate that is kept does).
	scoreSkillName = discovery.ScoreName
	// scoreCapability is added when a capability name of the card (an LLM
	// provider such as "claude") is a word of the subtask's text.
	scoreCapability = discovery.ScoreName
	// scoreTag is added when a tag of the offered skill is one of the
	// subtask's tags or a word of its text.
	scoreTag = discovery.ScoreTag
	// scoreDescription is added when a word of the text (other than a stop
	// word) is a word of the card's or the offered skill's description.
	scoreDescription = discovery.ScoreDescription
	// scoreReachable is added when the agent was reachable when found.
	scoreReachable = discovery.ScoreReachable
)

// stop lists words too common to match a description by.
var stop = toSet(`a an the and or of to in on at for by with from into is are was were be been am do does did
what whats what's how who whom which when where why this that these those it its me my you your we our they their
i please can could would will shall should may might must many much some any all there here than then also
as if so not no yes up out about over under give tell show get make let find`)

// offered returns the descriptor of skill on card, if the card offers it.
func offered(card protocol.AgentCard, skill string) (protocol.SkillDescriptor, bool) {
	for _, sk := range card.Skills {
		if sk.Name == skill {
			return sk, true
		}
	}
	return protocol.SkillDescriptor{}, false
}

// score ranks card for subtask st: scoreSkillName when the card offers
// st.Skill, scoreCapability when a capability name (LLM provider) is a word
// of st.Text, scoreTag when a tag of the offered skill is one of st.Tags or a
// word of st.Text, scoreDescription when a word of st.Text other than a stop
// word is a word of the card's or the offered skill's description, and
// scoreReachable when reachable; each part counts once. Names and tags
// compare case-insensitively.
func score(card protocol.AgentCard, st Subtask, reachable bool) float64 {
	var s float64
	sk, ok := offered(card, st.Skill)
	if ok {
		s += scoreSkillName
	}
	text := discovery.Words(st.Text)
	for _, p := range card.Capabilities.Providers {
		if text[strings.ToLower(p)] {
			s += scoreCapability
			break
		}
	}
	if ok {
	tags:
		for _, t := range sk.Tags {
			lt := strings.ToLower(t)
			if text[lt] {
				s += scoreTag
				break
			}
			for _, want := range st.Tags {
				if strings.EqualFold(t, want) {
					s += scoreTag
					break tags
				}
			}
		}
	}
	desc := discovery.Words(card.Description)
	if ok {
		for w := range discovery.Words(sk.Description) {
			desc[w] = true
		}
	}
	for w := range text {
		if !stop[w] && desc[w] {
			s += scoreDescription
			break
		}
	}
	if reachable {
		s += scoreReachable
	}
	return s
}

// candidate is an agent that may run a subtask.
type candidate struct {
	card       protocol.AgentCard
	addr       protocol.Address
	reachable  bool
	score      float64
	latency    time.Duration
	hasLatency bool
}

// rank keeps the found agents whose card offers st.Skill and has a usable
// PeerID, merged by PeerID (the card of the highest Seq; reachable if any
// find said so, and not when st.Skill is a bridged agent's that the card
// says is unhealthy), and orders them: score, then measured latency (a measured
// agent before an unmeasured one, lower first), then PeerID.
func rank(found []protocol.FindResult, st Subtask, latency func(string) (time.Duration, bool)) []candidate {
	byID := map[string]*candidate{}
	var merged []*candidate
	for _, f := range found {
		id := f.Card.PeerID
		if c, ok := byID[id]; ok {
			if f.Card.Seq > c.card.Seq {
				c.card = f.Card
			}
			c.reachable = c.reachable || f.Reachable
			continue
		}
		c := &candidate{card: f.Card, reachable: f.Reachable}
		byID[id] = c
		merged = append(merged, c)
	}
	res := make([]candidate, 0, len(merged))
	for _, c := range merged {
		if _, ok := offered(c.card, st.Skill); !ok {
			continue
		}
		addr, err := protocol.ParseAddress(c.card.PeerID)
		if err != nil || addr.Kind != protocol.AddrMesh {
			continue
		}
		c.addr = addr
		if b, ok := c.card.BridgedSkill(st.Skill); ok && !b.Healthy {
			// The skill is an external agent's that this agent bridges, and
			// its last health check failed: the call would fail at once,
			// so another provider goes first.
			c.reachable = false
		}
		c.score = score(c.card, st, c.reachable)
		if latency != nil {
			c.latency, c.hasLatency = latency(c.card.PeerID)
		}
		res = append(res, *c)
	}
	slices.SortFunc(res, compareCandidates)
	return res
}

// compareCandidates orders better candidates first.
func compareCandidates(a, b candidate) int {
	if c := cmp.Compare(b.score, a.score); c != 0 {
		return c
	}
	if a.hasLatency != b.hasLatency {
		if a.hasLatency {
			return -1
		}
		return 1
	}
	if a.hasLatency {
		if c := cmp.Compare(a.latency, b.latency); c != 0 {
			return c
		}
	}
	return strings.Compare(a.card.PeerID, b.card.PeerID)
}
