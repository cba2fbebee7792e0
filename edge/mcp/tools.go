package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// The mesh tools, beside the node's own skills.
const (
	// ToolMeshFind finds agents of the mesh by skill or tag.
	ToolMeshFind = "mesh_find"
	// ToolMeshCall runs a skill of another agent of the mesh.
	ToolMeshCall = "mesh_call"
)

var (
	// mesh_find's query is "skill", the name mesh_call gives the same
	// thing; "skill_or_tag", its name before issue 26, is still accepted
	// as an alias (the schema says so, and requires only the canonical
	// name: a client sends one of the two).
	meshFindSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"skill":{"type":"string","minLength":1,"maxLength":256,"description":"a skill name (e.g. translate_history) or a tag (e.g. llm): the name mesh_call takes as skill"},` +
		`"skill_or_tag":{"type":"string","minLength":1,"maxLength":256,"description":"deprecated: the old name of skill, still accepted; send skill instead (not both)"},` +
		`"limit":{"type":"integer","minimum":1,"maximum":100,"description":"how many agents at most (default 10)"}},` +
		`"required":["skill"],"additionalProperties":false}`)
	meshCallSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"peer":{"type":"string","minLength":1,"description":"the agent's PeerID (12D3Koo…), as mesh_find returns it"},` +
		`"skill":{"type":"string","minLength":1,"description":"the skill to run on that agent"},` +
		`"arguments":{"type":"object","description":"the skill's arguments"}},` +
		`"required":["peer","skill"],"additionalProperties":false}`)
	meshTools = []*sdk.Tool{
		{Name: ToolMeshFind, Title: "Find agents on the mesh",
			Description: "Find agents of the mcpv2 mesh that offer a skill or a tag, ranked best first (skill match, tag match, reachable now); each with its PeerID, skills and addresses.",
			InputSchema: meshFindSchema, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(true)}},
		{Name: ToolMeshCall, Title: "Call an agent on the mesh",
			Description: "Run a skill of another agent of the mcpv2 mesh (reached over libp2p, through relays if it is behind NAT) and return its result. The call carries your grants on this node, never more.",
			InputSchema: meshCallSchema, Annotations: &sdk.ToolAnnotations{OpenWorldHint: ptr(true)}},
	}
)

func ptr[T any](v T) *T { return &v }

// listTools answers tools/list: the node's skills as Handle lists them, with
// their input schemas, then the mesh tools.
func (f *Face) listTools(ctx context.Context, c protocol.Caller) (*sdk.ListToolsResult, error) {
	out, refused := f.b.Handle(ctx, c, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	res, perr := protocol.OneResult(out, refused)
	if perr != nil {
		return nil, protocolToWire(perr)
	}
	var list struct {
		Tools []protocol.SkillDescriptor `json:"tools"`
	}
	if err := json.Unmarshal(res, &list); err != nil {
		return nil, protocolToWire(protocol.Errorf(protocol.CodeInternal, "tools/list: the node's answer could not be read"))
	}
	tools := make([]*sdk.Tool, 0, len(list.Tools)+len(meshTools))
	for _, d := range list.Tools {
		schema := d.InputSchema
		if len(schema) == 0 || !json.Valid(schema) {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		t := &sdk.Tool{Name: d.Name, Description: d.Description, InputSchema: schema,
			Meta: sdk.Meta{"mcpv2/tags": d.Tags}}
		if d.ReadOnly {
			// The skill says it has no side effect (SkillDescriptor.ReadOnly).
			t.Annotations = &sdk.ToolAnnotations{ReadOnlyHint: true}
		}
		tools = append(tools, t)
	}
	tools = append(tools, meshTools...)
	return &sdk.ListToolsResult{Tools: tools}, nil
}

// callTool answers tools/call. A skill's failure, or a refusal of the call
// (not permitted, rate limited), is a result with isError set, never a
// protocol error, so that the model sees it.
func (f *Face) callTool(ctx context.Context, c protocol.Caller, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	if req == nil || req.Params == nil {
		return nil, protocolToWire(protocol.Errorf(protocol.CodeInvalidParams, "invalid params: tools/call needs a name"))
	}
	name, args := req.Params.Name, req.Params.Arguments
	if len(bytes.TrimSpace(args)) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		args = json.RawMessage(`{}`)
	}
	var res *sdk.CallToolResult
	switch name {
	case ToolMeshFind:
		res = f.meshFind(ctx, c, args)
	case ToolMeshCall:
		res = f.meshCall(ctx, c, args)
	default:
		res = toolResult(f.call(ctx, c, name, args))
	}
	if req.ProtocolVersion() >= statelessEra {
		res = completed(res)
	}
	return res, nil
}

// completeCall is an empty tool result whose resultType is "complete".
// MCP 2026-07-28 requires the member on every tools/call result; the
// go-sdk sets it (an unexported field) only on the results of the tools
// it runs itself, and the face runs its own.
var completeCall = func() sdk.CallToolResult {
	var r sdk.CallToolResult
	if err := json.Unmarshal([]byte(`{"resultType":"complete","content":[]}`), &r); err != nil {
		panic("mcp: completeCall: " + err.Error())
	}
	return r
}()

// completed is r marked complete (resultType), for a client of 2026-07-28
// or later; a client of an older era gets no such member, as from the
// go-sdk. r holds only what toolResult sets.
func completed(r *sdk.CallToolResult) *sdk.CallToolResult {
	out := completeCall
	out.Meta, out.Content, out.StructuredContent, out.IsError = r.Meta, r.Content, r.StructuredContent, r.IsError
	return &out
}

// toolResult turns a skill's answer into an MCP tool result: the JSON as
// text and, when it is an object, as structuredContent; an error as
// isError with the mcpv2 error in structuredContent.
func toolResult(res json.RawMessage, perr *protocol.Error) *sdk.CallToolResult {
	if perr != nil {
		e, _ := json.Marshal(map[string]any{"error": perr})
		return &sdk.CallToolResult{IsError: true, StructuredContent: json.RawMessage(e),
			Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("error %d: %s", perr.Code, perr.Message)}}}
	}
	r := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(res)}}}
	if t := bytes.TrimSpace(res); len(t) > 0 && t[0] == '{' {
		r.StructuredContent = res
	}
	return r
}

// meshFindArgs are mesh_find's arguments: Skill, or SkillOrTag, its old
// name kept as an alias.
type meshFindArgs struct {
	Skill      string `json:"skill"`
	SkillOrTag string `json:"skill_or_tag"`
	Limit      int    `json:"limit"`
}

// FoundAgent is one agent of a mesh_find answer.
type FoundAgent struct {
	PeerID      string   `json:"peer_id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Score       float64  `json:"score"`
	Reachable   bool     `json:"reachable"`
	Skills      []string `json:"skills"`
	Addrs       []string `json:"addrs"`
	HTTP        string   `json:"http,omitempty"`
	// Resource is the URI of the agent's card among the face's resources.
	Resource string `json:"resource"`
	// URL is set for an A2A agent outside the mesh that the peer PeerID
	// bridges (issue 23): mesh_call that peer with one of Skills to reach
	// it; BridgedBy is the bridging peer's name.
	URL       string `json:"url,omitempty"`
	BridgedBy string `json:"bridged_by,omitempty"`
}

func (f *Face) meshFind(ctx context.Context, c protocol.Caller, raw json.RawMessage) (res *sdk.CallToolResult) {
	start := time.Now()
	defer func() { f.auditTool(ctx, c, ToolMeshFind, res, start) }()
	var a meshFindArgs
	if perr := decodeArgs(ToolMeshFind, raw, &a); perr != nil {
		return toolResult(nil, perr)
	}
	if a.Skill != "" && a.SkillOrTag != "" {
		return toolResult(nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for mesh_find: skill and skill_or_tag are the same field (skill_or_tag is its old name): send only skill"))
	}
	query := strings.TrimSpace(cmp.Or(a.Skill, a.SkillOrTag))
	switch {
	case query == "" || len(query) > 256:
		return toolResult(nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for mesh_find: skill (a skill name or a tag) must be 1 to 256 bytes"))
	case a.Limit == 0:
		a.Limit = 10
	case a.Limit < 1 || a.Limit > 100:
		return toolResult(nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for mesh_find: limit must be from 1 to 100"))
	}
	if f.limiter != nil && c.Remote != "" {
		if perr := f.limiter.AllowFind(c.Remote); perr != nil {
			return toolResult(nil, perr)
		}
	}
	found, err := f.b.Find(ctx, query, a.Limit)
	if err != nil {
		perr := protocol.AsError(err)
		switch {
		case errors.Is(err, protocol.ErrNoDiscovery):
			perr = protocol.Errorf(protocol.CodeMethodNotFound, "mesh_find: discovery is not enabled on this node, so it cannot search the mesh")
		case perr.Code == protocol.CodeInternal:
			perr = protocol.Errorf(protocol.CodeToolExecution, "mesh_find: the search of the mesh failed: %s", protocol.Clip(err.Error(), 300))
		}
		return toolResult(nil, perr)
	}
	agents := make([]FoundAgent, 0, len(found))
	for _, r := range found {
		names := make([]string, 0, len(r.Card.Skills))
		for _, s := range r.Card.Skills {
			names = append(names, s.Name)
		}
		fa := FoundAgent{PeerID: r.Card.PeerID, Name: r.Card.Name, Description: r.Card.Description,
			Score: r.Score, Reachable: r.Reachable, Skills: names, Addrs: r.Card.Addrs, HTTP: r.Card.Endpoints.HTTP,
			Resource: agentURI(r.Card.PeerID)}
		if b := r.Bridged; b != nil {
			fa.Name, fa.Description, fa.Skills, fa.URL, fa.BridgedBy = b.Name, b.Description, b.Skills, b.URL, r.Card.Name
		}
		agents = append(agents, fa)
		f.agents.put(r.Card)
	}
	b, _ := json.Marshal(map[string]any{"query": query, "agents": agents})
	return toolResult(b, nil)
}

// meshCallArgs are mesh_call's arguments.
type meshCallArgs struct {
	Peer      string          `json:"peer"`
	Skill     string          `json:"skill"`
	Arguments json.RawMessage `json:"arguments"`
}

func (f *Face) meshCall(ctx context.Context, c protocol.Caller, raw json.RawMessage) (res *sdk.CallToolResult) {
	start := time.Now()
	defer func() { f.auditTool(ctx, c, ToolMeshCall, res, start) }()
	var a meshCallArgs
	if perr := decodeArgs(ToolMeshCall, raw, &a); perr != nil {
		return toolResult(nil, perr)
	}
	if !protocol.LooksLikePeerID(a.Peer) {
		return toolResult(nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for mesh_call: peer %q is not a PeerID (12D3Koo…; mesh_find returns them)", protocol.Clip(a.Peer, 80)))
	}
	if a.Skill == "" {
		return toolResult(nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for mesh_call: skill is empty"))
	}
	args := a.Arguments
	if len(bytes.TrimSpace(args)) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		args = json.RawMessage(`{}`)
	} else if bytes.TrimSpace(args)[0] != '{' {
		return toolResult(nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for mesh_call: arguments must be an object"))
	}
	if f.limiter != nil && c.Remote != "" {
		if perr := f.limiter.AllowGateway(c.Remote); perr != nil {
			return toolResult(nil, perr)
		}
	}
	// The tools/call is counted once, by auditTool's line, not its forward.
	return toolResult(protocol.OneResult(edge.HandleByForward(protocol.Uncounted(ctx), f.b.Forward, c, a.Peer, protocol.CallMessage(a.Skill, args))))
}

// auditTool writes the one audit line of a mesh tool's call (the node
// audits what it runs for the call, and a refusal of a forward, itself).
func (f *Face) auditTool(ctx context.Context, c protocol.Caller, tool string, res *sdk.CallToolResult, start time.Time) {
	var perr *protocol.Error
	if res != nil && res.IsError {
		perr = protocol.Errorf(protocol.CodeToolExecution, "failed")
		if m, ok := res.StructuredContent.(json.RawMessage); ok {
			var e struct {
				Error *protocol.Error `json:"error"`
			}
			if json.Unmarshal(m, &e) == nil && e.Error != nil {
				perr = e.Error
			}
		}
	}
	f.b.Audit(ctx, c, "mcp tools/call "+tool, perr, start)
}

// decodeArgs decodes a mesh tool's arguments strictly, naming what is wrong.
func decodeArgs(tool string, raw json.RawMessage, v any) *protocol.Error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: %s", tool, protocol.Clip(err.Error(), 200))
	}
	return nil
}

// protocolToWire turns an mcpv2 error into the go-sdk's JSON-RPC error, so
// that its code reaches the client (a plain Go error would go out as 0).
func protocolToWire(perr *protocol.Error) error {
	w := &jsonrpc.Error{Code: int64(perr.Code), Message: perr.Message}
	if perr.Data != nil {
		w.Data, _ = json.Marshal(perr.Data)
	}
	return w
}

// wireToProtocol is protocolToWire's inverse, for audit lines.
func wireToProtocol(err error) *protocol.Error {
	var w *jsonrpc.Error
	if errors.As(err, &w) {
		return &protocol.Error{Code: int(w.Code), Message: w.Message}
	}
	return protocol.Errorf(protocol.CodeInternal, "%s", protocol.Clip(err.Error(), 200))
}
