package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpv2/mcpv2/node/guard"
	"github.com/mcpv2/mcpv2/node/llm"
	"github.com/mcpv2/mcpv2/node/orchestrate"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// OrchestrateSkill is the name of the skill that runs an orchestration.
const OrchestrateSkill = "orchestrate"

// OrchestrateArgs are the arguments of the orchestrate skill.
type OrchestrateArgs struct {
	Request string          `json:"request" jsonschema:"what to do, in plain words; it is split into subtasks, each run by the best agent on the mesh"`
	Plan    json.RawMessage `json:"plan,omitempty" jsonschema:"a plan to run instead of splitting the request: {subtasks:[{id, text, skill, arguments, depends_on}]}"`
}

// registerOrchestrate adds the orchestrate skill: a request split into
// subtasks, each sent to the best agent the DHT knows for its skill, run
// concurrently as their dependencies allow, answered as one result with
// what happened to each part (node/orchestrate). The subtasks run with the
// caller's own grants, as the gateway forwards (SPEC §6): a caller that may
// not run a skill here gets no agent to run it for them.
func (n *Node) registerOrchestrate() {
	skills.Add(n.reg, OrchestrateSkill,
		"Split a request into subtasks, route each to the best agent on the mesh for its skill, run them concurrently (with failover), and return one answer with each part's agent, status, attempts and timing.",
		[]string{"orchestration", "planning", "mesh"}, n.orchestrate, skills.SchemaOption(func(s *jsonschema.Schema) { s.Properties["plan"].Type = "object" }))
	// With a real backend the request reaches an LLM (the planner).
	if err := n.reg.SetGuard(OrchestrateSkill, map[string]guard.Kind{"request": guard.Prompt}); err != nil {
		panic(err.Error())
	}
}

func (n *Node) orchestrate(ctx context.Context, a OrchestrateArgs) (orchestrate.Result, error) {
	ci := skills.CallInfoFrom(ctx)
	c := Caller{ID: ci.Caller, Via: ci.Via, Kind: ci.Kind}
	m := meshCaller{n: n, c: c}
	o, err := n.orchestrator(m, m, orchestrate.WithAuthorize(m.authorize))
	if err != nil {
		return orchestrate.Result{}, err
	}
	var res orchestrate.Result
	if len(a.Plan) > 0 {
		var plan orchestrate.Plan
		if plan, err = orchestrate.ParsePlan(a.Plan); err != nil {
			return res, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for orchestrate: plan: %v", err)
		}
		plan.Source = orchestrate.SourceGiven
		res, err = o.RunPlan(ctx, a.Request, plan, progressOf(ctx))
	} else {
		res, err = o.Run(ctx, a.Request, progressOf(ctx))
	}
	if errors.Is(err, orchestrate.ErrInvalidRequest) {
		return res, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for orchestrate: %v", err)
	}
	fitResult(&res, n.maxMsg/2)
	return res, err
}

// progressOf is the run's progress callback when the call's face listens
// (protocol.WithProgress: a task of A2A or MCP): each state change of a
// subtask becomes a line and the event itself. Nil when no one listens.
func progressOf(ctx context.Context) func(orchestrate.Event) {
	report := protocol.ProgressFrom(ctx)
	if report == nil {
		return nil
	}
	return func(e orchestrate.Event) {
		line := fmt.Sprintf("subtask %s: %s", e.Subtask, e.State)
		if e.Agent != "" {
			line += fmt.Sprintf(" (agent %s, attempt %d)", e.Agent, e.Attempt)
		}
		if e.Error != "" {
			line += ": " + e.Error
		}
		report(line, e)
	}
}

// fitResult keeps an orchestration's answer within budget bytes of JSON
// results, so that it fits in one message: the largest subtask results
// are dropped first, each replaced by an error that says so (the parts
// ran; their agents' audit lines keep the record).
func fitResult(res *orchestrate.Result, budget int) {
	total := 0
	for _, st := range res.Subtasks {
		total += len(st.Result)
	}
	for total > budget {
		big := -1
		for i, st := range res.Subtasks {
			if big < 0 || len(st.Result) > len(res.Subtasks[big].Result) {
				big = i
			}
		}
		if big < 0 || len(res.Subtasks[big].Result) == 0 {
			return
		}
		st := &res.Subtasks[big]
		total -= len(st.Result)
		st.Error = fmt.Sprintf("its result of %d bytes was dropped: the whole answer would not fit in one message (%d bytes of results at most)", len(st.Result), budget)
		st.Result = nil
	}
}

// orchestrator builds the orchestrator of one run: it finds agents through
// f (this node's discovery), plans and summarizes with the node's LLM
// backend when that is a real one, and calls through c.
func (n *Node) orchestrator(f orchestrate.Finder, c orchestrate.Caller, opts ...orchestrate.Option) (*orchestrate.Orchestrator, error) {
	base := []orchestrate.Option{orchestrate.WithLogger(n.log), orchestrate.WithLatency(n.latency)}
	if b := n.cfg.LLM; b != nil && b.Name() != llm.KindLocal {
		base = append(base, orchestrate.WithPlanner(orchestrate.NewLLMPlanner(b, n.reg.List())), orchestrate.WithSummarizer(orchestrate.NewLLMSummarizer(b)))
	}
	return orchestrate.New(f, c, append(base, opts...)...)
}

// latency is the host's measured round-trip time to a peer, for ties
// between equally ranked agents.
func (n *Node) latency(peerID string) (time.Duration, bool) {
	pid, err := n.client.decodePeer(peerID)
	if err != nil {
		return 0, false
	}
	d := n.host.Peerstore().LatencyEWMA(pid)
	return d, d > 0
}

// meshCaller runs an orchestration's calls as the caller c of the
// orchestrate skill: on this node through Handle, on another through
// Forward, both with c's grants. It is also the run's Finder and its
// authorizer: a subtask's skill is checked against c's grants before any
// find, and c's finds are counted against c's find budget.
type meshCaller struct {
	n *Node
	c Caller
}

// authorize is the check of a subtask before it is assigned: the skill
// must be one c may run (the node's grant, as the gateway applies it), and
// not orchestrate itself. A refusal is audited ("orchestrate assign").
func (m meshCaller) authorize(ctx context.Context, skill string) error {
	if skill == OrchestrateSkill {
		return protocol.Errorf(protocol.CodeInvalidParams, "invalid params: an orchestration's subtask may not be another orchestration")
	}
	ctx = protocol.Uncounted(ctx) // the orchestrate call is counted, not its parts
	start := time.Now()
	slot := protocol.Slot{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: protocol.MethodToolsCall,
		Params: protocol.AppendCallParams(nil, skill, nil)}
	if perr := m.n.gatewayGrant(m.c, &slot); perr != nil {
		m.n.audit(ctx, m.c, "orchestrate assign", skill, perr, start)
		return perr
	}
	return nil
}

// Find implements orchestrate.Finder: the node's Find, counted against
// c's find budget (Config.FindRate per second, per caller). A find waits
// for its turn at most maxFindWait; past that it is refused -32005. Each
// find is audited ("orchestrate find", the skill or tag as the skill).
func (m meshCaller) Find(ctx context.Context, skillOrTag string, limit int) ([]protocol.FindResult, error) {
	ctx = protocol.Uncounted(ctx) // the orchestrate call is counted, not its parts
	start := time.Now()
	ok, wait, err := m.n.finds.wait(ctx, m.c.ID, maxFindWait, start)
	if err != nil {
		return nil, err
	}
	if !ok {
		rate := m.n.cfg.FindRate
		if rate == 0 {
			rate = DefaultFindRate
		}
		perr := &protocol.Error{Code: protocol.CodeRateLimited,
			Message: fmt.Sprintf("rate limited: an orchestration's finds count against its caller's find budget of %g per second on this node (--find-rate-limit); retry after %dms",
				rate, wait.Milliseconds()),
			Data: map[string]any{"retry_after_ms": wait.Milliseconds(), "budget": "find"}}
		m.n.audit(ctx, m.c, "orchestrate find", skillOrTag, perr, start)
		return nil, perr
	}
	res, err := m.n.Find(ctx, skillOrTag, limit)
	var perr *protocol.Error
	if err != nil {
		perr = protocol.AsError(err)
	}
	m.n.audit(ctx, m.c, "orchestrate find", skillOrTag, perr, start)
	return res, err
}

// CallSkill implements orchestrate.Caller.
func (m meshCaller) CallSkill(ctx context.Context, agent protocol.Address, skill string, args json.RawMessage) (json.RawMessage, error) {
	if skill == OrchestrateSkill {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: an orchestration's subtask may not be another orchestration")
	}
	ctx = protocol.Uncounted(ctx) // the orchestrate call is counted, not its subtasks
	slot := protocol.Slot{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: protocol.MethodToolsCall,
		Params: protocol.AppendCallParams(nil, skill, args)}
	msg := protocol.AppendSlot(nil, &slot)
	if agent.PeerID == m.n.PeerID() {
		// Handle applies the caller's grants, limits and guard, and audits.
		out, _ := m.n.Handle(ctx, m.c, msg)
		return oneResult(agent.PeerID, out, nil)
	}
	// Elsewhere: the caller's grants, its rate and per-skill limits here,
	// as if it called the skill itself, and one audit line per subtask
	// naming the agent, so that an operator can trace what an orchestration
	// ran in whose name.
	start := time.Now()
	method := "orchestrate tools/call " + agent.PeerID
	perr := m.n.gatewayGrant(m.c, &slot)
	if perr == nil {
		if ok, wait := m.n.limits.allow(m.c.ID, 1, start); !ok {
			perr = &protocol.Error{Code: protocol.CodeRateLimited, Message: fmt.Sprintf("rate limited: retry after %dms", wait.Milliseconds()),
				Data: map[string]any{"retry_after_ms": wait.Milliseconds()}}
		} else if ok, wait := m.n.policy.allowSkill(m.c.ID, skill, start); !ok {
			perr = &protocol.Error{Code: protocol.CodeRateLimited,
				Message: fmt.Sprintf("rate limited: this node's policy limits %q per caller; retry after %dms", skill, wait.Milliseconds()),
				Data:    map[string]any{"retry_after_ms": wait.Milliseconds(), "skill": skill}}
		}
	}
	if perr != nil {
		m.n.audit(ctx, m.c, method, skill, perr, start)
		return nil, perr
	}
	out, err := m.n.Forward(ctx, m.c, agent.PeerID, msg)
	res, err := oneResult(agent.PeerID, out, err)
	m.n.audit(ctx, m.c, method, skill, protocol.AsError(err), start)
	return res, err
}

// oneResult reads the one response of a one-slot call.
func oneResult(agent string, out []byte, err error) (json.RawMessage, error) {
	if err != nil {
		return nil, err
	}
	resps, err := protocol.ParseResponses(out)
	if err != nil || len(resps) != 1 {
		return nil, fmt.Errorf("node: orchestrate: %s answered %d responses (%v)", agent, len(resps), err)
	}
	if resps[0].Error != nil {
		return nil, resps[0].Error
	}
	return resps[0].Result, nil
}
