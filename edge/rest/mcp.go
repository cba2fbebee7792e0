package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// toolsListMessage is the tools/list message every tool listing sends.
var toolsListMessage = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)

// tool is one tool of the list: the node's skill as MCP names it.
type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// tools lists the node's skills for c through Handle (tools/list).
func (f *Face) tools(ctx context.Context, c protocol.Caller) ([]tool, *protocol.Error) {
	res, perr := protocol.OneResult(f.b.Handle(ctx, c, toolsListMessage))
	if perr != nil {
		return nil, perr
	}
	var list struct {
		Tools []protocol.SkillDescriptor `json:"tools"`
	}
	if err := json.Unmarshal(res, &list); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "internal error: the node's tools/list answer could not be read")
	}
	out := make([]tool, 0, len(list.Tools))
	for _, d := range list.Tools {
		schema := d.InputSchema
		if len(schema) == 0 || !json.Valid(schema) {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out = append(out, tool{Name: d.Name, Description: d.Description, InputSchema: schema})
	}
	return out, nil
}

// listTools is GET|POST /api/v1/mcp/tools: the node's tools with their
// input schemas (tools/list, audited by the node).
func (f *Face) listTools(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	ts, perr := f.tools(r.Context(), c)
	if perr != nil {
		f.writeError(w, perr, 0)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tools": ts, "total": len(ts)})
}

// executeRequest is the body of POST …/tools/{name}/execute. Actor is
// accepted and ignored: the caller is who the credential says.
type executeRequest struct {
	Arguments map[string]any `json:"arguments"`
	Actor     any            `json:"actor,omitempty"`
}

// executeResponse is the answer of execute, success or not.
type executeResponse struct {
	Tool            string          `json:"tool"`
	Success         bool            `json:"success"`
	Result          json.RawMessage `json:"result"`
	Error           *protocol.Error `json:"error,omitempty"`
	Actor           string          `json:"actor"`
	ExecutionTimeMS float64         `json:"execution_time_ms"`
}

// runTool calls tool name with args for c through Handle (tools/call; the
// node authorizes, limits, screens and audits it).
func (f *Face) runTool(ctx context.Context, c protocol.Caller, name string, args json.RawMessage) (executeResponse, *protocol.Error) {
	start := time.Now()
	res, perr := protocol.OneResult(f.b.Handle(ctx, c, protocol.CallMessage(name, args)))
	out := executeResponse{Tool: name, Success: perr == nil, Result: res, Error: perr, Actor: c.ID,
		ExecutionTimeMS: float64(time.Since(start).Microseconds()) / 1000}
	if out.Result == nil {
		out.Result = json.RawMessage("null")
	}
	return out, perr
}

// execute is POST /api/v1/mcp/tools/{name}/execute. A refusal of the call
// takes its status (400 bad arguments, 403 not granted, 404 no such tool,
// 429 rate limited, 502 the tool failed), with the same body as success.
func (f *Face) execute(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	name := r.PathValue("name")
	var req executeRequest
	if !f.readBody(w, r, c, start, &req) {
		return
	}
	args := json.RawMessage("{}")
	if req.Arguments != nil {
		args, _ = json.Marshal(req.Arguments)
	}
	out, perr := f.runTool(r.Context(), c, name, args)
	status := http.StatusOK
	if perr != nil {
		status = edge.ErrorStatus(perr)
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", strconv.Itoa(edge.ErrorRetryAfter(perr)))
		}
	}
	writeJSON(w, status, out)
}

// resource is one resource of the list.
type resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
}

// listResources is GET /api/v1/mcp/resources (resources/list on the MCP
// face, for the caller).
func (f *Face) listResources(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	if f.mcp == nil {
		f.notConfigured(w, r, c, start, "this node serves no MCP face, whose resources this route lists")
		return
	}
	rs, err := f.mcp.ListResources(r.Context(), c)
	if err != nil {
		f.writeError(w, f.asProtocol(err), 0)
		return
	}
	out := make([]resource, 0, len(rs))
	for _, x := range rs {
		out = append(out, resource{URI: x.URI, Name: x.Name, Description: x.Description, MIMEType: x.MIMEType})
	}
	writeJSON(w, http.StatusOK, map[string]any{"resources": out, "total": len(out)})
}

// readRequest is the body of POST …/resources/read.
type readRequest struct {
	URI string `json:"uri"`
}

// content is one content item of a resource read: text, or base64 blob.
type content struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     []byte `json:"blob,omitempty"`
}

// readResource is POST /api/v1/mcp/resources/read (resources/read).
func (f *Face) readResource(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	var req readRequest
	if !f.readBody(w, r, c, start, &req) {
		return
	}
	if f.mcp == nil {
		f.notConfigured(w, r, c, start, "this node serves no MCP face, whose resources this route reads")
		return
	}
	if req.URI == "" {
		f.fail(w, r, c, start, protocol.Errorf(protocol.CodeInvalidParams, `invalid params: uri is missing; send {"uri": "…"} (GET /api/v1/mcp/resources lists them)`), 0)
		return
	}
	res, err := f.mcp.ReadResource(r.Context(), c, req.URI)
	if err != nil {
		perr := f.asProtocol(err)
		if perr.Code == sdkResourceNotFound {
			f.writeError(w, perr, http.StatusNotFound)
			return
		}
		f.writeError(w, perr, 0)
		return
	}
	out := make([]content, 0, len(res.Contents))
	for _, x := range res.Contents {
		out = append(out, content{URI: x.URI, MIMEType: x.MIMEType, Text: x.Text, Blob: x.Blob})
	}
	writeJSON(w, http.StatusOK, map[string]any{"uri": req.URI, "contents": out})
}

// sdkResourceNotFound is MCP's "resource not found" error code.
const sdkResourceNotFound = -32002

// prompt is one prompt template of the list.
type prompt struct {
	Name        string           `json:"name"`
	Description string           `json:"description,omitempty"`
	Arguments   []promptArgument `json:"arguments"`
}

type promptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required"`
}

// listPrompts is GET /api/v1/mcp/prompts (prompts/list).
func (f *Face) listPrompts(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	if f.mcp == nil {
		f.notConfigured(w, r, c, start, "this node serves no MCP face, whose prompts this route lists")
		return
	}
	ps, err := f.mcp.ListPrompts(r.Context(), c)
	if err != nil {
		f.writeError(w, f.asProtocol(err), 0)
		return
	}
	out := make([]prompt, 0, len(ps))
	for _, p := range ps {
		x := prompt{Name: p.Name, Description: p.Description, Arguments: []promptArgument{}}
		for _, a := range p.Arguments {
			x.Arguments = append(x.Arguments, promptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
		}
		out = append(out, x)
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompts": out, "total": len(out)})
}

// promptRequest is the body of POST …/prompts/{name}: string arguments
// (a number or boolean is taken as its JSON text).
type promptRequest struct {
	Arguments map[string]any `json:"arguments"`
}

// promptMessage is one message of an expanded prompt.
type promptMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// getPrompt is POST /api/v1/mcp/prompts/{name} (prompts/get).
func (f *Face) getPrompt(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	name := r.PathValue("name")
	var req promptRequest
	if !f.readBody(w, r, c, start, &req) {
		return
	}
	if f.mcp == nil {
		f.notConfigured(w, r, c, start, "this node serves no MCP face, whose prompts this route expands")
		return
	}
	args := make(map[string]string, len(req.Arguments))
	for k, v := range req.Arguments {
		switch x := v.(type) {
		case string:
			args[k] = x
		case nil:
		case map[string]any, []any:
			f.fail(w, r, c, start, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: argument %q of prompt %q must be a string", protocol.Clip(k, 64), protocol.Clip(name, 64)), 0)
			return
		default:
			b, _ := json.Marshal(x)
			args[k] = string(b)
		}
	}
	res, err := f.mcp.GetPrompt(r.Context(), c, name, args)
	if err != nil {
		f.writeError(w, f.asProtocol(err), 0)
		return
	}
	msgs := make([]promptMessage, 0, len(res.Messages))
	var text []string
	for _, m := range res.Messages {
		t := ""
		if tc, ok := m.Content.(*sdk.TextContent); ok {
			t = tc.Text
		}
		msgs = append(msgs, promptMessage{Role: string(m.Role), Content: t})
		text = append(text, t)
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "description": res.Description, "messages": msgs, "prompt": strings.Join(text, "\n\n")})
}

// scanRequest is the body of POST …/security/scan.
type scanRequest struct {
	Text *string `json:"text"`
}

// scan is POST /api/v1/mcp/security/scan (the guard over a text, in the
// seed's shape: findings as "[LEVEL] vector: match") and GET (the
// scanner's capabilities and attack vectors).
func (f *Face) scan(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	if r.Method == http.MethodGet {
		info, err := f.b.ScannerInfo(r.Context(), c)
		if err != nil {
			f.fail(w, r, c, start, f.asProtocol(err), 0) // ScannerInfo writes no audit line
			return
		}
		f.b.Audit(r.Context(), c, auditMethod(r), nil, start)
		writeRaw(w, info)
		return
	}
	var req scanRequest
	if !f.readBody(w, r, c, start, &req) {
		return
	}
	if req.Text == nil {
		f.fail(w, r, c, start, protocol.Errorf(protocol.CodeInvalidParams, `invalid params: text is missing; send {"text": "…"}`), 0)
		return
	}
	raw, err := f.b.SecurityScan(r.Context(), c, *req.Text)
	if err != nil {
		f.writeError(w, f.asProtocol(err), 0)
		return
	}
	writeRaw(w, raw) // the seed's shape, made by the node (node/scan_api.go)
}

// auditTail is GET /api/v1/mcp/security/audit?limit=N (default 20).
func (f *Face) auditTail(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	limit := DefaultAuditLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			f.fail(w, r, c, start, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: limit %q is not a whole number", protocol.Clip(s, 20)), 0)
			return
		}
		limit = n
	}
	raw, err := f.b.AuditTail(r.Context(), c, limit)
	if err != nil {
		f.writeError(w, f.asProtocol(err), 0)
		return
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		f.writeError(w, f.asProtocol(err), 0)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries, "total": len(entries), "limit": limit})
}

func writeRaw(w http.ResponseWriter, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
