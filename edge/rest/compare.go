package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/protocol"
)

// The comparison runs one operation through this face's execute route
// (its handler, in-process, through httptest) and through the MCP face's
// server (an in-memory go-sdk client session), both as the caller, both
// entering the node's dispatch; it times each run and states the seed's
// qualitative points from what each face returned.

// compareRequest is the body of POST /api/v1/mcp/compare.
type compareRequest struct {
	Operation string         `json:"operation"`
	Arguments map[string]any `json:"arguments"`
}

// faceRun is one face's side of a comparison.
type faceRun struct {
	Face            string          `json:"face"`
	Via             string          `json:"via"`
	Runs            int             `json:"runs"`
	LatencyMedianMS float64         `json:"latency_median_ms"`
	LatencyMinMS    float64         `json:"latency_min_ms"`
	LatencyMaxMS    float64         `json:"latency_max_ms"`
	SetupMS         float64         `json:"setup_ms"`
	Success         bool            `json:"success"`
	Result          json.RawMessage `json:"result"`
	Error           *protocol.Error `json:"error,omitempty"`
}

// point is one qualitative point, as each face showed it.
type point struct {
	Aspect string `json:"aspect"`
	REST   string `json:"rest"`
	MCP    string `json:"mcp"`
}

// comparison is the answer of compare.
type comparison struct {
	Operation  string  `json:"operation"`
	Runs       int     `json:"runs"`
	RunsWhy    string  `json:"runs_why"`
	REST       faceRun `json:"rest"`
	MCP        faceRun `json:"mcp"`
	SameResult bool    `json:"same_result"`
	Points     []point `json:"points"`
	Method     string  `json:"method"`
	Actor      string  `json:"actor"`
}

const compareMethod = "Each face ran the operation %s in this process, one after the other, as the caller: REST through this face's " +
	"execute handler (an httptest request: body decoding, the node's dispatch, the JSON answer), MCP through an in-memory go-sdk client " +
	"session with the MCP face's server (tools/call: JSON-RPC framing, the middleware, the node's dispatch). Latencies are medians in " +
	"milliseconds; the MCP session's initialize handshake is timed apart (setup_ms). Both faces enter the same node dispatch: policy, " +
	"rate limits, the guard and the audit log apply to every run, each of which writes an audit line."

// runsWhy says why compare ran a tool runs times per face.
const (
	runsReadOnly = "the tool declares readOnlyHint in the MCP face's tools/list: each face ran it %d times, the node's setting, and the latencies are medians"
	runsOnce     = "the tool does not declare readOnlyHint in the MCP face's tools/list, so a run may have a side effect (a payment, an upload, a call to another agent): " +
		"each face ran it once, and the latencies are of that one run"
)

// times words n runs: "once", "twice", "N times".
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// median of xs (ms), with min and max; xs is sorted in place.
func median(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	sort.Float64s(xs)
	n := len(xs)
	med = xs[n/2]
	if n%2 == 0 {
		med = (xs[n/2-1] + xs[n/2]) / 2
	}
	return med, xs[0], xs[n-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// restRun calls the execute handler in-process with args and returns its
// answer and the time it took.
func (f *Face) restRun(ctx context.Context, c protocol.Caller, op string, args json.RawMessage) (executeResponse, int, time.Duration) {
	body, _ := json.Marshal(map[string]json.RawMessage{"arguments": args})
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, Prefix+"/mcp/tools/"+url.PathEscape(op)+"/execute", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.SetPathValue("name", op)
	rec := httptest.NewRecorder()
	start := time.Now()
	f.execute(rec, req, c)
	took := time.Since(start)
	var out executeResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Tool == "" {
		// a refusal before the call (the body): the error envelope
		var eb errorBody
		_ = json.Unmarshal(rec.Body.Bytes(), &eb)
		out = executeResponse{Tool: op, Error: eb.Error, Result: json.RawMessage("null")}
	}
	return out, rec.Code, took
}

// mcpRun calls tool op with args on session cs.
func mcpRun(ctx context.Context, cs *sdk.ClientSession, op string, args json.RawMessage) (json.RawMessage, *protocol.Error, *sdk.CallToolResult, time.Duration) {
	start := time.Now()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: op, Arguments: args})
	took := time.Since(start)
	if err != nil {
		return nil, wireError(err), nil, took
	}
	if res.IsError {
		var e struct {
			Error *protocol.Error `json:"error"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		if json.Unmarshal(b, &e) == nil && e.Error != nil {
			return nil, e.Error, res, took
		}
		return nil, protocol.Errorf(protocol.CodeSkillExecution, "%s", textOf(res)), res, took
	}
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		return b, nil, res, took
	}
	t := textOf(res)
	if json.Valid([]byte(t)) {
		return json.RawMessage(t), nil, res, took
	}
	b, _ := json.Marshal(t)
	return b, nil, res, took
}

func textOf(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// wireError is the *protocol.Error an MCP request failed with (its
// JSON-RPC code), or -32603 for a failure of the session itself.
func wireError(err error) *protocol.Error {
	var w *jsonrpc.Error
	if errors.As(err, &w) {
		return &protocol.Error{Code: int(w.Code), Message: w.Message}
	}
	return protocol.Errorf(protocol.CodeInternal, "internal error: the MCP session failed: %s", protocol.Clip(err.Error(), 200))
}

// sameJSON says whether a and b are the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// schemaOf returns the input schema MCP's tools/list gave for op (nil
// when it listed none), the tool as listed (nil when it did not list op),
// and the tool count.
func schemaOf(ctx context.Context, cs *sdk.ClientSession, op string) (map[string]any, *sdk.Tool, int, error) {
	var schema map[string]any
	var tool *sdk.Tool
	n := 0
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, nil, n, err
		}
		n++
		if t.Name == op {
			tool = t
			b, _ := json.Marshal(t.InputSchema)
			_ = json.Unmarshal(b, &schema)
		}
	}
	return schema, tool, n, nil
}

// readOnly says whether tool (as tools/list gave it; nil: not listed)
// declares readOnlyHint.
func readOnly(tool *sdk.Tool) bool {
	return tool != nil && tool.Annotations != nil && tool.Annotations.ReadOnlyHint
}

// propertiesOf lists a schema's property names, sorted, and its required
// ones.
func propertiesOf(schema map[string]any) (props, required []string) {
	if p, ok := schema["properties"].(map[string]any); ok {
		for k := range p {
			props = append(props, k)
		}
	}
	if r, ok := schema["required"].([]any); ok {
		for _, x := range r {
			if s, ok := x.(string); ok {
				required = append(required, s)
			}
		}
	}
	sort.Strings(props)
	sort.Strings(required)
	return props, required
}

// badArguments makes arguments that schema refuses: the first property
// (by name) that has a type, given a value of another type. ok is false
// when no property has a type (the schema takes anything: no probe, so
// that no tool runs with made-up arguments).
func badArguments(schema map[string]any) (args json.RawMessage, prop string, ok bool) {
	props, _ := propertiesOf(schema)
	p, _ := schema["properties"].(map[string]any)
	for _, name := range props {
		ps, _ := p[name].(map[string]any)
		typ, _ := ps["type"].(string)
		var bad any
		switch typ {
		case "string":
			bad = 12345
		case "number", "integer":
			bad = "not a number"
		case "boolean":
			bad = "not a boolean"
		case "object":
			bad = "not an object"
		case "array":
			bad = "not an array"
		default:
			continue
		}
		b, _ := json.Marshal(map[string]any{name: bad})
		return b, name, true
	}
	return nil, "", false
}

// kindOf names the JSON type of raw.
func kindOf(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "a JSON object"
	case '[':
		return "a JSON array"
	case '"':
		return "a JSON string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a JSON boolean"
	}
	return "a JSON number"
}

// outcome words a face's answer to the invalid-arguments probe.
func outcome(perr *protocol.Error, status int) string {
	switch {
	case perr == nil:
		return "accepted the invalid arguments and ran the tool"
	case perr.Code == protocol.CodeInvalidParams && status != 0:
		return fmt.Sprintf("refused with HTTP %d and error -32602 (%s) before the tool ran", status, protocol.Clip(perr.Message, 160))
	case perr.Code == protocol.CodeInvalidParams:
		return fmt.Sprintf("refused with error -32602 (%s) before the tool ran", protocol.Clip(perr.Message, 160))
	case status != 0:
		return fmt.Sprintf("answered HTTP %d with error %d: %s", status, perr.Code, protocol.Clip(perr.Message, 160))
	}
	return fmt.Sprintf("answered error %d: %s", perr.Code, protocol.Clip(perr.Message, 160))
}

// openAPIProperty returns the schema the OpenAPI document gives property
// prop of component schema name (nil when it has none).
func openAPIProperty(name, prop string) map[string]any {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if json.Unmarshal(openAPIDoc, &doc) != nil {
		return nil
	}
	return doc.Components.Schemas[name].Properties[prop]
}

// openAPIArgumentsTyped says whether the OpenAPI document types the
// execute route's arguments (it cannot: they differ by tool).
func openAPIArgumentsTyped() bool {
	_, typed := openAPIProperty("ExecuteRequest", "arguments")["properties"]
	return typed
}

// openAPIResultShape words what the OpenAPI document declares of the
// execute route's result (ExecuteResponse.result), read from the document.
func openAPIResultShape() string {
	r := openAPIProperty("ExecuteResponse", "result")
	_, props := r["properties"]
	_, ref := r["$ref"]
	if props || ref {
		return "the OpenAPI document declares its shape (ExecuteResponse.result)"
	}
	if t, ok := r["type"].([]any); ok && len(t) > 1 {
		return fmt.Sprintf("the OpenAPI document declares ExecuteResponse.result as any of %d JSON types, the same for every tool", len(t))
	}
	return "the OpenAPI document declares no shape of ExecuteResponse.result, the same for every tool"
}

// probe runs op with invalid arguments through each face once and words
// the validation point; ok is false when no probe could be made.
func (f *Face) probe(ctx context.Context, c protocol.Caller, cs *sdk.ClientSession, op string, schema map[string]any) (p point, restTook, mcpTook time.Duration, ok bool) {
	bad, prop, ok := badArguments(schema)
	if !ok {
		return point{Aspect: "validation",
			REST: "not probed: the tool's schema types no property, so any arguments would run it",
			MCP:  "not probed: the tool's schema types no property, so any arguments would run it"}, 0, 0, false
	}
	rout, status, rt := f.restRun(ctx, c, op, bad)
	_, merr, _, mt := mcpRun(ctx, cs, op, bad)
	return point{Aspect: "validation",
		REST: fmt.Sprintf("with %s of the wrong type, the execute route %s", prop, outcome(rout.Error, status)),
		MCP:  fmt.Sprintf("with %s of the wrong type, tools/call %s", prop, outcome(merr, 0))}, rt, mt, true
}

// discoveryPoints are the schema-discovery, discoverability and
// flexibility points for op.
func (f *Face) discoveryPoints(op string, schema map[string]any, found bool, ntools int, setup time.Duration, routes int) []point {
	props, required := propertiesOf(schema)
	mcpSchema := fmt.Sprintf("tools/list on the session gave %s's inputSchema: properties %s, required %s", op, listOr(props), listOr(required))
	if !found {
		mcpSchema = fmt.Sprintf("tools/list on the session did not list %s", op)
	}
	restSchema := fmt.Sprintf("the execute route's answer (tool, success, result, actor, execution_time_ms) names no argument; "+
		"the OpenAPI document types arguments as %s; the schema comes only from the separate listing route GET %s/mcp/tools", map[bool]string{true: "per-tool properties", false: "a free-form object"}[openAPIArgumentsTyped()], Prefix)
	return []point{
		{Aspect: "schema_discovery", REST: restSchema, MCP: mcpSchema},
		{Aspect: "discoverability",
			REST: fmt.Sprintf("%d routes, listed by the OpenAPI document at %s (read by people and generators, not negotiated)", routes, OpenAPIPath),
			MCP:  fmt.Sprintf("the session listed %d tools with their schemas at run time (tools/list), beside prompts and resources", ntools)},
		{Aspect: "flexibility",
			REST: "one stateless HTTP request per call (curl works); no session to open",
			MCP:  fmt.Sprintf("a session first: the initialize handshake took %.3f ms here; then any number of calls on it", ms(setup))},
	}
}

func listOr(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// compareRetry is the Retry-After of a compare refused because the
// caller's previous one still runs.
const compareRetry = time.Second

// startCompare admits one compare (or report) of c, whose identity runs
// none now, and returns its release; else -32005. A compare makes many
// dispatches in one request, each up to the tool's timeout: one at a time
// per caller bounds what one request of a caller costs the node.
func (f *Face) startCompare(c protocol.Caller) (func(), *protocol.Error) {
	key := c.Kind.String() + "\x00" + c.ID // a secret holder and the anonymous callers of its IP are two callers
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, busy := f.comparing[key]; busy {
		return nil, &protocol.Error{Code: protocol.CodeRateLimited,
			Message: "rate limited: a compare of yours is running (one compare or compare report per caller at a time); retry when it has answered",
			Data:    map[string]any{"retry_after_ms": compareRetry.Milliseconds()}}
	}
	f.comparing[key] = struct{}{}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.comparing, key)
	}, nil
}

// compare is POST /api/v1/mcp/compare: a tool that declares readOnlyHint
// runs f.runs times through each face, any other once (runs_why says
// which); one compare per caller at a time.
func (f *Face) compare(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	var req compareRequest
	if !f.readBody(w, r, c, start, &req) {
		return
	}
	release, perr := f.startCompare(c)
	if perr != nil {
		f.fail(w, r, c, start, perr, 0)
		return
	}
	defer release()
	if f.mcp == nil {
		f.notConfigured(w, r, c, start, "this node serves no MCP face to compare this face with")
		return
	}
	if req.Operation == "" {
		f.fail(w, r, c, start, protocol.Errorf(protocol.CodeInvalidParams, `invalid params: operation is missing; send {"operation": TOOL, "arguments": {…}}`), 0)
		return
	}
	args := json.RawMessage("{}")
	if req.Arguments != nil {
		args, _ = json.Marshal(req.Arguments)
	}
	ctx := r.Context()
	setupStart := time.Now()
	cs, done, err := f.mcp.Session(ctx, c)
	if err != nil {
		f.fail(w, r, c, start, f.asProtocol(err), 0)
		return
	}
	defer done()
	setup := time.Since(setupStart)
	schema, tool, ntools, err := schemaOf(ctx, cs, req.Operation)
	if err != nil {
		f.fail(w, r, c, start, wireError(err), 0)
		return
	}
	found := tool != nil
	// A tool that may have a side effect runs once per face: compare
	// must not pay, upload or call another agent f.runs times.
	runs, why := 1, runsOnce
	if readOnly(tool) {
		runs, why = f.runs, fmt.Sprintf(runsReadOnly, f.runs)
	}
	out := comparison{Operation: req.Operation, Runs: runs, RunsWhy: why, Actor: c.ID, Method: fmt.Sprintf(compareMethod, times(runs)),
		REST: faceRun{Face: "rest", Via: "POST " + Prefix + "/mcp/tools/" + req.Operation + "/execute", Runs: runs},
		MCP:  faceRun{Face: "mcp", Via: "tools/call on an MCP session", Runs: runs, SetupMS: ms(setup)}}
	var rts, mts []float64
	var restRes executeResponse
	var mcpRes json.RawMessage
	var mcpErr *protocol.Error
	var mcpCall *sdk.CallToolResult
	for range runs {
		var took time.Duration
		restRes, _, took = f.restRun(ctx, c, req.Operation, args)
		rts = append(rts, ms(took))
		mcpRes, mcpErr, mcpCall, took = mcpRun(ctx, cs, req.Operation, args)
		mts = append(mts, ms(took))
	}
	out.REST.LatencyMedianMS, out.REST.LatencyMinMS, out.REST.LatencyMaxMS = median(rts)
	out.MCP.LatencyMedianMS, out.MCP.LatencyMinMS, out.MCP.LatencyMaxMS = median(mts)
	out.REST.Success, out.REST.Result, out.REST.Error = restRes.Error == nil, restRes.Result, restRes.Error
	out.MCP.Success, out.MCP.Result, out.MCP.Error = mcpErr == nil, mcpRes, mcpErr
	if out.MCP.Result == nil {
		out.MCP.Result = json.RawMessage("null")
	}
	out.SameResult = out.REST.Success == out.MCP.Success && (!out.REST.Success || sameJSON(out.REST.Result, out.MCP.Result))
	out.Points = f.discoveryPoints(req.Operation, schema, found, ntools, setup, f.nroutes)
	vp, _, _, _ := f.probe(ctx, c, cs, req.Operation, schema)
	out.Points = slices.Insert(out.Points, 1, vp)
	out.Points = append(out.Points, typePoint(req.Operation, out.REST, tool, mcpCall))
	f.b.Audit(ctx, c, auditMethod(r), nil, start)
	writeJSON(w, http.StatusOK, out)
}

// typePoint words what each face returned as op's result, and what each
// declared of its type: the OpenAPI document's ExecuteResponse.result, the
// tool's outputSchema in the MCP session's tools/list (tool; nil when it
// did not list op).
func typePoint(op string, rest faceRun, tool *sdk.Tool, call *sdk.CallToolResult) point {
	p := point{Aspect: "type_safety"}
	if rest.Success {
		p.REST = fmt.Sprintf("result was %s inside the JSON answer; %s", kindOf(rest.Result), openAPIResultShape())
	} else {
		p.REST = "the call failed: the answer carried success false and an error object; " + openAPIResultShape()
	}
	declared := fmt.Sprintf("tools/list gave %s no outputSchema to check it against", op)
	switch {
	case tool == nil:
		declared = fmt.Sprintf("tools/list did not list %s", op)
	case tool.OutputSchema != nil:
		b, _ := json.Marshal(tool.OutputSchema)
		declared = fmt.Sprintf("tools/list gave %s an outputSchema (%s)", op, protocol.Clip(string(b), 120))
	}
	switch {
	case call == nil:
		p.MCP = "the call failed before a result; " + declared
	case call.IsError:
		p.MCP = "the result had isError set, with the error in structuredContent; " + declared
	case call.StructuredContent != nil:
		p.MCP = "the result carried structuredContent (a JSON object) beside its text; " + declared
	default:
		p.MCP = "the result carried text content only; " + declared
	}
	return p
}

// reportRow is one tool of the report.
type reportRow struct {
	Tool           string  `json:"tool"`
	Points         []point `json:"points"`
	RESTProbeMS    float64 `json:"rest_probe_ms,omitempty"`
	MCPProbeMS     float64 `json:"mcp_probe_ms,omitempty"`
	ValidationBoth bool    `json:"refused_by_both"`
}

// compareReport is GET /api/v1/mcp/compare/report: the points for every
// tool, from a probe of each that no tool runs (invalid arguments); the
// latencies are the medians of the probes over the tools. One compare or
// report per caller at a time.
func (f *Face) compareReport(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	release, perr := f.startCompare(c)
	if perr != nil {
		f.fail(w, r, c, start, perr, 0)
		return
	}
	defer release()
	if f.mcp == nil {
		f.notConfigured(w, r, c, start, "this node serves no MCP face to compare this face with")
		return
	}
	ctx := r.Context()
	setupStart := time.Now()
	cs, done, err := f.mcp.Session(ctx, c)
	if err != nil {
		f.fail(w, r, c, start, f.asProtocol(err), 0)
		return
	}
	defer done()
	setup := time.Since(setupStart)
	// The listing through each face, timed: the one operation every
	// tool shares, and one that runs nothing.
	ls := time.Now()
	rtools, perr := f.tools(ctx, c)
	restList := time.Since(ls)
	if perr != nil {
		f.fail(w, r, c, start, perr, 0)
		return
	}
	ls = time.Now()
	res, err := cs.ListTools(ctx, nil)
	mcpList := time.Since(ls)
	if err != nil {
		f.fail(w, r, c, start, wireError(err), 0)
		return
	}
	schemas := map[string]map[string]any{}
	for _, t := range res.Tools {
		b, _ := json.Marshal(t.InputSchema)
		var s map[string]any
		_ = json.Unmarshal(b, &s)
		schemas[t.Name] = s
	}
	var rows []reportRow
	var rps, mps []float64
	refusedBoth := 0
	for _, t := range rtools {
		s, found := schemas[t.Name]
		row := reportRow{Tool: t.Name, Points: f.discoveryPoints(t.Name, s, found, len(res.Tools), setup, f.nroutes)[:1]}
		bad, _, ok := badArguments(s)
		if ok {
			rout, status, rt := f.restRun(ctx, c, t.Name, bad)
			_, merr, _, mt := mcpRun(ctx, cs, t.Name, bad)
			row.RESTProbeMS, row.MCPProbeMS = ms(rt), ms(mt)
			rps, mps = append(rps, ms(rt)), append(mps, ms(mt))
			row.ValidationBoth = rout.Error != nil && rout.Error.Code == protocol.CodeInvalidParams && merr != nil && merr.Code == protocol.CodeInvalidParams
			if row.ValidationBoth {
				refusedBoth++
			}
			row.Points = append(row.Points, point{Aspect: "validation",
				REST: "invalid arguments: the execute route " + outcome(rout.Error, status),
				MCP:  "invalid arguments: tools/call " + outcome(merr, 0)})
		} else {
			row.Points = append(row.Points, point{Aspect: "validation",
				REST: "not probed: the schema types no property", MCP: "not probed: the schema types no property"})
		}
		rows = append(rows, row)
	}
	rmed, _, _ := median(rps)
	mmed, _, _ := median(mps)
	f.b.Audit(ctx, c, auditMethod(r), nil, start)
	writeJSON(w, http.StatusOK, map[string]any{
		"tools":           rows,
		"total":           len(rows),
		"probed":          len(rps),
		"refused_by_both": refusedBoth,
		"latency": map[string]any{
			"rest_list_ms": ms(restList), "mcp_list_ms": ms(mcpList), "mcp_setup_ms": ms(setup),
			"rest_probe_median_ms": rmed, "mcp_probe_median_ms": mmed, "probes_per_face": len(rps),
		},
		"summary": []point{
			{Aspect: "schema_discovery", REST: fmt.Sprintf("GET %s/mcp/tools listed %d tools with schemas; an execute answer carries none", Prefix, len(rtools)),
				MCP: fmt.Sprintf("tools/list listed %d tools with schemas (the node's and the two mesh tools)", len(res.Tools))},
			{Aspect: "validation", REST: fmt.Sprintf("%d of %d probed tools refused invalid arguments with HTTP 400 and -32602", refusedBoth, len(rps)),
				MCP: fmt.Sprintf("%d of %d probed tools refused invalid arguments with -32602 (the same node check)", refusedBoth, len(rps))},
		},
		"method": "Per tool, one call with arguments of the wrong type through each face (so that no tool runs with made-up arguments); " +
			"latencies are the medians over the tools probed, in milliseconds. POST " + Prefix + "/mcp/compare runs one operation with real arguments.",
		"actor": c.ID,
	})
}
