package node

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/mcpv2/mcpv2/discovery"
	"github.com/mcpv2/mcpv2/node/a2aclient"
	"github.com/mcpv2/mcpv2/node/agents"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// The pseudo-skills the policy grants for the agent registry's routes
// (issue 23): a caller granted DiscoverAgentsGrant may have the node read
// and register agents by URL (the REST face's discover), one granted
// ListAgentsGrant may list them. Secret holders need neither.
const (
	DiscoverAgentsGrant = "discover_agents"
	ListAgentsGrant     = "list_agents"
)

// Bridge bounds: what of the bridged agents goes into the node's card,
// which must stay within discovery.MaxCardSize signed.
const (
	maxBridgedAgents = 8
	maxBridgedSkills = 16
	maxBridgedTags   = 8
	maxBridgedText   = 200
	maxBridgedName   = 64
	maxTaskWords     = 8
	taskFindLimit    = 16
)

// AgentsConfig configures the node's registry of external A2A agents.
type AgentsConfig struct {
	// Resolver reads the agents' cards and calls them: the node's A2A
	// client. Nil: an a2aclient.Client over OutboundClient (the outbound
	// scope of --outbound-allow).
	Resolver agents.Resolver
	// Interval is the time between health checks (--agents-interval,
	// default agents.DefaultInterval); TTL how long a card is used
	// (--agents-ttl, default agents.DefaultTTL); Timeout bounds one card
	// fetch (--agents-timeout, default agents.DefaultTimeout).
	Interval, TTL, Timeout time.Duration
	// Max caps the registered agents (default agents.DefaultMaxAgents).
	Max int
}

// bridge is the node's side of the registry: the skills it serves for
// bridged agents and what its card lists of them.
type bridge struct {
	mu     sync.Mutex
	skills map[string]bridgeTarget // mesh skill name → agent skill
	card   []protocol.BridgedAgent
}

// bridgeTarget is one skill of a bridged agent as this node serves it.
type bridgeTarget struct {
	url, skill string
	desc       protocol.SkillDescriptor
}

// startAgents opens the registry of external agents, always (with the
// node's own A2A client over OutboundClient when no resolver is
// configured), and registers the skills of the bridged ones. Its health
// checks run only for agents the operator registered.
func (n *Node) startAgents(c AgentsConfig) error {
	if c.Resolver == nil {
		// The node's own A2A client, through the outbound scope.
		cl, err := a2aclient.New(a2aclient.WithHTTPClient(n.OutboundClient()), a2aclient.WithLogger(n.log))
		if err != nil {
			return fmt.Errorf("node: A2A client: %w", err)
		}
		c.Resolver = cl
	}
	opts := []agents.Option{agents.WithFile(filepath.Join(n.cfg.DataDir, agents.FileName)),
		agents.WithLogger(n.log), agents.WithClock(n.now), agents.WithOnChange(n.syncBridge)}
	if c.Interval > 0 {
		opts = append(opts, agents.WithInterval(c.Interval))
	}
	if c.TTL > 0 {
		opts = append(opts, agents.WithTTL(c.TTL))
	}
	if c.Timeout > 0 {
		opts = append(opts, agents.WithTimeout(c.Timeout))
	}
	if c.Max > 0 {
		opts = append(opts, agents.WithMaxAgents(c.Max))
	}
	// The registry's first check may report before New returns: its
	// syncBridge waits on bridge.mu for n.agents to be set.
	n.bridge.mu.Lock()
	r, err := agents.New(c.Resolver, opts...)
	n.agents = r
	n.bridge.mu.Unlock()
	if err != nil {
		return err
	}
	n.syncBridge()
	return nil
}

// AgentRegistry returns the node's registry of external agents. Every node
// has one (startAgents opens it, with the node's own A2A client when
// Config.Agents.Resolver is nil): nil only on a Node that New did not make.
func (n *Node) AgentRegistry() *agents.Registry { return n.agents }

// errNoAgents is the error of the agents methods on a Node without a
// registry, which New never returns.
var errNoAgents = errors.New("node: no registry of external agents (a Node not made by node.New)")

// bridgeName is a skill-name prefix for an agent: its name lower-cased,
// runs of other characters than a-z, 0-9, '_' and '-' as one '-', at
// most 32 bytes; the URL's host when that leaves nothing.
func bridgeName(a protocol.ExternalAgent) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(a.Name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 32 {
			break
		}
	}
	if s := strings.Trim(b.String(), "-"); s != "" {
		return s
	}
	if u, err := url.Parse(a.URL); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "agent"
}

// clip cuts s to at most n bytes, at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// meshToolNames are the MCP face's own tools (edge/mcp ToolMeshFind and
// ToolMeshCall), which tools/list shows beside the skills; node cannot
// import edge, so they are named here.
var meshToolNames = []string{"mesh_find", "mesh_call"}

// bridgeNameRE is the rule of a bridged skill's name: that of a custom
// skill (node/skills/custom).
var bridgeNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// reservedNames are the names no bridged skill may take, even when the
// node has no such skill now: the pseudo-skills the policy grants, the
// standard skills, scan, orchestrate and the MCP face's tools.
func reservedNames() map[string]bool {
	out := map[string]bool{OrchestrateSkill: true, skills.ScanSkill: true}
	for _, l := range [][]string{pseudoSkills, skills.StandardNames, meshToolNames} {
		for _, s := range l {
			out[s] = true
		}
	}
	return out
}

// sanitizeSkillName maps an agent's skill id to the custom-skill name rule:
// each run of other characters than A-Z, a-z, 0-9, '_', '.' and '-' as one
// '-', no leading or trailing '-' or '.', at most 64 bytes ("" when
// nothing is left).
func sanitizeSkillName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 2*maxBridgedName {
			break
		}
	}
	return clip(strings.Trim(b.String(), "-."), maxBridgedName)
}

// urlTag is a short tag of an agent's URL, which tells apart two bridged
// agents of one name.
func urlTag(u string) string {
	h := sha256.Sum256([]byte(u))
	return hex.EncodeToString(h[:3])
}

// bridgedSkill is one skill of a bridged agent while its name is chosen.
type bridgedSkill struct {
	agent int    // index in the agents bridged
	skill string // the agent's id of the skill
	base  string // sanitizeSkillName of it
	sk    protocol.SkillDescriptor
}

// bridgeNames names the skills of the bridged agents as this node serves
// them. A name is computed from its agent alone, never from which agent
// came first, so that adding an agent never moves a name (and the grants
// that name it) to another agent: a skill keeps its own (sanitised) name
// when no other bridged agent offers that name and it is none of the
// node's (taken) or reservedNames; otherwise every agent offering it
// serves it as "<agent>.<skill>" ("<agent>-<url tag>.<skill>" when two
// bridged agents share a name). A skill that still cannot be named is left
// out (logged). The result is by agent, in the order of list.
func (n *Node) bridgeNames(list []protocol.ExternalAgent, taken map[string]bool) [][]bridgedSkill {
	reserved := reservedNames()
	var all []bridgedSkill
	plain := map[string]int{}
	for ai, a := range list {
		for i, sk := range a.Skills {
			if i == maxBridgedSkills {
				n.log.Warn("agents: a bridged agent has more skills than a card holds; the rest are not bridged", "url", a.URL, "max", maxBridgedSkills)
				break
			}
			base := sanitizeSkillName(sk.Name)
			if base == "" {
				n.log.Warn("agents: a bridged skill has no usable name; not bridged", "skill", clip(sk.Name, 80), "url", a.URL)
				continue
			}
			if base != sk.Name {
				n.log.Info("agents: a bridged skill's name is not a skill name; it is served sanitised", "skill", clip(sk.Name, 80), "as", base, "url", a.URL)
			}
			all = append(all, bridgedSkill{agent: ai, skill: sk.Name, base: base, sk: sk})
			plain[base]++
		}
	}
	qual := func(bs bridgedSkill, tagged bool) string {
		prefix := bridgeName(list[bs.agent])
		if tagged {
			prefix = clip(prefix, 24) + "-" + urlTag(list[bs.agent].URL)
		}
		return clip(prefix+"."+bs.base, maxBridgedName)
	}
	qcount := map[string]int{}
	for _, bs := range all {
		if plain[bs.base] > 1 || taken[bs.base] || reserved[bs.base] {
			qcount[qual(bs, false)]++
		}
	}
	out := make([][]bridgedSkill, len(list))
	used := map[string]bool{}
	for _, bs := range all {
		name := bs.base
		if plain[name] > 1 || taken[name] || reserved[name] {
			name = qual(bs, qcount[qual(bs, false)] > 1)
			n.log.Info("agents: a bridged skill's name is taken, reserved or offered by another bridged agent; it is served qualified", "skill", bs.base, "as", name, "url", list[bs.agent].URL)
		}
		if used[name] || taken[name] || reserved[name] || !bridgeNameRE.MatchString(name) {
			n.log.Warn("agents: a bridged skill cannot be named; not bridged", "skill", clip(bs.skill, 80), "as", name, "url", list[bs.agent].URL)
			continue
		}
		used[name] = true
		bs.sk.Name = name
		out[bs.agent] = append(out[bs.agent], bs)
	}
	return out
}

// cardMargin is what the signed card's envelope (key, signature, framing)
// and later growth of the node's addresses may add to the card's JSON.
const cardMargin = 2 << 10

// bridgeBudget is how many bytes of JSON the bridged agents may add to the
// node's card (r.mu of the bridge held): discovery.MaxCardSize less the
// card without them (the node's own skills, its addresses) and cardMargin.
func (n *Node) bridgeBudget() int {
	own := slices.DeleteFunc(n.reg.List(), func(d protocol.SkillDescriptor) bool {
		_, ours := n.bridge.skills[d.Name]
		return ours
	})
	c := protocol.AgentCard{Name: n.cfg.Name, Description: n.cfg.Description, Version: Version, PeerID: strings.Repeat("x", 52),
		ProtocolVersions: []string{protocol.Version}, Skills: own,
		Capabilities: protocol.Capabilities{LLMMode: n.cfg.LLMMode, Providers: slices.Clone(protocol.Providers), MaxBatch: protocol.MaxBatchSize, MTLS: true},
		Endpoints:    protocol.Endpoints{HTTP: n.cfg.HTTPEndpoint}, Seq: 1 << 62, IssuedAt: 1 << 40}
	if c.Name == "" {
		c.Name = "mcpv2-xxxxxxxx"
	}
	if c.Description == "" {
		c.Description = "An mcpv2 agent."
	}
	if n.host != nil {
		c.Addrs = n.P2PAddrs()
	}
	return discovery.MaxCardSize - jsonSize(c) - cardMargin
}

// syncBridge brings the node's skills and card in line with the bridged
// agents of the registry: each skill of a bridged agent is a skill of this
// node, named by bridgeNames, and the card lists each bridged agent with
// its health, within the room the node's own card leaves (bridgeBudget).
// The card is republished.
func (n *Node) syncBridge() {
	n.bridge.mu.Lock()
	defer n.bridge.mu.Unlock()
	if n.agents == nil {
		return
	}
	taken := map[string]bool{}
	for _, name := range n.reg.Names() {
		if _, ours := n.bridge.skills[name]; !ours {
			taken[name] = true
		}
	}
	var list []protocol.ExternalAgent
	for _, a := range n.agents.List() {
		if !a.Bridged {
			continue
		}
		if len(list) == maxBridgedAgents {
			n.log.Warn("agents: too many bridged agents for the card; this one is not bridged", "url", a.URL, "max", maxBridgedAgents)
			continue
		}
		list = append(list, a)
	}
	names := n.bridgeNames(list, taken)
	want := map[string]bridgeTarget{}
	var card []protocol.BridgedAgent
	budget := n.bridgeBudget()
	for ai, a := range list {
		ba := protocol.BridgedAgent{Name: clip(a.Name, maxBridgedName), URL: a.URL, Description: clip(a.Description, maxBridgedText),
			Healthy: a.Healthy, Skills: []string{}}
		if size := jsonSize(ba) + 1; size > budget {
			n.log.Warn("agents: no room left in the card for this bridged agent; not bridged", "url", a.URL)
			continue
		} else {
			budget -= size
		}
		for _, bs := range names[ai] {
			name := bs.sk.Name
			tags := slices.Clone(bs.sk.Tags[:min(len(bs.sk.Tags), maxBridgedTags)])
			for i := range tags {
				tags[i] = clip(tags[i], maxBridgedName)
			}
			desc := clip(bs.sk.Description, maxBridgedText)
			if desc == "" {
				desc = fmt.Sprintf("%s of the A2A agent %s", bs.base, clip(a.Name, maxBridgedName))
			}
			// As the registry keeps it (AddRaw's schema included), plus
			// its name in the agent's entry. Not ReadOnly: an A2A card
			// does not say whether a skill has side effects.
			d := protocol.SkillDescriptor{Name: name, Description: desc, Tags: tags, InputSchema: json.RawMessage(`{"type":"object"}`)}
			if size := jsonSize(d) + 1 + len(name) + 3; size > budget {
				n.log.Warn("agents: no room left in the card for a bridged skill; the rest are not bridged", "skill", name, "url", a.URL)
				break
			} else {
				budget -= size
			}
			want[name] = bridgeTarget{url: a.URL, skill: bs.skill, desc: d}
			ba.Skills = append(ba.Skills, name)
		}
		card = append(card, ba)
	}
	for name, t := range n.bridge.skills {
		if w, ok := want[name]; !ok || w.url != t.url || w.skill != t.skill || !sameDesc(w.desc, t.desc) {
			n.reg.Remove(name)
			delete(n.bridge.skills, name)
		}
	}
	if n.bridge.skills == nil {
		n.bridge.skills = map[string]bridgeTarget{}
	}
	for name, t := range want {
		if _, ok := n.bridge.skills[name]; ok {
			continue
		}
		if err := n.reg.AddRaw(t.desc, n.bridgeHandler(t)); err != nil {
			n.log.Warn("agents: bridge a skill", "skill", name, "url", t.url, "err", err)
			ba := slices.IndexFunc(card, func(b protocol.BridgedAgent) bool { return b.URL == t.url })
			card[ba].Skills = slices.DeleteFunc(card[ba].Skills, func(s string) bool { return s == name })
			continue
		}
		n.bridge.skills[name] = t
	}
	n.bridge.card = card
	n.CardChanged()
}

// jsonSize is the length of v's JSON (0 when it has none).
func jsonSize(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}

func sameDesc(a, b protocol.SkillDescriptor) bool {
	return a.Name == b.Name && a.Description == b.Description && slices.Equal(a.Tags, b.Tags)
}

// bridgeHandler calls skill t of a bridged agent: at once a clear error
// when the agent is unhealthy (the orchestrator then fails over). Its
// callers are not the operator: an error names the agent's URL and a
// category (agents.Category), never the dial error; the detail is logged.
func (n *Node) bridgeHandler(t bridgeTarget) func(ctx context.Context, args json.RawMessage) (any, error) {
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		out, err := n.agents.Call(ctx, t.url, t.skill, args)
		if err != nil && !errors.Is(err, agents.ErrNoAgent) {
			n.log.Info("agents: a call of a bridged agent failed", "url", t.url, "skill", t.skill, "err", err)
		}
		switch {
		case errors.Is(err, agents.ErrUnhealthy):
			why := n.agents.PublicError(t.url)
			if why == "" {
				why = t.url + ": " + agents.CatUnreachable
			}
			return nil, protocol.Errorf(protocol.CodeToolExecution, "the A2A agent that this node bridges is unhealthy (%s)", why)
		case errors.Is(err, agents.ErrNoAgent):
			return nil, protocol.Errorf(protocol.CodeToolExecution, "the A2A agent at %s is no longer bridged by this node", t.url)
		case err != nil:
			if perr, ok := errors.AsType[*protocol.Error](err); ok {
				return nil, perr
			}
			cat := agents.Category(err)
			if cat == agents.CatBadCard {
				cat = "it failed the task"
			}
			return nil, protocol.Errorf(protocol.CodeToolExecution, "the A2A agent at %s (bridged by this node) failed skill %q: %s", t.url, t.skill, cat)
		}
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		return out, nil
	}
}

// bridgedCard is what the node's card lists of its bridged agents.
func (n *Node) bridgedCard() []protocol.BridgedAgent {
	n.bridge.mu.Lock()
	defer n.bridge.mu.Unlock()
	out := slices.Clone(n.bridge.card)
	for i := range out {
		out[i].Skills = slices.Clone(out[i].Skills)
	}
	return out
}

// Operator returns the caller the node's owner acts as on its own machine:
// the local API (mcpv2 agents) and the agents of --agents at start. It is
// a secret holder.
func Operator() Caller {
	return Caller{ID: "local", Via: "local", Kind: protocol.CallerSecretHolder, Owner: protocol.OwnerSecret}
}

// operator fails unless c is a secret holder: only the node's operator
// registers, bridges or removes external agents.
func operator(c Caller, what string) error {
	if c.Kind != protocol.CallerSecretHolder {
		return protocol.Errorf(protocol.CodeNotPermitted, "not permitted: only the node's operator (a secret holder, or mcpv2 agents on the node's control socket) may %s", what)
	}
	return nil
}

// withBridgedBy marks the bridged agents of list as bridged by this node.
func (n *Node) withBridgedBy(list []protocol.ExternalAgent) []protocol.ExternalAgent {
	for i := range list {
		if list[i].Bridged {
			list[i].BridgedBy = n.PeerID()
		}
	}
	return list
}

// AddAgents registers the external A2A agents at urls (mcpv2 agents add),
// bridging them into the mesh with bridge: each entry is the agent, or
// Healthy false and LastError why it was not added. Only the operator (a
// secret holder) may. Audited ("agents add", each URL).
func (n *Node) AddAgents(ctx context.Context, c Caller, urls []string, bridge bool) ([]protocol.ExternalAgent, error) {
	if err := operator(c, "register external agents"); err != nil {
		n.audit(ctx, c, "agents add", "", protocol.AsError(err), time.Now())
		return nil, err
	}
	if n.agents == nil {
		return nil, errNoAgents
	}
	if len(urls) == 0 || len(urls) > agents.MaxDiscover {
		return nil, fmt.Errorf("node: agents add: %d URLs: want 1 to %d", len(urls), agents.MaxDiscover)
	}
	// Each URL's card is read within the registry's own timeout, a few at
	// a time: one slow agent does not use up the others' time.
	out := make([]protocol.ExternalAgent, len(urls))
	var g errgroup.Group
	g.SetLimit(agents.DefaultParallel)
	for i, u := range urls {
		g.Go(func() error {
			start := time.Now()
			a, err := n.agents.Add(ctx, u, bridge)
			var perr *protocol.Error
			if err != nil {
				perr = protocol.Errorf(protocol.CodeToolExecution, "%v", err)
				a = protocol.ExternalAgent{URL: u, LastError: err.Error(), LastChecked: n.now(), Skills: []protocol.SkillDescriptor{}}
			}
			n.audit(ctx, c, "agents add", clip(u, 256), perr, start)
			out[i] = a
			return nil
		})
	}
	_ = g.Wait()
	return n.withBridgedBy(out), nil
}

// RemoveAgent forgets the external agent at u and stops bridging it. Only
// the operator may. Audited ("agents remove").
func (n *Node) RemoveAgent(ctx context.Context, c Caller, u string) error {
	start := time.Now()
	err := operator(c, "remove external agents")
	if err == nil {
		if n.agents == nil {
			return errNoAgents
		}
		err = n.agents.Remove(u)
	}
	n.audit(ctx, c, "agents remove", clip(u, 256), protocol.AsError(err), start)
	return err
}

// DiscoverAgents reads the cards of the agents at urls, the REST face's
// POST /api/v1/a2a/discover. It registers nothing (only the operator's
// AddAgents does): the agents that answered are cached for the registry's
// TTL (agents.Registry.Discover), marked Discovered. Each URL has its
// entry, in order: the agent, or Healthy false and LastError the URL and a
// category (unreachable, refused by the outbound scope, bad card,
// timeout; the detail is logged). It needs a grant: a secret holder, or a
// caller the policy grants the pseudo-skill "discover_agents". Audited
// ("agents discover").
func (n *Node) DiscoverAgents(ctx context.Context, c Caller, urls []string) ([]protocol.ExternalAgent, error) {
	start := time.Now()
	if perr := n.grant(c, "", protocol.PurposeRPC, DiscoverAgentsGrant); perr != nil {
		n.audit(ctx, c, "agents discover", DiscoverAgentsGrant, perr, start)
		return nil, perr
	}
	if n.agents == nil {
		return nil, errNoAgents
	}
	out, err := n.agents.Discover(ctx, urls)
	n.audit(ctx, c, "agents discover", DiscoverAgentsGrant, protocol.AsError(err), start)
	return n.withBridgedBy(out), err
}

// Agents lists the registered external agents, then the discovered ones
// still cached (Discovered), each by URL, without their raw cards: for a
// secret holder, or a caller the policy grants the pseudo-skill
// "list_agents". A secret holder reads each error as it was; any other
// caller reads the URL and a category.
func (n *Node) Agents(ctx context.Context, c Caller) ([]protocol.ExternalAgent, error) {
	if perr := n.grant(c, "", protocol.PurposeRPC, ListAgentsGrant); perr != nil {
		n.audit(ctx, c, "agents list", ListAgentsGrant, perr, time.Now())
		return nil, perr
	}
	if n.agents == nil {
		return []protocol.ExternalAgent{}, nil
	}
	return n.withBridgedBy(n.agents.Listing(c.Kind == protocol.CallerSecretHolder)), nil
}

// FindAgentsForTask ranks agents for a free-text task with the seed's
// weights (discovery.ScoreTask, and 1.0 when healthy): the mesh agents
// that a find of the task's words (at most 8) returns, each agent they
// bridge, and the external agents registered here. At most limit (default
// discovery.DefaultFindLimit), best first; an error only when the task has
// no words to rank by, or ctx ended.
func (n *Node) FindAgentsForTask(ctx context.Context, task string, limit int) ([]protocol.TaskMatch, error) {
	var find FindFunc
	if n.disc != nil {
		find = n.Find
	}
	var registered []protocol.ExternalAgent
	if n.agents != nil {
		registered = n.agents.List()
	}
	return RankAgentsForTask(ctx, find, n.PeerID(), registered, task, limit)
}

// FindFunc finds mesh agents by skill or tag (Node.Find, discovery.Find).
type FindFunc func(ctx context.Context, skillOrTag string, limit int) ([]protocol.FindResult, error)

// RankAgentsForTask is FindAgentsForTask over the finds of find (nil: no
// mesh) and the agents registered on the node self (its PeerID; those it
// bridges count as bridged by it): mcpv2 find --task runs it from a client.
func RankAgentsForTask(ctx context.Context, find FindFunc, self string, registered []protocol.ExternalAgent, task string, limit int) ([]protocol.TaskMatch, error) {
	words := discovery.TaskWords(task)
	if len(words) == 0 {
		return nil, fmt.Errorf("node: find agents for a task: %q has no words to rank agents by", clip(task, 80))
	}
	if limit <= 0 {
		limit = discovery.DefaultFindLimit
	}
	type key struct{ peer, url string }
	var (
		mu   sync.Mutex
		best = map[key]protocol.TaskMatch{}
	)
	keep := func(m protocol.TaskMatch) {
		if m.Score == 0 {
			return
		}
		if m.Healthy {
			m.Score += discovery.ScoreReachable
		}
		mu.Lock()
		defer mu.Unlock()
		k := key{m.PeerID, m.URL}
		if m.Kind == "bridged" && m.PeerID == self {
			k.peer = "" // the registry's entry and the card's are one agent
		}
		if prev, ok := best[k]; !ok || m.Score > prev.Score {
			best[k] = m
		}
	}
	if find != nil {
		qs := taskOrder(task, words)
		qs = qs[:min(len(qs), maxTaskWords)]
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(4)
		for _, q := range qs {
			g.Go(func() error {
				res, err := find(gctx, q, taskFindLimit)
				if err != nil {
					return nil // a word no agent offers: the others may
				}
				for _, r := range res {
					if r.Bridged != nil {
						bc := discovery.BridgedCard(r.Card, *r.Bridged)
						keep(protocol.TaskMatch{Kind: "bridged", Name: r.Bridged.Name, Description: r.Bridged.Description, PeerID: r.Card.PeerID,
							URL: r.Bridged.URL, Skills: slices.Clone(r.Bridged.Skills), Score: discovery.ScoreTask(bc, words), Healthy: r.Reachable})
						continue
					}
					own := r.Card
					own.Skills = slices.DeleteFunc(slices.Clone(own.Skills), func(sk protocol.SkillDescriptor) bool {
						_, b := r.Card.BridgedSkill(sk.Name)
						return b
					})
					names := make([]string, 0, len(own.Skills))
					for _, sk := range own.Skills {
						names = append(names, sk.Name)
					}
					keep(protocol.TaskMatch{Kind: "mesh", Name: own.Name, Description: own.Description, PeerID: own.PeerID,
						Skills: names, Score: discovery.ScoreTask(own, words), Healthy: r.Reachable})
				}
				return nil
			})
		}
		_ = g.Wait()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, a := range registered {
		m := protocol.TaskMatch{Kind: "external", Name: a.Name, Description: a.Description, URL: a.URL, Healthy: a.Healthy, Skills: []string{}}
		for _, sk := range a.Skills {
			m.Skills = append(m.Skills, sk.Name)
		}
		if a.Bridged {
			m.Kind, m.PeerID = "bridged", self
		}
		m.Score = discovery.ScoreTask(protocol.AgentCard{Name: a.Name, Description: a.Description, Skills: a.Skills}, words)
		keep(m)
	}
	out := make([]protocol.TaskMatch, 0, len(best))
	for _, m := range best {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b protocol.TaskMatch) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), strings.Compare(a.PeerID, b.PeerID), strings.Compare(a.URL, b.URL))
	})
	return out[:min(len(out), limit)], nil
}

// taskOrder is the words of task (discovery.TaskWords) in the order the
// task gives them, each once: the first maxTaskWords are searched.
func taskOrder(task string, words map[string]bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(task, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		w = strings.ToLower(w)
		if words[w] && !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}
