package a2a

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// RESTPath is the HTTP+JSON (REST) URL of the face, for A2A v1.0 and v0.3:
// the v1.0 routes hang from it (RESTPath+"/message:send", and
// RESTPath+"/{tenant}/message:send" with a tenant), the v0.3 ones from
// RESTPath+"/v1" (RESTPath+"/v1/message:send"), as the a2a-js clients
// build them from the card's interface URL. A v1.0 tenant is a PeerID: the
// face of that mesh peer behind the edge (the node's own: its own face).
const RESTPath = Path + "/rest"

// RESTBinding is the card's name of the HTTP+JSON binding (v1.0
// protocolBinding, v0.3 transport).
const RESTBinding = "HTTP+JSON"

// Limits of the HTTP+JSON binding's paths.
const (
	// maxRESTSegments caps the segments of a route: the longest,
	// /{tenant}/tasks/{id}/pushNotificationConfigs/{cid}, has five.
	maxRESTSegments = 5
	// maxRESTSegment caps one segment of a route once unescaped (a task
	// or config id, a tenant), as the JSON-RPC binding caps nothing less.
	maxRESTSegment = 512
)

// methodNames is methods inverted: each version's method name of an op,
// for the audit line.
var methodNames = func() map[string]map[string]string {
	out := map[string]map[string]string{}
	for v, m := range methods {
		out[v] = map[string]string{}
		for name, op := range m {
			out[v][op] = name
		}
	}
	return out
}()

// restRoute is one request of the HTTP+JSON binding as its method, path
// and query name it: the operation, and the params the path and query
// give (the body, for the routes that take one, gives the rest).
type restRoute struct {
	v      string // "1.0", or "0.3" for a path under /v1
	tenant string // the v1.0 {tenant} segment, unescaped; "" for none
	op     string // a value of methods
	body   bool   // the body is a JSON object of the params
	fields map[string]json.RawMessage
	// allow is set when the path names a route the method is not one of:
	// the methods it takes (a 405).
	allow string
}

// name is the route's method name in its version ("SendMessage",
// "message/send"), for the audit line.
func (rt restRoute) name() string {
	if n := methodNames[rt.v][rt.op]; n != "" {
		return "rest " + n
	}
	return "rest ?"
}

// restQuery is the query parameters a route takes, and their JSON kinds:
// 'i' an integer, 'b' a boolean, 's' a string.
var restQuery = map[string]map[string]byte{
	"get":       {"historyLength": 'i'},
	"list":      {"contextId": 's', "status": 's', "pageSize": 'i', "pageToken": 's', "historyLength": 'i', "statusTimestampAfter": 's', "includeArtifacts": 'b'},
	"push.list": {"pageSize": 'i', "pageToken": 's'},
}

// restIgnored are query parameters of every route that are not params:
// the edge session (sessionId) and the version.
var restIgnored = []string{"sessionid", strings.ToLower(VersionHeader)}

// parseRESTRoute reads a request of the HTTP+JSON binding: method, path
// (escaped, what follows RESTPath, from its "/") and query. A path that
// names no route is CodeMethodNotFound (404); one that names a route the
// method is not for sets allow (405); a bad segment or query parameter is
// CodeInvalidParams (the body's JSON too: INVALID_PARAMS is what @a2a-js/sdk
// reads as RequestMalformedError). rt.v is set whenever the path's shape tells it.
func parseRESTRoute(method, path string, query url.Values) (rt restRoute, e *rpcError) {
	rt.v = "1.0"
	rest, ok := strings.CutPrefix(path, "/")
	if !ok || rest == "" {
		return rt, rpcErrf(protocol.CodeMethodNotFound, "no HTTP+JSON route at %s: the routes are %s/message:send, /message:stream, /tasks, /tasks/{id}, /tasks/{id}:cancel, /tasks/{id}:subscribe, /tasks/{id}/pushNotificationConfigs and /extendedAgentCard (v1.0), and the same under %s/v1 (v0.3)",
			RESTPath+protocol.Clip(path, 80), RESTPath, RESTPath)
	}
	raw := strings.Split(rest, "/")
	if len(raw) > maxRESTSegments+1 {
		return rt, rpcErrf(protocol.CodeMethodNotFound, "no HTTP+JSON route at %s: no route has more than %d segments", RESTPath+protocol.Clip(path, 120), maxRESTSegments)
	}
	segs := make([]string, len(raw))
	for i, s := range raw {
		u, err := url.PathUnescape(s)
		if err != nil {
			return rt, rpcErrf(protocol.CodeInvalidParams, "invalid params: path segment %q is not URL-escaped text", protocol.Clip(s, 80))
		}
		if len(u) > maxRESTSegment {
			return rt, rpcErrf(protocol.CodeInvalidParams, "invalid params: path segment %d is %d bytes, more than %d", i+1, len(u), maxRESTSegment)
		}
		segs[i] = u
	}
	switch {
	case raw[0] == "v1":
		rt.v, segs = "0.3", segs[1:]
	case len(segs) > 1 && !slices.Contains([]string{"message:send", "message:stream", "tasks", "extendedAgentCard"}, raw[0]):
		rt.tenant, segs = segs[0], segs[1:]
	}
	if e := rt.match(method, segs, path); e != nil {
		return rt, e
	}
	if rt.allow != "" {
		return rt, rpcErrf(protocol.CodeMethodNotFound, "method not allowed: %s %s is not a route; %s takes %s", protocol.Clip(method, 20), RESTPath+protocol.Clip(path, 120), RESTPath+protocol.Clip(path, 120), rt.allow)
	}
	return rt, rt.readQuery(query)
}

// match finds the route of segs (after /v1 or the tenant) for method:
// rt.op, rt.body and the fields the path gives; rt.allow when the path is
// a route but not for method.
func (rt *restRoute) match(method string, segs []string, path string) *rpcError {
	rt.fields = map[string]json.RawMessage{}
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	// by is the route's op for each method it takes.
	var by map[string]string
	card := "extendedAgentCard"
	if rt.v == "0.3" {
		card = "card"
	}
	switch {
	case len(segs) == 1 && segs[0] == "message:send":
		by = map[string]string{http.MethodPost: "send"}
	case len(segs) == 1 && segs[0] == "message:stream":
		by = map[string]string{http.MethodPost: "stream"}
	case len(segs) == 1 && segs[0] == card:
		by = map[string]string{http.MethodGet: "extcard"}
	case len(segs) == 1 && segs[0] == "tasks" && rt.v == "1.0":
		by = map[string]string{http.MethodGet: "list"}
	case len(segs) == 2 && segs[0] == "tasks":
		id, verb := segs[1], ""
		if i := strings.LastIndexByte(id, ':'); i >= 0 {
			id, verb = id[:i], id[i+1:]
		}
		switch verb {
		case "cancel":
			by = map[string]string{http.MethodPost: "cancel"}
		case "subscribe": // v1.0 posts it, the v0.3 legacy client gets it
			by = map[string]string{http.MethodPost: "subscribe", http.MethodGet: "subscribe"}
		default:
			if verb != "" && method != http.MethodGet {
				return rpcErrf(protocol.CodeMethodNotFound, "no HTTP+JSON route at %s: :%s is not a verb of a task; the verbs are :cancel and :subscribe", RESTPath+protocol.Clip(path, 120), protocol.Clip(verb, 40))
			}
			id = segs[1] // a task id may hold a colon
			by = map[string]string{http.MethodGet: "get"}
		}
		if id == "" {
			return rpcErrf(protocol.CodeInvalidParams, "invalid params: the task id in %s is empty", RESTPath+protocol.Clip(path, 120))
		}
		rt.fields["id"] = str(id)
	case len(segs) == 3 && segs[0] == "tasks" && segs[2] == "pushNotificationConfigs":
		by = map[string]string{http.MethodPost: "push.create", http.MethodGet: "push.list"}
		rt.fields["taskId"] = str(segs[1])
	case len(segs) == 4 && segs[0] == "tasks" && segs[2] == "pushNotificationConfigs":
		by = map[string]string{http.MethodGet: "push.get", http.MethodDelete: "push.delete"}
		rt.fields["taskId"], rt.fields["id"] = str(segs[1]), str(segs[3])
		if segs[3] == "" {
			return rpcErrf(protocol.CodeInvalidParams, "invalid params: the config id in %s is empty", RESTPath+protocol.Clip(path, 120))
		}
	default:
		hint := ""
		if rt.v == "0.3" && len(segs) == 1 && segs[0] == "tasks" {
			hint = "; A2A 0.3 has no HTTP+JSON route to list tasks: GET " + RESTPath + "/tasks is v1.0's"
		}
		return rpcErrf(protocol.CodeMethodNotFound, "no HTTP+JSON route at %s in A2A %s%s", RESTPath+protocol.Clip(path, 120), rt.v, hint)
	}
	if _, ok := rt.fields["taskId"]; ok && segs[1] == "" {
		return rpcErrf(protocol.CodeInvalidParams, "invalid params: the task id in %s is empty", RESTPath+protocol.Clip(path, 120))
	}
	op, ok := by[method]
	if !ok {
		allow := make([]string, 0, len(by))
		for m := range by {
			allow = append(allow, m)
		}
		slices.Sort(allow)
		rt.allow = strings.Join(allow, ", ")
		return nil
	}
	rt.op = op
	rt.body = op == "send" || op == "stream" || op == "cancel" || op == "push.create"
	return nil
}

// readQuery adds the route's query parameters to its fields, in their
// JSON kinds; a parameter the route does not take, or one given twice, is
// refused by name.
func (rt *restRoute) readQuery(query url.Values) *rpcError {
	takes := restQuery[rt.op]
	keys := make([]string, 0, len(query))
	for k := range query {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vals := query[k]
		if slices.Contains(restIgnored, strings.ToLower(k)) {
			continue
		}
		kind, ok := takes[k]
		if !ok {
			names := make([]string, 0, len(takes))
			for n := range takes {
				names = append(names, n)
			}
			slices.Sort(names)
			what := "no query parameters"
			if len(names) > 0 {
				what = "only " + strings.Join(names, ", ")
			}
			return rpcErrf(protocol.CodeInvalidParams, "invalid params: query parameter %q is not one of %s, which takes %s", protocol.Clip(k, 40), rt.name(), what)
		}
		if len(vals) != 1 {
			return rpcErrf(protocol.CodeInvalidParams, "invalid params: query parameter %q is given %d times", k, len(vals))
		}
		v := vals[0]
		switch kind {
		case 'i':
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return rpcErrf(protocol.CodeInvalidParams, "invalid params: query parameter %s=%q is not an integer", k, protocol.Clip(v, 40))
			}
			rt.fields[k] = json.RawMessage(strconv.FormatInt(n, 10))
		case 'b':
			b, err := strconv.ParseBool(v)
			if err != nil {
				return rpcErrf(protocol.CodeInvalidParams, "invalid params: query parameter %s=%q is not true or false", k, protocol.Clip(v, 40))
			}
			rt.fields[k] = json.RawMessage(strconv.FormatBool(b))
		default:
			b, _ := json.Marshal(v)
			rt.fields[k] = b
		}
	}
	return nil
}

// params is the route's params: the body's JSON object (for a route that
// takes one; an empty body is {}) with the fields of the path and query.
// A field the body names otherwise than the path is refused.
func (rt restRoute) params(body []byte) (json.RawMessage, *rpcError) {
	m := map[string]json.RawMessage{}
	if rt.body && len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, rpcErrf(protocol.CodeInvalidParams, "invalid params: the body is not one JSON object: %s", protocol.Clip(protocol.JSONErrorText(err), 200))
		}
		if m == nil { // null
			m = map[string]json.RawMessage{}
		}
	}
	for k, v := range rt.fields {
		if b, ok := m[k]; ok && !jsonSame(b, v) {
			return nil, rpcErrf(protocol.CodeInvalidParams, "invalid params: the body's %s %s is not the path's %s", k, protocol.Clip(string(b), 80), protocol.Clip(string(v), 80))
		}
		m[k] = v
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, rpcErrf(protocol.CodeInternal, "internal error: the params could not be encoded")
	}
	return out, nil
}

// jsonSame says whether two JSON values are the same value.
func jsonSame(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// restSubpath is what follows RESTPath in r's escaped path, from its "/".
func restSubpath(r *http.Request) string {
	p := r.URL.EscapedPath()
	if i := strings.Index(p, RESTPath+"/"); i >= 0 {
		return p[i+len(RESTPath):]
	}
	return ""
}

// restStanding says whether a request of the HTTP+JSON binding is an event
// stream (it then holds a stream slot): one that accepts SSE, or a route
// that answers with it.
func restStanding(r *http.Request) bool {
	p := r.URL.EscapedPath()
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream") ||
		strings.HasSuffix(p, "/message:stream") || strings.HasSuffix(p, ":subscribe")
}

// serveREST serves one request of the HTTP+JSON binding of the face: its
// route names the operation, dispatch runs it, restBinding writes the
// answer. A v1.0 tenant that is a PeerID goes to that peer's face
// (restPeer); on a peer's URL the tenant, if any, must be that peer.
func (f *Face) serveREST(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	c.Via = "a2a"
	b := &restBinding{w: w}
	q := f.newReq(r.Context(), c, b)
	q.lastEventID, q.base = r.Header.Get("Last-Event-ID"), f.baseURL(r)
	rt, e := parseRESTRoute(r.Method, restSubpath(r), r.URL.Query())
	q.v, q.wire, b.legacy, q.method, b.allow = rt.v, rt.v, rt.v == "0.3", rt.name(), rt.allow
	if e != nil {
		q.fail(e)
		return
	}
	if e := restVersion(r, rt.v); e != nil {
		q.fail(e)
		return
	}
	if rt.tenant != "" {
		peer := r.PathValue("peer")
		switch {
		case peer == "" && protocol.LooksLikePeerID(rt.tenant) && f.restPeer != nil:
			r.SetPathValue("peer", rt.tenant)
			f.restPeer(w, r, c) // serves this again, as the peer's (or the node's own) face
			return
		case peer == "":
			q.fail(rpcErrf(protocol.CodeMethodNotFound, "no HTTP+JSON route at %s: tenant %q is not a PeerID; this agent's tenants are the PeerIDs of the mesh peers behind its edge",
				RESTPath+protocol.Clip(restSubpath(r), 120), protocol.Clip(rt.tenant, 80)))
			return
		case rt.tenant != peer:
			q.fail(rpcErrf(protocol.CodeInvalidParams, "invalid params: tenant %q on the URL of peer %s: a peer's URL takes no other tenant", protocol.Clip(rt.tenant, 80), peer))
			return
		}
	}
	var body []byte
	if rt.body {
		var ok bool
		if body, ok = f.e.ReadBody(w, r); !ok {
			return
		}
	}
	var params json.RawMessage
	if b.legacy { // runs as v1.0: its body converted (rest03.go), its answers converted back
		q.v, b.op = "1.0", rt.op
		params, e = rt.params03(body)
	} else {
		params, e = rt.params(body)
	}
	if e != nil {
		q.fail(e)
		return
	}
	f.dispatch(q, rt.op, params)
}

// restVersion checks the request's A2A-Version (header, or query
// parameter), if it has one, against v, the version of its route.
func restVersion(r *http.Request, v string) *rpcError {
	h := r.Header.Get(VersionHeader)
	if h == "" {
		h = r.URL.Query().Get(VersionHeader)
	}
	if strings.TrimSpace(h) == "" {
		return nil
	}
	hv, e := version(r)
	if e != nil {
		return e
	}
	if hv != v {
		where := RESTPath + "/…"
		if hv == "0.3" {
			where = RESTPath + "/v1/…"
		}
		return rpcErrf(codeVersionNotSupported, "version not supported: %s %s on a route of A2A %s; the A2A %s routes are %s", VersionHeader, hv, v, hv, where)
	}
	return nil
}

// restBinding answers a request of the HTTP+JSON binding: the result's
// JSON as the body; an error as its HTTP status with a google.rpc.Status
// ({"error": {code, status, message, details}}) in v1.0, the legacy
// {code, message, data} in v0.3; events as SSE whose data lines are the
// StreamResponse JSON itself.
type restBinding struct {
	w      http.ResponseWriter
	legacy bool   // the v0.3 wire form: results and events converted from v1.0
	op     string // the operation, for the v0.3 form of its result
	allow  string // the route's methods, for a 405
}

func (b *restBinding) reply(q *req, result any) {
	if result == nil {
		result = struct{}{}
	}
	if b.legacy {
		out, err := result03(b.op, result)
		if err != nil {
			q.f.log.Error("a2a rest: a v1.0 result in v0.3 form", "op", b.op, "err", err)
			writeJSON(b.w, http.StatusInternalServerError, legacyError{Code: protocol.CodeInternal, Message: "internal error: the result could not be written in A2A 0.3 form"})
			return
		}
		result = out
	}
	writeJSON(b.w, http.StatusOK, result)
}

func (b *restBinding) fail(q *req, e *rpcError) {
	we := wireOf(e)
	status, name := we.http, codeName(we.grpc)
	if b.allow != "" {
		b.w.Header().Set("Allow", b.allow)
		status, name = http.StatusMethodNotAllowed, "UNIMPLEMENTED"
	}
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		b.w.Header().Set("Retry-After", "1")
	}
	if b.legacy {
		writeJSON(b.w, status, legacyError{Code: e.Code, Message: e.Message, Data: e.Data})
		return
	}
	writeJSON(b.w, status, map[string]any{"error": rpcStatus{Code: status, Status: name, Message: e.Message, Details: []any{errorInfo(e).json()}}})
}

func (b *restBinding) stream(q *req) eventSink {
	if !b.legacy {
		return newSSE(b.w, func(e Event) any { return q.event(e) })
	}
	return newSSE(b.w, func(e Event) any {
		out, err := event03(q.event(e))
		if err != nil { // the face's own events convert; should one not, the client hears of it
			q.f.log.Error("a2a rest: a v1.0 event in v0.3 form", "err", err)
			return legacyError{Code: protocol.CodeInternal, Message: "internal error: an event could not be written in A2A 0.3 form"}
		}
		return out
	})
}

// rpcStatus is a google.rpc.Status in the JSON of HTTP APIs: code is the
// HTTP status, status the google.rpc.Code's name.
type rpcStatus struct {
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Details []any  `json:"details,omitempty"`
}

// legacyError is an error of A2A 0.3 over HTTP+JSON: the JSON-RPC error
// object alone, as the a2a-js legacy REST client reads it.
type legacyError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// restRefusal writes a refusal by the edge itself of a request of the
// binding (edge.WithRefusalWriter): its HTTP status with a
// google.rpc.Status whose ErrorInfo is of domain mcpv2 (its reason the
// edge's error, edgeReason, as over gRPC; its metadata the error's data),
// or in v0.3 the legacy error with the JSON-RPC server error code in place
// of mcpv2's, which mean other things in A2A.
func restRefusal(w http.ResponseWriter, r *http.Request, status int, perr *protocol.Error) {
	if strings.Contains(r.URL.EscapedPath(), RESTPath+"/v1/") {
		writeJSON(w, status, legacyError{Code: edge.RefusalCode(perr.Code, codeEdgeRefusal), Message: perr.Message, Data: perr.Data})
		return
	}
	writeJSON(w, status, map[string]any{"error": rpcStatus{Code: status, Status: codeName(statusCode(status)), Message: perr.Message, Details: []any{edgeInfo(perr).json()}}})
}
