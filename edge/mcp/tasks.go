package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/protocol"
)

// MCP tasks: a tool call of one of the node's skills may run as a task,
// on the A2A face's task engine (the same store, event log, owner rule,
// limits, dispatch, policy and audit), so that the client may drop its
// connection and ask for the result later, from a new session. Both forms
// of the extension are served:
//
//   - 2025-11-25 (the experimental form): the initialize result's
//     capabilities.tasks, execution.taskSupport "optional" on each skill's
//     tool, a tools/call with params.task answered by {"task": Task}, then
//     tasks/get, tasks/result (waits for the end), tasks/list, tasks/cancel.
//   - 2026-07-28 (io.modelcontextprotocol/tasks): the extension in the
//     server's capabilities; a tools/call whose _meta says the client
//     speaks it is answered by a task (resultType "task"), then tasks/get
//     (the result or error inline), tasks/cancel, tasks/update.
//
// The go-sdk v1.8.0 knows neither: the tasks/ methods are custom methods
// of the server, answered by the middleware, and the 2025-11-25 members
// it has no field for (capabilities.tasks, a tool's execution, the
// request's params.task) are added to its results, or read from the HTTP
// body, by the face.

// TaskRunner is the task engine the face runs tool calls as tasks on;
// *a2a.Face satisfies it. Every method is for the caller c, who sees only
// its own tasks (another's is not found).
type TaskRunner interface {
	// SubmitCall starts a task that calls skill with args.
	SubmitCall(ctx context.Context, c protocol.Caller, skill string, args json.RawMessage) (a2a.Task, error)
	// GetTimedTask returns c's task with its times.
	GetTimedTask(ctx context.Context, c protocol.Caller, id string) (a2a.TimedTask, error)
	// CancelTask cancels c's task.
	CancelTask(ctx context.Context, c protocol.Caller, id string) (a2a.Task, error)
	// ListOwnTasks lists c's tasks, a page of size from the one after
	// cursor; with toolCalls, only those SubmitCall started.
	ListOwnTasks(ctx context.Context, c protocol.Caller, cursor string, size int, toolCalls bool) (a2a.TaskPage, error)
	// StreamTask follows c's task until it ends (used to wait for it).
	StreamTask(ctx context.Context, c protocol.Caller, id string, after uint64, replay bool, emit func(a2a.StreamEvent) error) error
}

// WithTasks lets a tool call of the node's skills run as a task on r (MCP
// tasks, both forms). keep is how long the store keeps a finished task
// after its last change (the node's TaskTTL): the ttl the face reports,
// a lower bound; negative, kept until deleted (ttl null). r must not be
// nil.
func WithTasks(r TaskRunner, keep time.Duration) Option {
	return func(c *config) error {
		if r == nil {
			return errors.New("mcp: WithTasks: nil TaskRunner")
		}
		c.tasks, c.taskKeep = r, keep
		return nil
	}
}

// TasksExtension is the name of the 2026-07-28 tasks extension.
const TasksExtension = "io.modelcontextprotocol/tasks"

const (
	// metaClientCaps is the _meta member of a 2026-07-28 request that
	// carries the client's capabilities.
	metaClientCaps = "io.modelcontextprotocol/clientCapabilities"
	// metaRelatedTask names the task a tasks/result answer belongs to.
	metaRelatedTask = "io.modelcontextprotocol/related-task"
	// pollMillis is the poll interval the face suggests.
	pollMillis = 500
	// taskListPage is the size of a tasks/list page.
	taskListPage = 50
	// taskExtraKey marks, in the TokenInfo of an HTTP request, a
	// 2025-11-25 tools/call that asks for a task (params.task).
	taskExtraKey = "mcpv2.task"
)

// taskMethods are the methods of the tasks extension (both forms).
var taskMethods = []string{"tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update"}

// taskParams are the params of every tasks/ method.
type taskParams struct {
	sdk.ParamsBase
	TaskID         string          `json:"taskId,omitempty"`
	Cursor         string          `json:"cursor,omitempty"`
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
}

// wireResult is a result the go-sdk has no type for: its members as they
// go on the wire, with the go-sdk's _meta.
type wireResult struct {
	sdk.ResultBase
	m map[string]any
}

func (r *wireResult) MarshalJSON() ([]byte, error) {
	out := r.m
	if meta := r.GetMeta(); len(meta) > 0 {
		out = maps.Clone(r.m)
		out["_meta"] = meta
	}
	return json.Marshal(out)
}

// withMembers is res with its members edited by edit (on the JSON
// object the go-sdk would send).
func withMembers(res sdk.Result, edit func(m map[string]any)) (sdk.Result, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	meta, _ := m["_meta"].(map[string]any)
	delete(m, "_meta")
	edit(m)
	w := &wireResult{m: m}
	if len(meta) > 0 {
		w.SetMeta(meta)
	}
	return w, nil
}

// addTaskMethods registers the tasks/ methods on s (answered by the
// middleware) and the 2026-07-28 extension in caps.
func (f *Face) addTaskMethods(s *sdk.Server) {
	for _, m := range taskMethods {
		if err := sdk.AddReceivingCustomMethod(s, m, func(context.Context, *sdk.ServerSession, *taskParams) (*wireResult, error) {
			return nil, protocolToWire(protocol.Errorf(protocol.CodeInternal, "internal error: %s was not served", m))
		}); err != nil {
			panic("mcp: " + err.Error())
		}
	}
}

// legacyTasks says whether req may use the 2025-11-25 form: tasks are on,
// the client speaks an era before 2026-07-28, and over HTTP (the face reads
// params.task from the HTTP body).
func (f *Face) legacyTasks(req sdk.Request) bool {
	if f.tasks == nil || req == nil || modern(req) {
		return false
	}
	ex := req.GetExtra()
	return ex != nil && ex.TokenInfo != nil
}

// modern says req is of 2026-07-28 or later.
func modern(req sdk.Request) bool {
	if p, ok := req.GetParams().(*taskParams); ok && p == nil {
		// No params (tasks/list): the go-sdk's ProtocolVersion would read
		// them; the session's initialize says the era.
		ss, _ := req.GetSession().(*sdk.ServerSession)
		ip := (*sdk.InitializeParams)(nil)
		if ss != nil {
			ip = ss.InitializeParams()
		}
		return ip != nil && ip.ProtocolVersion >= statelessEra
	}
	pv, ok := req.(interface{ ProtocolVersion() string })
	return ok && pv.ProtocolVersion() >= statelessEra
}

// taskCapsV1 is capabilities.tasks of the 2025-11-25 form.
func taskCapsV1() map[string]any {
	return map[string]any{"list": map[string]any{}, "cancel": map[string]any{},
		"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
}

// withTaskCapsV1 adds capabilities.tasks to an initialize result.
func withTaskCapsV1(res sdk.Result) (sdk.Result, error) {
	return withMembers(res, func(m map[string]any) {
		caps, _ := m["capabilities"].(map[string]any)
		if caps == nil {
			caps = map[string]any{}
			m["capabilities"] = caps
		}
		caps["tasks"] = taskCapsV1()
	})
}

// withTaskSupport gives each tool of a tools/list result its
// execution.taskSupport: "optional" for the node's skills, "forbidden"
// for the mesh tools (they run at once).
func withTaskSupport(res sdk.Result) (sdk.Result, error) {
	return withMembers(res, func(m map[string]any) {
		tools, _ := m["tools"].([]any)
		for _, t := range tools {
			tm, ok := t.(map[string]any)
			if !ok {
				continue
			}
			support := "optional"
			if n, _ := tm["name"].(string); n == ToolMeshFind || n == ToolMeshCall {
				support = "forbidden"
			}
			tm["execution"] = map[string]any{"taskSupport": support}
		}
	})
}

// asksTask says whether the tools/call req asks to run as a task, and in
// which form: params.task (2025-11-25, read from the HTTP body), or the
// extension among the client capabilities of its _meta (2026-07-28). The
// mesh tools never run as tasks.
func (f *Face) asksTask(req *sdk.CallToolRequest) (ask, isModern bool) {
	if f.tasks == nil || req == nil || req.Params == nil || req.Params.Name == ToolMeshFind || req.Params.Name == ToolMeshCall {
		return false, false
	}
	if modern(req) {
		caps, _ := req.Params.Meta[metaClientCaps].(map[string]any)
		ext, _ := caps["extensions"].(map[string]any)
		_, ok := ext[TasksExtension]
		return ok, true
	}
	if !f.legacyTasks(req) {
		return false, false
	}
	asked, _ := req.GetExtra().TokenInfo.Extra[taskExtraKey].(bool)
	return asked, false
}

// startTask runs the tools/call req as a task of c and answers with the
// task as created, in the client's form.
func (f *Face) startTask(ctx context.Context, c protocol.Caller, req *sdk.CallToolRequest, isModern bool) (sdk.Result, error) {
	t, err := f.tasks.SubmitCall(ctx, c, req.Params.Name, req.Params.Arguments)
	if err != nil {
		return nil, protocolToWire(protocol.AsError(err))
	}
	now := t.Status.Timestamp
	v := f.taskView(a2a.TimedTask{Task: t, Created: now, Updated: now}, isModern)
	if isModern {
		m := v.head(true)
		m["resultType"] = "task"
		return &wireResult{m: m}, nil
	}
	f.notes.follow(req, c, t.ID)
	return &wireResult{m: map[string]any{"task": v.head(false)}}, nil
}

// taskView is a task as MCP tasks show it.
type taskView struct {
	id, status, message string
	created, updated    time.Time
	ttl                 any // ms, or nil: kept until deleted
	// result is the tool's outcome of a task that ended with one (the
	// skill's result, or its error as isError); failure, a task that
	// ended without one (the node stopped while it ran).
	result  *sdk.CallToolResult
	failure *protocol.Error
}

// head is the Task object of v: 2025-11-25 or 2026-07-28 names.
func (v taskView) head(isModern bool) map[string]any {
	m := map[string]any{"taskId": v.id, "status": v.status,
		"createdAt": v.created.UTC().Format(time.RFC3339Nano), "lastUpdatedAt": v.updated.UTC().Format(time.RFC3339Nano)}
	if v.message != "" {
		m["statusMessage"] = v.message
	}
	if isModern {
		m["ttlMs"], m["pollIntervalMs"] = v.ttl, pollMillis
	} else {
		m["ttl"], m["pollInterval"] = v.ttl, pollMillis
	}
	return m
}

// detailed is the DetailedTask of v (2026-07-28): its head, with the
// result or error of a task that ended.
func (v taskView) detailed() map[string]any {
	m := v.head(true)
	switch {
	case v.result != nil && terminal(v.status):
		b, _ := json.Marshal(completed(v.result))
		m["result"] = json.RawMessage(b)
	case v.failure != nil:
		m["error"] = map[string]any{"code": v.failure.Code, "message": v.failure.Message}
	}
	return m
}

// taskView maps an A2A task to MCP's: submitted and working are working;
// completed is completed with the skill's result; a skill's error
// (failed, rejected, or input-required, since the face asks no input) is
// the tool's isError result, a completed task in 2026-07-28 and a failed
// one in 2025-11-25 (each era's rule for a tool error); failed without a
// skill's error (the node stopped) is failed; canceled is cancelled.
func (f *Face) taskView(tt a2a.TimedTask, isModern bool) taskView {
	t := tt.Task
	v := taskView{id: t.ID, created: tt.Created, updated: tt.Updated, message: statusText(t)}
	if f.taskKeep >= 0 {
		v.ttl = f.taskKeep.Milliseconds()
	}
	switch t.Status.State {
	case a2a.StateSubmitted, a2a.StateWorking:
		v.status = "working"
	case a2a.StateCanceled:
		v.status = "cancelled"
	case a2a.StateCompleted:
		v.status = "completed"
		v.result = toolResult(artifactResult(t), nil)
	default:
		perr := statusError(t)
		if perr == nil {
			v.status = "failed"
			v.failure = protocol.Errorf(protocol.CodeInternal, "%s", protocol.Clip(cmpOr(v.message, "the task failed"), 300))
			break
		}
		v.result = toolResult(nil, perr)
		v.status = "completed"
		if !isModern {
			v.status = "failed"
		}
	}
	return v
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// statusText is the text of t's status message ("" when none).
func statusText(t a2a.Task) string {
	if t.Status.Message == nil {
		return ""
	}
	var parts []string
	for _, p := range t.Status.Message.Parts {
		if p.Text != nil {
			parts = append(parts, *p.Text)
		}
	}
	return strings.Join(parts, " ")
}

// statusError is the skill's error that t's status carries (its data
// part {"error": …}), or nil.
func statusError(t a2a.Task) *protocol.Error {
	if t.Status.Message == nil {
		return nil
	}
	for _, p := range t.Status.Message.Parts {
		if p.Data == nil {
			continue
		}
		b, _ := json.Marshal(p.Data)
		var e struct {
			Error *protocol.Error `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != nil {
			return e.Error
		}
	}
	return nil
}

// artifactResult is the skill's result a completed task keeps: the data
// part of its first artifact.
func artifactResult(t a2a.Task) json.RawMessage {
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			if p.Data != nil {
				b, err := json.Marshal(p.Data)
				if err == nil {
					return b
				}
			}
		}
	}
	return json.RawMessage("null")
}

// terminal says the MCP status is final.
func terminal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// serveTask answers a tasks/ method for c.
func (f *Face) serveTask(ctx context.Context, c protocol.Caller, method string, req sdk.Request) (sdk.Result, error) {
	if f.tasks == nil {
		return nil, protocolToWire(protocol.Errorf(protocol.CodeMethodNotFound, "method not found: %s (this face runs no tasks)", method))
	}
	p, _ := req.GetParams().(*taskParams)
	if p == nil {
		p = &taskParams{}
	}
	isModern := modern(req)
	if method != "tasks/list" && p.TaskID == "" {
		return nil, protocolToWire(protocol.Errorf(protocol.CodeInvalidParams, "invalid params: %s needs a taskId", method))
	}
	switch method {
	case "tasks/list":
		if isModern {
			break // not in the 2026-07-28 form
		}
		page, err := f.tasks.ListOwnTasks(ctx, c, p.Cursor, taskListPage, true)
		if err != nil {
			return nil, protocolToWire(protocol.AsError(err))
		}
		list := make([]any, 0, len(page.Tasks))
		for _, tt := range page.Tasks {
			list = append(list, f.taskView(tt, false).head(false))
		}
		m := map[string]any{"tasks": list}
		if page.Next != "" {
			m["nextCursor"] = page.Next
		}
		return &wireResult{m: m}, nil
	case "tasks/get":
		v, err := f.getTask(ctx, c, p.TaskID, isModern)
		if err != nil {
			return nil, err
		}
		if !isModern {
			f.notes.follow(req, c, p.TaskID)
			return &wireResult{m: v.head(false)}, nil
		}
		m := v.detailed()
		m["resultType"] = "complete"
		return &wireResult{m: m}, nil
	case "tasks/result":
		if isModern {
			break
		}
		return f.taskResult(ctx, req, c, p.TaskID)
	case "tasks/cancel":
		if _, err := f.tasks.CancelTask(ctx, c, p.TaskID); err != nil {
			perr := protocol.AsError(err)
			if perr.Code == a2a.CodeTaskNotFound || perr.Code == a2a.CodeTaskNotCancelable {
				perr = protocol.Errorf(protocol.CodeInvalidParams, "invalid params: %s", perr.Message)
			}
			return nil, protocolToWire(perr)
		}
		if isModern {
			return &wireResult{m: map[string]any{"resultType": "complete"}}, nil
		}
		v, err := f.getTask(ctx, c, p.TaskID, false)
		if err != nil {
			return nil, err
		}
		return &wireResult{m: v.head(false)}, nil
	case "tasks/update":
		if !isModern {
			break
		}
		if _, err := f.getTask(ctx, c, p.TaskID, true); err != nil {
			return nil, err
		}
		return nil, protocolToWire(protocol.Errorf(protocol.CodeInvalidParams, "invalid params: task %q asks for no input", protocol.Clip(p.TaskID, 80)))
	}
	return nil, protocolToWire(protocol.Errorf(protocol.CodeMethodNotFound, "method not found: %s is not a method of this protocol version's tasks", method))
}

// getTask is c's task id as MCP shows it; not found (or another
// caller's) is -32602, as the tasks extension has it.
func (f *Face) getTask(ctx context.Context, c protocol.Caller, id string, isModern bool) (taskView, error) {
	tt, err := f.tasks.GetTimedTask(ctx, c, id)
	if err != nil {
		perr := protocol.AsError(err)
		if perr.Code == a2a.CodeTaskNotFound {
			perr = protocol.Errorf(protocol.CodeInvalidParams, "invalid params: %s", perr.Message)
		}
		return taskView{}, protocolToWire(perr)
	}
	return f.taskView(tt, isModern), nil
}

// taskResult answers tasks/result (2025-11-25): it waits, bounded by ctx,
// until the task ends, then answers with the tool's result, which names
// the task in its _meta. req's session hears of the task's changes from
// then on, once the task is known to be c's (as with tasks/get).
func (f *Face) taskResult(ctx context.Context, req sdk.Request, c protocol.Caller, id string) (sdk.Result, error) {
	v, err := f.getTask(ctx, c, id, false)
	if err != nil {
		return nil, err
	}
	f.notes.follow(req, c, id)
	if !terminal(v.status) {
		if err := f.tasks.StreamTask(ctx, c, id, 0, false, func(a2a.StreamEvent) error { return nil }); err != nil {
			return nil, protocolToWire(protocol.AsError(err))
		}
		if v, err = f.getTask(ctx, c, id, false); err != nil {
			return nil, err
		}
		if !terminal(v.status) {
			return nil, protocolToWire(protocol.Errorf(protocol.CodeInternal, "internal error: task %q has not ended (%s)", id, v.status))
		}
	}
	res := v.result
	switch {
	case v.status == "cancelled":
		res = toolResult(nil, protocol.Errorf(protocol.CodeToolExecution, "task %q was cancelled", id))
	case res == nil:
		res = toolResult(nil, v.failure)
	}
	out := *res
	out.Meta = sdk.Meta{metaRelatedTask: map[string]any{"taskId": id}}
	return &out, nil
}

type taskAskedKey struct{}

// markTaskAsked reads the body of a 2025-11-25 POST (up to the edge's
// cap; the go-sdk reads it again, whole, and enforces the cap) and, when
// it is one tools/call with params.task, marks r so that withTokenInfo
// tells the middleware: the go-sdk's CallToolParams has no task member.
func (f *Face) markTaskAsked(r *http.Request) *http.Request {
	if f.tasks == nil || r.Method != http.MethodPost || r.Body == nil {
		return r
	}
	if !asksTaskBody(peekBody(r, f.http.e.MaxBody())) {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), taskAskedKey{}, true))
}

// peekBody reads r's body, at most max bytes, with the edge's one body
// reader (edge.ReadLimited: a known length is one allocation of its size,
// never io.ReadAll's doubled cap), for a look before the go-sdk reads it,
// and leaves r.Body to give the go-sdk what it would have read: the same
// bytes, or the same failure (over max it is the *http.MaxBytesError the
// go-sdk answers 413, of the same cap; else the read's error), in which
// case peekBody returns nil. No ResponseWriter is given to ReadLimited:
// the go-sdk's answer is the one the client gets.
func peekBody(r *http.Request, max int64) []byte {
	body := r.Body
	b, err := edge.ReadLimited(nil, r, max)
	if err != nil {
		r.Body = struct {
			io.Reader
			io.Closer
		}{errReader{err}, body}
		return nil
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), body), body}
	return b
}

// errReader is a body whose read failed: each read returns err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// asksTaskBody says whether b, a POST body of the 2025-11-25 era, is one
// tools/call whose params.task is an object (a batch, or anything else,
// is not).
func asksTaskBody(b []byte) bool {
	if !bytes.Contains(b, []byte(`"task"`)) {
		return false
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Task json.RawMessage `json:"task"`
		} `json:"params"`
	}
	return json.Unmarshal(b, &msg) == nil && msg.Method == "tools/call" && bytes.HasPrefix(bytes.TrimSpace(msg.Params.Task), []byte("{"))
}
