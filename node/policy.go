package node

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/mcpv2/mcpv2/internal/suggest"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/node/skills/custom"
	"github.com/mcpv2/mcpv2/protocol"
)

// openByDefault are the skills every caller may use without a grant (SPEC
// §6); the methods tools/list and agent/card need no grant at all.
var openByDefault = []string{"ping"}

// Policy grants skills to callers (SPEC §6): to a PeerID, to "http" (every
// anonymous edge session) or to "*" (everyone). The zero Policy grants
// nothing beyond the open defaults. A Policy is immutable once loaded and so
// safe for concurrent use.
type Policy struct {
	file   string              // where it was read from, for warnings
	grants map[string][]string // PeerID, "http" or "*" → skill names or "*"
	// limits are the per-caller, per-skill rates: skill name (or "*" for
	// every skill not named) → one bucket per caller.
	limits map[string]*limiters
	// rates are the limits as the file wrote them ("10/m"), for PolicyView.
	rates map[string]string
}

// policyFile is the on-disk form:
//
//	{"grants": {"12D3KooW…": ["ask", "upload_file"], "12D3KooX…": ["*"],
//	            "http": ["translate_history"], "*": ["get_skill"]},
//	 "limits": {"ask": "10/m", "*": "100/s"}}
//
// A limit is per caller and per skill, on top of the node's per-caller
// --rate-limit; "*" applies to each skill that has no limit of its own.
type policyFile struct {
	Grants map[string][]string `json:"grants"`
	Limits map[string]string   `json:"limits"`
}

// policyFields are policyFile's fields, for a did-you-mean.
var policyFields = []string{"grants", "limits"}

// maxPerSkillRate caps the N of an "N/unit" limit.
const maxPerSkillRate = 1_000_000

// ParseRate parses a rate limit "N/s", "N/m" or "N/h" (also "N/sec",
// "N/min", "N/hour"): N calls per unit, N a whole number ≥ 1. It returns
// the rate per second and N, which is also the burst: a caller may spend a
// whole unit's calls at once, then one more each 1/N of the unit.
func ParseRate(s string) (perSecond float64, n int, err error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, 0, fmt.Errorf("rate %q: want N/s, N/m or N/h, e.g. \"10/m\"", s)
	}
	n, err = strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 1 || n > maxPerSkillRate {
		return 0, 0, fmt.Errorf("rate %q: N must be a whole number from 1 to %d", s, maxPerSkillRate)
	}
	var per time.Duration
	switch strings.ToLower(strings.TrimSpace(unit)) {
	case "s", "sec", "second":
		per = time.Second
	case "m", "min", "minute":
		per = time.Minute
	case "h", "hour":
		per = time.Hour
	default:
		return 0, 0, fmt.Errorf("rate %q: unit %q is not s, m or h", s, unit)
	}
	return float64(n) / per.Seconds(), n, nil
}

// maxPolicyFile caps the policy file.
const maxPolicyFile = 1 << 20

// LoadPolicy reads a policy file. A missing file is an empty policy when
// mustExist is false; any other problem names the file and the reason.
func LoadPolicy(path string, mustExist bool) (*Policy, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && !mustExist {
		return &Policy{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPolicyFile+1))
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	if len(data) > maxPolicyFile {
		return nil, fmt.Errorf("policy file %s: larger than %d bytes", path, maxPolicyFile)
	}
	return ParsePolicy(path, data)
}

// ParsePolicy parses the policy file format; name is used in errors.
func ParsePolicy(name string, data []byte) (*Policy, error) {
	var pf policyFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pf); err != nil {
		hint := ""
		if field, ok := protocol.JSONUnknownField(err); ok {
			hint = suggest.Hint(field, policyFields)
		}
		return nil, fmt.Errorf("policy file %s: %w%s", name, protocol.JSONFileError(data, err), hint)
	}
	for who, skills := range pf.Grants {
		if !validGrantKey(who) {
			return nil, fmt.Errorf("policy file %s: grant key %q is neither a PeerID, \"via:<PeerID>\" (the callers that peer forwards), \"key:<NAME>\" (an API key), "+
				"\"oidc:<subject>\" or \"scope:<name>\" (OpenID Connect tokens), \"http\" (anonymous edge callers) nor \"*\" (everyone)", name, who)
		}
		for _, s := range skills {
			if s == "" {
				return nil, fmt.Errorf("policy file %s: grant for %s has an empty skill name", name, who)
			}
		}
	}
	p := &Policy{file: name, grants: pf.Grants, rates: pf.Limits}
	for skill, r := range pf.Limits {
		if skill == "" {
			return nil, fmt.Errorf("policy file %s: a limit has an empty skill name", name)
		}
		rps, n, err := ParseRate(r)
		if err != nil {
			return nil, fmt.Errorf("policy file %s: limit of %q: %w", name, skill, err)
		}
		if p.limits == nil {
			p.limits = map[string]*limiters{}
		}
		p.limits[skill] = newLimiters(rps, n)
	}
	return p, nil
}

// UnknownGrant is a grant of a skill the node does not have: a typo, or a
// skill of a custom skills file that is not loaded. The grant still
// stands (the skill may come later); the node warns of it at start and
// mcpv2 config show lists it.
//
// A limit (the "limits" of the file) of a skill the node does not have is
// one too, with Limit set and Who empty: the limit stands, and limits
// nothing until the skill comes.
type UnknownGrant struct {
	File  string // the policy file
	Who   string // the grant key: a PeerID, "http", "*", …; "" for a limit
	Limit bool   // a limit's key, not a grant
	Skill string // the skill granted or limited
	Hint  string // ` (did you mean "X"?)` or ""
}

// String is the one-line warning, e.g. policy file /d/policy.json: grant
// to "http" names skill "pnig", which this node does not have (did you
// mean "ping"?), or policy file /d/policy.json: limit names skill
// "uplaod_file", which this node does not have (did you mean
// "upload_file"?).
func (u UnknownGrant) String() string {
	if u.Limit {
		return fmt.Sprintf("policy file %s: limit names skill %q, which this node does not have%s", u.File, u.Skill, u.Hint)
	}
	return fmt.Sprintf("policy file %s: grant to %q names skill %q, which this node does not have%s", u.File, u.Who, u.Skill, u.Hint)
}

// UnknownGrants lists the grants of p that name a skill not in known (nor
// "*"), sorted by grant key then skill, then the limits of such skills,
// sorted by skill.
func (p *Policy) UnknownGrants(known []string) []UnknownGrant {
	var out []UnknownGrant
	for _, who := range slices.Sorted(maps.Keys(p.grants)) {
		for _, sk := range p.grants[who] {
			if sk == "*" || slices.Contains(known, sk) {
				continue
			}
			out = append(out, UnknownGrant{File: p.file, Who: who, Skill: sk, Hint: suggest.Hint(sk, known)})
		}
	}
	for _, sk := range slices.Sorted(maps.Keys(p.rates)) {
		if sk == "*" || slices.Contains(known, sk) {
			continue
		}
		out = append(out, UnknownGrant{File: p.file, Limit: true, Skill: sk, Hint: suggest.Hint(sk, known)})
	}
	return out
}

// pseudoSkills are the names a policy may grant that are no skill of the
// registry (tools/list does not show them): the REST face's operations
// (restapi.go), the reading of resources (resources.go) and the registry of
// external agents (agents_bridge.go). The checks for unknown grants know them.
// A grant of "*" (every skill) does not reach them: each opens data or
// node actions beyond running skills (the audit log names every caller), so
// a policy or a key's --grant must name it (grantsSkill).
var pseudoSkills = []string{SecurityAuditSkill, ReadResourceSkill, DiscoverAgentsGrant, ListAgentsGrant}

// warnUnknownGrants logs, once at start, each grant or limit of a skill
// the node does not have, and (warnAnonymousPseudoGrants) the
// pseudo-skills the policy grants anonymous callers.
func (n *Node) warnUnknownGrants() {
	n.warnAnonymousPseudoGrants()
	names := append(n.reg.Names(), pseudoSkills...)
	for _, u := range n.policy.UnknownGrants(names) {
		what := []any{"grant", u.Who}
		if u.Limit {
			what = []any{"limit", true}
		}
		n.log.Warn(u.String(), append(append([]any{"skill", u.Skill}, what...), "suggest", suggest.Nearest(u.Skill, names), "file", u.File)...)
	}
}

// warnAnonymousPseudoGrants logs one WARN per grant key, "http" or "*",
// that names pseudo-skills: every caller who reaches the edge without a
// credential may then read the whole audit log (security_audit), make the
// node fetch URLs of its choosing (discover_agents), list the external
// agents (list_agents) or read private resources (read_resource). Such a
// policy (the orchestrate example's front-policy.json, for the seed's
// curls) is for an edge on loopback, never a public address.
func (n *Node) warnAnonymousPseudoGrants() {
	for _, who := range []string{protocol.PolicyHTTP, "*"} {
		var named []string
		for _, sk := range n.policy.grants[who] {
			if slices.Contains(pseudoSkills, sk) {
				named = append(named, sk)
			}
		}
		if len(named) == 0 {
			continue
		}
		n.log.Warn(fmt.Sprintf("the policy grants anonymous callers (%q) %s: anyone who reaches the edge without a credential may use them "+
			"(security_audit reads the whole audit log, naming every caller; discover_agents makes this node fetch URLs; list_agents, read_resource); "+
			"keep such a policy to an edge on loopback, never on a public address, and grant these to API keys instead (mcpv2 key add NAME --grant …)",
			who, strings.Join(named, ", ")), "grant", who, "skills", named, "file", n.policy.file)
	}
}

// PolicyWarnings reads the policy file and the custom skills file (each
// "" for its default in dataDir) as a node started with them would, and
// returns the grants and limits of skills such a node would not have: the standard
// skills, scan, orchestrate (with withMesh) and the custom skills by name
// (a grant that may be a tool of a custom "mcp" server's "tools": "*" is
// given the benefit of the doubt: the node checks it against the tools). It is
// mcpv2 config show's check; the node itself checks its live registry.
func PolicyWarnings(dataDir, policyFile, skillsFile string, withMesh bool) ([]UnknownGrant, error) {
	policyMust, skillsMust := policyFile != "", skillsFile != ""
	policyFile = cmp.Or(policyFile, filepath.Join(dataDir, "policy.json"))
	skillsFile = cmp.Or(skillsFile, filepath.Join(dataDir, "custom_skills.json"))
	p, err := LoadPolicy(policyFile, policyMust)
	if err != nil {
		return nil, err
	}
	if len(p.grants) == 0 && len(p.rates) == 0 {
		return nil, nil
	}
	known := append(slices.Concat(skills.StandardNames, pseudoSkills), skills.ScanSkill)
	if withMesh {
		known = append(known, OrchestrateSkill)
	}
	var prefixes []string // of the custom "mcp" skills of every tool of a server
	if _, statErr := os.Stat(skillsFile); statErr == nil || skillsMust {
		names, pre, err := custom.FileNames(skillsFile)
		if err != nil {
			return nil, err
		}
		known, prefixes = append(known, names...), pre
	}
	return slices.DeleteFunc(p.UnknownGrants(known), func(u UnknownGrant) bool {
		return slices.ContainsFunc(prefixes, func(pre string) bool { return strings.HasPrefix(u.Skill, pre) })
	}), nil
}

// validGrantKey reports whether who is a policy grant key (SPEC §6,
// docs/spec.md §0).
func validGrantKey(who string) bool {
	if who == "*" || who == protocol.PolicyHTTP || protocol.LooksLikePeerID(who) {
		return true
	}
	if via, ok := strings.CutPrefix(who, protocol.PolicyVia); ok {
		return protocol.LooksLikePeerID(via)
	}
	if name, ok := strings.CutPrefix(who, protocol.PolicyKey); ok {
		return protocol.ValidKeyName(name)
	}
	for _, p := range []string{protocol.PolicyOIDC, protocol.PolicyScope} {
		if v, ok := strings.CutPrefix(who, p); ok {
			return v != "" && len(v) <= 256 && !strings.ContainsFunc(v, unicode.IsControl)
		}
	}
	return false
}

// allowSkill takes one call from caller's bucket for skill, when the policy
// limits that skill (or "*"). When it cannot, it returns false and how long
// until the call would be allowed.
func (p *Policy) allowSkill(caller, skill string, now time.Time) (bool, time.Duration) {
	if l, ok := p.limits[skill]; ok {
		return l.allow(caller, 1, now)
	}
	if l, ok := p.limits["*"]; ok {
		return l.allow(caller+"\x00"+skill, 1, now) // a bucket per skill
	}
	return true, 0
}

// Allows reports whether the policy key who (a PeerID, or "http" for an
// anonymous edge session) may run skill: an open skill, a grant to who, or a
// grant to "*". A grant of every skill ("*") does not reach the
// pseudo-skills: they are granted by name only (grantsSkill).
func (p *Policy) Allows(who, skill string) bool {
	if slices.Contains(openByDefault, skill) {
		return true
	}
	for _, k := range []string{who, "*"} {
		if g, ok := p.grants[k]; ok && grantsSkill(g, skill) {
			return true
		}
	}
	return false
}

// grantsSkill reports whether the grant list g (of a policy key, or an API
// key's --grant) covers skill: it names skill, or it holds "*" and skill is
// no pseudo-skill.
func grantsSkill(g []string, skill string) bool {
	return slices.Contains(g, skill) || (slices.Contains(g, "*") && !slices.Contains(pseudoSkills, skill))
}

// AnonymousGrants reports whether the policy grants anonymous HTTP
// callers ("http", or everyone, "*") a skill beyond the open ones. Safe
// for concurrent use.
func (n *Node) AnonymousGrants() bool {
	for _, k := range []string{protocol.PolicyHTTP, "*"} {
		for _, sk := range n.policy.grants[k] {
			if !slices.Contains(openByDefault, sk) {
				return true
			}
		}
	}
	return false
}

// AccessSummary says in one line who may run what on the node, from its
// policy and secret, for its "ready" log line: e.g. "open to everyone:
// ping, tools/list, agent/card; anonymous HTTP callers also:
// translate_history; PeerIDs granted skills: 2, API keys and OpenID Connect
// subjects or scopes: 1 (policy /data/policy.json); secret holders
// (--secret): every skill". Safe for concurrent use.
func (n *Node) AccessSummary() string {
	everyone := []string{"tools/list", "agent/card"}
	if g := n.policy.grants["*"]; slices.Contains(g, "*") {
		everyone = append([]string{"every skill"}, everyone...)
	} else {
		everyone = append(slices.Concat(openByDefault, g), everyone...)
	}
	parts := []string{"open to everyone: " + strings.Join(everyone, ", ")}
	if g := n.policy.grants[protocol.PolicyHTTP]; len(g) > 0 {
		if slices.Contains(g, "*") {
			g = []string{"every skill"}
		}
		parts = append(parts, "anonymous HTTP callers also: "+strings.Join(g, ", "))
	}
	peers, creds := 0, 0
	for k := range n.policy.grants {
		switch {
		case protocol.LooksLikePeerID(k):
			peers++
		case strings.HasPrefix(k, protocol.PolicyKey), strings.HasPrefix(k, protocol.PolicyOIDC), strings.HasPrefix(k, protocol.PolicyScope):
			creds++
		}
	}
	parts = append(parts, fmt.Sprintf("PeerIDs granted skills: %d, API keys and OpenID Connect subjects or scopes: %d (policy %s)", peers, creds, n.cfg.PolicyFile))
	if len(n.secret) > 0 {
		parts = append(parts, "secret holders (--secret): every skill")
	} else {
		parts = append(parts, "no --secret: no mesh secret holders")
	}
	return strings.Join(parts, "; ")
}

// Permits reports whether c may run skill on this node: the one rule of
// every face (grant), without a mesh session, so that a face can show a
// caller what it may run (the A2A extended card) before it asks. It takes
// nothing from the policy's rate limits. Safe for concurrent use.
func (n *Node) Permits(c protocol.Caller, skill string) bool {
	return n.grant(c, "", protocol.PurposeRPC, skill) == nil
}
