package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/mcpv2/mcpv2/protocol"
)

// A2A error codes (both versions; v1.0 adds the last three:
// codeExtendedCardNotConfigured of extcard.go, codeExtensionRequired and
// codeVersionNotSupported).
const (
	codeTaskNotFound        = -32001
	codeTaskNotCancelable   = -32002
	codePushNotSupported    = -32003
	codeUnsupportedOp       = -32004
	codeContentType         = -32005
	codeExtensionRequired   = -32008
	codeVersionNotSupported = -32009
	// codeEdgeRefusal is the JSON-RPC server error that the edge's own
	// refusals (credential, rate, busy, body size) carry on this face,
	// in place of mcpv2's -32001… (edge.WithRefusalCode).
	codeEdgeRefusal = -32000
)

// rpcError is a JSON-RPC error of the A2A face.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
	// kind tells a busy face and a cap apart (wireOf); not on the wire.
	kind errKind
}

func (e *rpcError) Error() string { return fmt.Sprintf("a2a error %d: %s", e.Code, e.Message) }

func rpcErrf(code int, format string, a ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, a...)}
}

// rpcRequest is one JSON-RPC request.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// methods maps each version's method names to the face's operation, the
// op that dispatch runs: every binding names its calls by these.
var methods = map[string]map[string]string{
	"1.0": {"SendMessage": "send", "SendStreamingMessage": "stream", "GetTask": "get", "ListTasks": "list",
		"CancelTask": "cancel", "SubscribeToTask": "subscribe",
		"CreateTaskPushNotificationConfig": "push.create", "GetTaskPushNotificationConfig": "push.get",
		"ListTaskPushNotificationConfigs": "push.list", "DeleteTaskPushNotificationConfig": "push.delete", "GetExtendedAgentCard": "extcard"},
	"0.3": {"message/send": "send", "message/stream": "stream", "tasks/get": "get", "tasks/cancel": "cancel",
		"tasks/resubscribe": "subscribe", "tasks/pushNotificationConfig/set": "push.create", "tasks/pushNotificationConfig/get": "push.get",
		"tasks/pushNotificationConfig/list": "push.list", "tasks/pushNotificationConfig/delete": "push.delete", "agent/getAuthenticatedExtendedCard": "extcard"},
}

// req is one request being served, in any binding: the operations
// (send, get, list, cancelTask, subscribe …) read it and answer through
// out, which writes the binding's wire form.
type req struct {
	f     *Face
	ctx   context.Context // the request's; canceled when the client goes
	c     protocol.Caller
	owner string
	v     string // "1.0" or "0.3": the JSON form of results and events
	// wire is the A2A version the client speaks ("1.0" or "0.3"), set by
	// every binding: a v0.3 client's request may run as v1.0 (q.v) and be
	// converted back (HTTP+JSON, gRPC), and what outlives it (a push
	// config) is kept in the client's version.
	wire string
	// lastEventID is what the client last saw of a resubscribed stream
	// (SSE Last-Event-ID, or the binding's equivalent); "" for none.
	lastEventID string
	id          json.RawMessage // the JSON-RPC id; null in other bindings
	// base is the http(s)://host:port that a card this request answers
	// with names (baseURL); "" is the edge's advertised one, or none.
	base    string
	method  string // the operation's name in the audit line
	started time.Time
	out     binding
}

// owner is the store's owner key of c's tasks on this face: the caller's
// holder (credential, or client IP), set apart on a peer's face by its
// ownerPrefix. Who owns a task is decided here only.
func (f *Face) owner(c protocol.Caller) string { return f.ownerPrefix + c.Holder() }

// newReq is a request of c on f with context ctx, answered through out:
// its owner (owner), a null JSON-RPC id, started now. The binding sets
// the rest (version, method, base …).
func (f *Face) newReq(ctx context.Context, c protocol.Caller, out binding) *req {
	return &req{f: f, ctx: ctx, c: c, owner: f.owner(c), id: json.RawMessage("null"), started: time.Now(), out: out}
}

// binding writes the answers of one request in its binding's wire form:
// JSON-RPC over HTTP (jsonrpcBinding), HTTP+JSON, gRPC. reply gets an
// operation's result and stream its events, both in the JSON form of
// q.v; fail gets an A2A error. A request is answered once: by reply, by
// fail, or by a stream.
type binding interface {
	reply(q *req, result any)
	fail(q *req, e *rpcError)
	stream(q *req) eventSink
}

// eventSink is an open stream of a task's events.
type eventSink interface {
	// send writes one event; an error means the client is gone.
	send(e Event) error
	// ping keeps an idle stream open.
	ping() error
}

// jsonrpcBinding answers a JSON-RPC request over HTTP: one response
// object, or SSE whose data lines are response objects.
type jsonrpcBinding struct {
	w http.ResponseWriter
}

// serveRPC serves one JSON-RPC request of the face on its edge.
func (f *Face) serveRPC(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	started := time.Now()
	body, ok := f.e.ReadBody(w, r)
	if !ok {
		return
	}
	f.serveRPCBody(w, r, c, body, f.baseURL(r), started)
}

// serveRPCBody serves the JSON-RPC request body of r, read already, for
// c; a card in its answer names base.
func (f *Face) serveRPCBody(w http.ResponseWriter, r *http.Request, c protocol.Caller, body []byte, base string, started time.Time) {
	c.Via = "a2a"
	// A caller without a credential holds its tasks against its client
	// IP's share of the task bytes, found by id only from that IP; it
	// still lists nothing (ListTasks).
	q := f.newReq(r.Context(), c, jsonrpcBinding{w: w})
	q.started, q.lastEventID, q.base = started, r.Header.Get("Last-Event-ID"), base
	var rr rpcRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&rr); err != nil {
		q.fail(&rpcError{Code: protocol.CodeParseError, Message: "parse error: the body is not one JSON-RPC request object: " + protocol.Clip(protocol.JSONErrorText(err), 200)})
		return
	}
	if len(rr.ID) > 0 {
		q.id = rr.ID
	}
	q.method = protocol.Clip(rr.Method, 64)
	if rr.JSONRPC != "2.0" || rr.Method == "" || !validID(rr.ID) {
		q.fail(rpcErrf(protocol.CodeInvalidRequest, `invalid request: want {"jsonrpc":"2.0","id":…,"method":…,"params":…} with a string or number id`))
		return
	}
	v, verr := version(r)
	if verr != nil {
		q.fail(verr)
		return
	}
	q.v, q.wire = v, v
	op, ok := methods[v][rr.Method]
	if !ok {
		other := "0.3"
		if v == "0.3" {
			other = "1.0"
		}
		hint := ""
		if _, there := methods[other][rr.Method]; there {
			hint = fmt.Sprintf(" (it is a method of A2A %s: send %s: %s)", other, VersionHeader, other)
		}
		q.fail(rpcErrf(protocol.CodeMethodNotFound, "method not found: %q in A2A %s%s", q.method, v, hint))
		return
	}
	f.dispatch(q, op, rr.Params)
}

// dispatch runs operation op (a value of methods) with its params in the
// v1.0 or v0.3 JSON form of q.v, answering through q.out.
func (f *Face) dispatch(q *req, op string, params json.RawMessage) {
	if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
		params = json.RawMessage("{}")
	}
	switch op {
	case "send":
		f.send(q, params, false)
	case "stream":
		f.send(q, params, true)
	case "get":
		f.get(q, params)
	case "list":
		f.list(q, params)
	case "cancel":
		f.cancelTask(q, params)
	case "subscribe":
		f.subscribe(q, params)
	case "push.create", "push.get", "push.list", "push.delete":
		f.dispatchPush(q, op, params)
	case "extcard":
		f.extendedCard(q, params)
	}
}

func validID(id json.RawMessage) bool {
	t := bytes.TrimSpace(id)
	return len(t) > 0 && (t[0] == '"' || t[0] == '-' || (t[0] >= '0' && t[0] <= '9'))
}

// audit writes the request's audit line.
func (q *req) audit(e *rpcError) {
	var perr *protocol.Error
	if e != nil {
		perr = &protocol.Error{Code: e.Code, Message: e.Message}
	}
	q.f.b.Audit(q.ctx, q.c, "a2a "+nonEmpty(q.method, "?"), perr, q.started)
}

// reply answers with result, and writes the audit line.
func (q *req) reply(result any) {
	q.audit(nil)
	q.out.reply(q, result)
}

// fail answers with e, and writes the audit line.
func (q *req) fail(e *rpcError) {
	q.audit(e)
	q.out.fail(q, e)
}

// startStream opens the request's event stream (the audit line is the
// caller's to write first).
func (q *req) startStream() eventSink { return q.out.stream(q) }

func (b jsonrpcBinding) reply(q *req, result any) {
	writeJSON(b.w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": q.id, "result": result})
}

// fail answers with e. A request the face could not read is 400; a
// method's error is 200, as JSON-RPC over HTTP has it. In v1.0 the error's
// data is its google.rpc.ErrorInfo.
func (b jsonrpcBinding) fail(q *req, e *rpcError) {
	status := http.StatusOK
	if e.Code == protocol.CodeParseError || e.Code == protocol.CodeInvalidRequest {
		status = http.StatusBadRequest
	}
	if q.v == "1.0" {
		e.Data = []any{errorInfo(e).json()}
	}
	writeJSON(b.w, status, map[string]any{"jsonrpc": "2.0", "id": q.id, "error": e})
}

// errInfo is a google.rpc.ErrorInfo as every binding carries it: json is
// its ProtoJSON (JSON-RPC v1.0, HTTP+JSON), proto (grpc.go) the message in
// a gRPC status's details.
type errInfo struct {
	reason, domain string
	meta           map[string]string // none when empty
}

// json is i in ProtoJSON, with its @type; metadata only when it has any.
func (i errInfo) json() map[string]any {
	m := map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": i.reason, "domain": i.domain}
	if len(i.meta) > 0 {
		m["metadata"] = i.meta
	}
	return m
}

// errorInfo is the ErrorInfo of e, as every v1.0 binding carries it:
// reason from the A2A code (wireOf), domain a2a-protocol.org; a busy face
// is BUSY and a cap (store.QuotaError, whose numbers are in e.Data)
// QUOTA_EXCEEDED, both of domain mcpv2, a cap with those numbers as its
// metadata.
func errorInfo(e *rpcError) errInfo {
	w := wireOf(e)
	info := errInfo{reason: w.reason, domain: w.domain}
	if d, ok := e.Data.(map[string]any); ok && e.kind == errQuota { // a cap: its numbers
		info.meta = map[string]string{}
		for k, v := range d {
			info.meta[k] = fmt.Sprint(v)
		}
	}
	return info
}

// edgeInfo is the ErrorInfo of a refusal by the edge itself, in every
// binding: its reason (edgeReason), domain mcpv2, and its data's members
// as metadata (edgeMetadata).
func edgeInfo(perr *protocol.Error) errInfo {
	return errInfo{reason: edgeReason(perr.Code), domain: "mcpv2", meta: edgeMetadata(perr)}
}

// errKind marks the A2A errors that no A2A code tells apart: a busy face
// (the JSON-RPC code is -32603) and a cap of the task store (the node's
// code, its numbers in Data).
type errKind uint8

const (
	errPlain errKind = iota
	errBusy          // the face runs its most tasks: retry later
	errQuota         // a cap of the task store (store.QuotaError)
)

// busyErrf is a busy face's error: internal (-32603) in JSON-RPC, 503
// UNAVAILABLE with Retry-After over HTTP+JSON, UNAVAILABLE over gRPC.
func busyErrf(format string, a ...any) *rpcError {
	e := rpcErrf(protocol.CodeInternal, format, a...)
	e.kind = errBusy
	return e
}

// wireError is how the bindings answer an A2A error: its gRPC code, its
// HTTP status over HTTP+JSON (the google.rpc.Code name is the gRPC
// code's), and the reason and domain of its google.rpc.ErrorInfo.
type wireError struct {
	grpc   codes.Code
	http   int
	reason string
	domain string
}

// wireErrors is the one table of the A2A codes, as the A2A spec maps them
// (and @a2a-js/sdk reads them); a code not in it is INTERNAL.
var wireErrors = map[int]wireError{
	codeTaskNotFound:              {codes.NotFound, http.StatusNotFound, "TASK_NOT_FOUND", "a2a-protocol.org"},
	codeTaskNotCancelable:         {codes.FailedPrecondition, http.StatusBadRequest, "TASK_NOT_CANCELABLE", "a2a-protocol.org"},
	codePushNotSupported:          {codes.FailedPrecondition, http.StatusBadRequest, "PUSH_NOTIFICATION_NOT_SUPPORTED", "a2a-protocol.org"},
	codeUnsupportedOp:             {codes.FailedPrecondition, http.StatusBadRequest, "UNSUPPORTED_OPERATION", "a2a-protocol.org"},
	codeContentType:               {codes.InvalidArgument, http.StatusBadRequest, "CONTENT_TYPE_NOT_SUPPORTED", "a2a-protocol.org"},
	codeExtendedCardNotConfigured: {codes.FailedPrecondition, http.StatusBadRequest, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", "a2a-protocol.org"},
	codeExtensionRequired:         {codes.FailedPrecondition, http.StatusBadRequest, "EXTENSION_SUPPORT_REQUIRED", "a2a-protocol.org"},
	codeVersionNotSupported:       {codes.FailedPrecondition, http.StatusBadRequest, "VERSION_NOT_SUPPORTED", "a2a-protocol.org"},
	protocol.CodeParseError:       {codes.InvalidArgument, http.StatusBadRequest, "PARSE_ERROR", "a2a-protocol.org"},
	protocol.CodeInvalidRequest:   {codes.InvalidArgument, http.StatusBadRequest, "INVALID_REQUEST", "a2a-protocol.org"},
	protocol.CodeInvalidParams:    {codes.InvalidArgument, http.StatusBadRequest, "INVALID_PARAMS", "a2a-protocol.org"},
	// A method (JSON-RPC) or route (HTTP+JSON) that is not there; gRPC's
	// own unknown methods are UNIMPLEMENTED (grpcUnknown).
	protocol.CodeMethodNotFound: {codes.NotFound, http.StatusNotFound, "METHOD_NOT_FOUND", "a2a-protocol.org"},
}

// wireOf is how the bindings answer e: by its kind, else by its code.
func wireOf(e *rpcError) wireError {
	switch e.kind {
	case errBusy:
		return wireError{codes.Unavailable, http.StatusServiceUnavailable, "BUSY", "mcpv2"}
	case errQuota:
		return wireError{codes.ResourceExhausted, http.StatusTooManyRequests, "QUOTA_EXCEEDED", "mcpv2"}
	}
	if w, ok := wireErrors[e.Code]; ok {
		return w
	}
	return wireError{codes.Internal, http.StatusInternalServerError, "INTERNAL", "a2a-protocol.org"}
}

// codeName is the google.rpc.Code name of c ("FAILED_PRECONDITION").
func codeName(c codes.Code) string {
	s := c.String()
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// statusCode is the gRPC code of an HTTP status of the edge's own
// refusals, and so the google.rpc.Code of one over HTTP+JSON.
func statusCode(status int) codes.Code {
	switch status {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return codes.Unimplemented
	case http.StatusTooManyRequests, http.StatusRequestEntityTooLarge:
		return codes.ResourceExhausted
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return codes.Unavailable
	case http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	}
	return codes.Internal
}

// edgeReason is the ErrorInfo reason (domain mcpv2) of a refusal by the
// edge itself, from its mcpv2 code, in every binding.
func edgeReason(code int) string {
	switch code {
	case protocol.CodeParseError:
		return "PARSE_ERROR"
	case protocol.CodeInvalidRequest:
		return "INVALID_REQUEST"
	case protocol.CodeInvalidParams:
		return "INVALID_PARAMS"
	case protocol.CodeInvalidSession:
		return "INVALID_CREDENTIAL"
	case protocol.CodeRateLimited:
		return "RATE_LIMITED"
	case protocol.CodeNotPermitted:
		return "NOT_PERMITTED"
	}
	return "EDGE_REFUSAL"
}

// edgeMetadata is the ErrorInfo metadata of a refusal by the edge: its
// data's members as strings.
func edgeMetadata(perr *protocol.Error) map[string]string {
	meta := map[string]string{}
	if perr.Data == nil {
		return meta
	}
	var m map[string]any
	if b, err := json.Marshal(perr.Data); err == nil && json.Unmarshal(b, &m) == nil {
		for k, v := range m {
			meta[k] = fmt.Sprint(v)
		}
	}
	return meta
}

// decodeParams decodes params strictly into v.
func decodeParams(params json.RawMessage, v any) *rpcError {
	dec := json.NewDecoder(bytes.NewReader(params))
	if err := dec.Decode(v); err != nil {
		return rpcErrf(protocol.CodeInvalidParams, "invalid params: %s", protocol.Clip(err.Error(), 200))
	}
	return nil
}

// task encodes t in the request's version.
func (q *req) task(t Task, historyLength int, withArtifacts bool) any {
	if q.v == "1.0" {
		return t.v1(historyLength, withArtifacts)
	}
	return t.v03(historyLength)
}

// event encodes e in the request's version.
func (q *req) event(e Event) any {
	if q.v == "1.0" {
		return e.v1()
	}
	return e.v03()
}

// load returns the task id of the request's caller: another caller's task
// is not found, as a task that does not exist.
func (q *req) load(id string) (Task, protocol.StoredTask, *rpcError) {
	if id == "" {
		return Task{}, protocol.StoredTask{}, rpcErrf(protocol.CodeInvalidParams, "invalid params: id is missing")
	}
	st, err := q.f.b.Task(id)
	if errors.Is(err, protocol.ErrTaskNotFound) || (err == nil && st.Owner != q.owner) {
		return Task{}, st, rpcErrf(codeTaskNotFound, "task not found: %q", protocol.Clip(id, 80))
	}
	if err != nil {
		q.f.log.Error("a2a: load task", "id", id, "err", err)
		return Task{}, st, rpcErrf(protocol.CodeInternal, "internal error: the task could not be read")
	}
	var t Task
	if err := json.Unmarshal(st.Task, &t); err != nil {
		return Task{}, st, rpcErrf(protocol.CodeInternal, "internal error: the task could not be read")
	}
	return t, st, nil
}

// taskRef is the params of the methods that name a task (get, cancel,
// subscribe) in either version.
type taskRef struct {
	ID            string `json:"id"`
	HistoryLength *int   `json:"historyLength"`
	Tenant        string `json:"tenant"`
	Metadata      any    `json:"metadata"`
}

// loadRef decodes a taskRef and loads its task; on a refusal it has
// answered, and ok is false.
func (q *req) loadRef(params json.RawMessage) (p taskRef, t Task, st protocol.StoredTask, ok bool) {
	if e := decodeParams(params, &p); e != nil {
		q.fail(e)
		return p, t, st, false
	}
	t, st, e := q.load(p.ID)
	if e != nil {
		q.fail(e)
		return p, t, st, false
	}
	return p, t, st, true
}

func (f *Face) get(q *req, params json.RawMessage) {
	p, t, _, ok := q.loadRef(params)
	if !ok {
		return
	}
	hl := -1
	if p.HistoryLength != nil {
		hl = max(*p.HistoryLength, 0)
	}
	q.reply(q.task(t, hl, true))
}

func (f *Face) list(q *req, params json.RawMessage) {
	var p struct {
		Tenant               string    `json:"tenant"`
		ContextID            string    `json:"contextId"`
		Status               string    `json:"status"`
		PageSize             *int      `json:"pageSize"`
		PageToken            string    `json:"pageToken"`
		HistoryLength        *int      `json:"historyLength"`
		StatusTimestampAfter time.Time `json:"statusTimestampAfter"`
		IncludeArtifacts     bool      `json:"includeArtifacts"`
	}
	if e := decodeParams(params, &p); e != nil {
		q.fail(e)
		return
	}
	size := 50
	if p.PageSize != nil {
		if *p.PageSize < 1 || *p.PageSize > 100 {
			q.fail(rpcErrf(protocol.CodeInvalidParams, "invalid params: pageSize must be from 1 to 100"))
			return
		}
		size = *p.PageSize
	}
	query := protocol.TaskQuery{ContextID: p.ContextID, UpdatedAfter: p.StatusTimestampAfter, Before: p.PageToken}
	if p.Status != "" && p.Status != "TASK_STATE_UNSPECIFIED" {
		st, ok := stateFromWire(p.Status)
		if !ok {
			q.fail(rpcErrf(protocol.CodeInvalidParams, "invalid params: status %q is not a task state", protocol.Clip(p.Status, 40)))
			return
		}
		query.State = string(st)
	}
	var all []protocol.StoredTask
	var err error
	if q.c.Owner != "" { // a caller without a credential owns nothing to list
		all, err = f.b.ListTasks(q.owner, protocol.TaskQuery{ContextID: query.ContextID, State: query.State, UpdatedAfter: query.UpdatedAfter})
	}
	if err != nil {
		f.log.Error("a2a: list tasks", "err", err)
		q.fail(rpcErrf(protocol.CodeInternal, "internal error: the tasks could not be listed"))
		return
	}
	page, next, ok := pageAfter(all, func(st protocol.StoredTask) string { return st.ID }, p.PageToken, size)
	if !ok {
		q.fail(rpcErrf(protocol.CodeInvalidParams, "invalid params: pageToken %q names no task of this listing", protocol.Clip(p.PageToken, 80)))
		return
	}
	hl := 0
	if p.HistoryLength != nil {
		hl = max(*p.HistoryLength, 0)
	}
	tasks := make([]any, 0, len(page))
	for _, st := range page {
		var t Task
		if json.Unmarshal(st.Task, &t) == nil {
			tasks = append(tasks, t.v1(hl, p.IncludeArtifacts))
		}
	}
	q.reply(map[string]any{"tasks": tasks, "nextPageToken": next, "pageSize": size, "totalSize": len(all)})
}

// pageAfter is the one cursor paging of the task listings (ListTasks,
// ListOwnTasks): the items of all after the one whose id is cursor ("":
// from the start), at most size of them, and next, the id of the page's
// last item when more follow ("" at the end). ok is false when cursor
// names no item of all.
func pageAfter[T any](all []T, id func(T) string, cursor string, size int) (page []T, next string, ok bool) {
	start := 0
	if cursor != "" {
		start = -1
		for i, v := range all {
			if id(v) == cursor {
				start = i + 1
			}
		}
		if start < 0 {
			return nil, "", false
		}
	}
	page = all[start:min(start+size, len(all))]
	if start+size < len(all) {
		next = id(page[len(page)-1])
	}
	return page, next, true
}

func (f *Face) cancelTask(q *req, params json.RawMessage) {
	p, t, _, ok := q.loadRef(params)
	if !ok {
		return
	}
	if t.Status.State.Terminal() {
		q.fail(rpcErrf(codeTaskNotCancelable, "task not cancelable: %q is %s already", t.ID, t.Status.State))
		return
	}
	if err := f.cancelRun(q.ctx, t, q.owner); err != nil {
		q.fail(err)
		return
	}
	t, _, e := q.load(p.ID)
	if e != nil {
		q.fail(e)
		return
	}
	q.reply(q.task(t, -1, true))
}

// --- server-sent events

// sseStream writes a stream's events, each "id: SEQ" and "data: " the event
// in the form wrap gives it (JSON-RPC: a response object), and a comment
// line when idle. Every HTTP binding streams this way.
type sseStream struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	wrap func(Event) any
}

// newSSE starts an event stream on w: 200 with text/event-stream.
func newSSE(w http.ResponseWriter, wrap func(Event) any) *sseStream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseStream{w: w, rc: http.NewResponseController(w), wrap: wrap}
	_ = s.rc.Flush()
	return s
}

func (b jsonrpcBinding) stream(q *req) eventSink {
	return newSSE(b.w, func(e Event) any {
		return map[string]any{"jsonrpc": "2.0", "id": q.id, "result": q.event(e)}
	})
}

func (s *sseStream) send(e Event) error {
	b, err := json.Marshal(s.wrap(e))
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "id: %s\ndata: %s\n\n", strconv.FormatUint(e.Seq, 10), b); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseStream) ping() error {
	if _, err := fmt.Fprint(s.w, ": keep-alive\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// ends says whether e ends a stream: a terminal or interrupted state.
func (e Event) ends() bool {
	var st State
	switch {
	case e.Status != nil:
		st = e.Status.Status.State
	case e.Task != nil:
		st = e.Task.Status.State
	default:
		return false
	}
	return st.Terminal() || st == StateInputRequired
}

// subscribe streams a task's events (SubscribeToTask, tasks/resubscribe)
// as SSE of JSON-RPC results: streamEvents, after the checks that answer
// with a JSON-RPC error (no such task, a terminal one, a bad
// Last-Event-ID).
func (f *Face) subscribe(q *req, params json.RawMessage) {
	_, t, st, ok := q.loadRef(params)
	if !ok {
		return
	}
	if t.Status.State.Terminal() {
		q.fail(rpcErrf(codeUnsupportedOp, "unsupported operation: task %q is %s: there is nothing to subscribe to; get it with %s", t.ID, t.Status.State, map[string]string{"1.0": "GetTask", "0.3": "tasks/get"}[q.v]))
		return
	}
	// Last-Event-ID (the SSE way) names the last event the client saw:
	// the ones after it are replayed from the store, then the live ones
	// follow. Without it the stream starts with the task as it is now.
	after, replay := uint64(0), false
	if v := q.lastEventID; v != "" {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			q.fail(rpcErrf(protocol.CodeInvalidParams, "invalid params: Last-Event-ID %q is not an event number", protocol.Clip(v, 40)))
			return
		}
		after, replay = n, true
	}
	q.audit(nil)
	s := q.startStream()
	load := func(id string) (Task, protocol.StoredTask, bool) {
		t, st, e := q.load(id)
		return t, st, e == nil
	}
	if err := f.streamEvents(q.ctx, t, st, load, after, replay, s.send, s.ping); errors.Is(err, errTaskEvents) {
		f.log.Error("a2a: task events", "id", t.ID, "err", err)
	}
}
