package a2a_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/node"
)

// restAnswer is one answer of the HTTP+JSON binding.
type restAnswer struct {
	status int
	header http.Header
	body   []byte
}

// status is the answer's google.rpc.Status (v1.0 errors), zero if none.
func (a restAnswer) rpcStatus(t *testing.T) (st struct {
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Details []struct {
		Type     string            `json:"@type"`
		Reason   string            `json:"reason"`
		Domain   string            `json:"domain"`
		Metadata map[string]string `json:"metadata"`
	} `json:"details"`
}) {
	t.Helper()
	var w struct {
		Error *json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(a.body, &w); err != nil || w.Error == nil {
		t.Fatalf("not a google.rpc.Status: %d %s", a.status, a.body)
	}
	if err := json.Unmarshal(*w.Error, &st); err != nil {
		t.Fatalf("not a google.rpc.Status: %d %s", a.status, a.body)
	}
	if st.Code != a.status || len(st.Details) != 1 || st.Details[0].Type != "type.googleapis.com/google.rpc.ErrorInfo" {
		t.Fatalf("google.rpc.Status without its HTTP status or ErrorInfo: %d %s", a.status, a.body)
	}
	return st
}

// rest sends one request of the HTTP+JSON binding to base+path (path
// from a2a.RESTPath on), with tok as its credential ("": none) and hdr.
func rest(t *testing.T, tok, method, url string, body any, hdr map[string]string) restAnswer {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return restAnswer{status: resp.StatusCode, header: resp.Header, body: b}
}

var v1 = map[string]string{a2a.VersionHeader: "1.0"}

// TestRESTv1: every v1.0 route on the node's own face, each answered by
// the same task engine as JSON-RPC.
func TestRESTv1(t *testing.T) {
	r := newRig(t, "")
	tok := r.token()
	u := r.base + a2a.RESTPath
	// SendMessage: the result is the SendMessageResponse itself.
	a := rest(t, tok, "POST", u+"/message:send", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "ping"}})}, v1)
	var sent struct {
		Task struct {
			ID     string
			Status struct{ State string }
		}
	}
	if a.status != 200 || json.Unmarshal(a.body, &sent) != nil || sent.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("message:send: %d %s", a.status, a.body)
	}
	// The task is JSON-RPC's too: one engine.
	if res, e := r.rpc(t, tok, "1.0", "GetTask", map[string]any{"id": sent.Task.ID}); e != nil || !strings.Contains(string(res), sent.Task.ID) {
		t.Fatalf("the REST task over JSON-RPC: %s %+v", res, e)
	}
	// GetTask with historyLength=0: no history.
	a = rest(t, tok, "GET", u+"/tasks/"+sent.Task.ID+"?historyLength=0", nil, v1)
	var got map[string]any
	if a.status != 200 || json.Unmarshal(a.body, &got) != nil || got["id"] != sent.Task.ID || got["history"] != nil {
		t.Fatalf("GET /tasks/{id}?historyLength=0: %d %s", a.status, a.body)
	}
	a = rest(t, tok, "GET", u+"/tasks/"+sent.Task.ID, nil, v1)
	if a.status != 200 || !strings.Contains(string(a.body), `"history"`) {
		t.Fatalf("GET /tasks/{id}: %d %s", a.status, a.body)
	}
	// A running task, listed by state, then canceled.
	a = rest(t, tok, "POST", u+"/message:send", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}}), "configuration": map[string]any{"returnImmediately": true}}, v1)
	var running struct{ Task struct{ ID string } }
	if a.status != 200 || json.Unmarshal(a.body, &running) != nil || running.Task.ID == "" {
		t.Fatalf("message:send returnImmediately: %d %s", a.status, a.body)
	}
	a = rest(t, tok, "GET", u+"/tasks?status=TASK_STATE_COMPLETED&pageSize=10&includeArtifacts=true&historyLength=1", nil, v1)
	var list struct {
		Tasks []struct {
			ID      string
			History []any
		}
		TotalSize int
		PageSize  int
	}
	if a.status != 200 || json.Unmarshal(a.body, &list) != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != sent.Task.ID || list.PageSize != 10 || len(list.Tasks[0].History) != 1 {
		t.Fatalf("GET /tasks?status=TASK_STATE_COMPLETED: %d %s", a.status, a.body)
	}
	a = rest(t, tok, "GET", u+"/tasks", nil, v1)
	if json.Unmarshal(a.body, &list) != nil || list.TotalSize != 2 {
		t.Fatalf("GET /tasks: %d %s", a.status, a.body)
	}
	a = rest(t, tok, "POST", u+"/tasks/"+running.Task.ID+":cancel", nil, v1)
	if a.status != 200 || !strings.Contains(string(a.body), "TASK_STATE_CANCELED") {
		t.Fatalf("POST /tasks/{id}:cancel: %d %s", a.status, a.body)
	}
	// Canceled again: TaskNotCancelable, 400 FAILED_PRECONDITION.
	a = rest(t, tok, "POST", u+"/tasks/"+running.Task.ID+":cancel", `{}`, v1)
	if st := a.rpcStatus(t); a.status != 400 || st.Status != "FAILED_PRECONDITION" || st.Details[0].Reason != "TASK_NOT_CANCELABLE" || st.Details[0].Domain != "a2a-protocol.org" {
		t.Fatalf("cancel a canceled task: %d %s", a.status, a.body)
	}
	// Push configs and the extended card reach their operations: whatever
	// those answer, it is an A2A answer of theirs, not a missing route.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/tasks/" + sent.Task.ID + "/pushNotificationConfigs", `{"url":"https://example.com/hook"}`},
		{"GET", "/tasks/" + sent.Task.ID + "/pushNotificationConfigs", ""},
		{"GET", "/tasks/" + sent.Task.ID + "/pushNotificationConfigs/c1", ""},
		{"DELETE", "/tasks/" + sent.Task.ID + "/pushNotificationConfigs/c1", ""},
		{"GET", "/extendedAgentCard", ""},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		a := rest(t, tok, c.method, u+c.path, body, v1)
		if a.status == 200 {
			continue
		}
		if st := a.rpcStatus(t); !slices.Contains([]string{"PUSH_NOTIFICATION_NOT_SUPPORTED", "TASK_NOT_FOUND", "EXTENDED_AGENT_CARD_NOT_CONFIGURED", "INVALID_PARAMS"}, st.Details[0].Reason) {
			t.Errorf("%s %s: %d %s", c.method, c.path, a.status, a.body)
		}
	}
}

// TestRESTErrors: each refusal is an HTTP status with a google.rpc.Status
// that names what was wrong, the edge's own refusals too.
func TestRESTErrors(t *testing.T) {
	r := newRig(t, "")
	tok := r.token()
	u := r.base + a2a.RESTPath
	for _, c := range []struct {
		method, path string
		body         any
		hdr          map[string]string
		status       int
		code, reason string
		want         string
	}{
		{"GET", "/tasks/nope", nil, v1, 404, "NOT_FOUND", "TASK_NOT_FOUND", `task not found: "nope"`},
		{"GET", "/nowhere", nil, v1, 404, "NOT_FOUND", "METHOD_NOT_FOUND", "no HTTP+JSON route at /a2a/rest/nowhere"},
		{"GET", "/", nil, v1, 404, "NOT_FOUND", "METHOD_NOT_FOUND", "the routes are"},
		{"GET", "/v1/tasks", nil, nil, 404, "", "", "A2A 0.3 has no HTTP+JSON route to list tasks"},
		{"GET", "/notapeer/tasks/x", nil, v1, 404, "NOT_FOUND", "METHOD_NOT_FOUND", `tenant "notapeer" is not a PeerID`},
		{"POST", "/tasks/x:frobnicate", nil, v1, 404, "NOT_FOUND", "METHOD_NOT_FOUND", ":frobnicate is not a verb"},
		{"POST", "/message:send", `{"message":`, v1, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", "the body is not one JSON object"},
		{"POST", "/message:send", `[1]`, v1, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", "the body is not one JSON object"},
		{"POST", "/message:send", `{}`, v1, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", "message is missing"},
		{"POST", "/tasks/a:cancel", `{"id":"b"}`, v1, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", `the body's id "b" is not the path's "a"`},
		{"GET", "/tasks?pageSize=many", nil, v1, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", `pageSize="many" is not an integer`},
		{"GET", "/tasks?pageSize=1&pageSize=2", nil, v1, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", "given 2 times"},
		{"GET", "/tasks/x?color=red", nil, v1, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", `query parameter "color" is not one of rest GetTask, which takes only historyLength`},
		{"GET", "/tasks?pageSize=0", nil, v1, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", "pageSize must be from 1 to 100"},
		{"GET", "/tasks/x", nil, map[string]string{a2a.VersionHeader: "0.3"}, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED", "A2A-Version 0.3 on a route of A2A 1.0"},
		{"GET", "/tasks/x", nil, map[string]string{a2a.VersionHeader: "7.1"}, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED", `"7.1"`},
		{"DELETE", "/message:send", nil, v1, 405, "UNIMPLEMENTED", "METHOD_NOT_FOUND", "takes POST"},
		{"GET", "/tasks/x:cancel", nil, v1, 405, "UNIMPLEMENTED", "METHOD_NOT_FOUND", "takes POST"},
		// The edge's own: a method no route takes.
		{"PUT", "/message:send", nil, v1, 405, "UNIMPLEMENTED", "INVALID_REQUEST", "use GET, POST, DELETE"},
	} {
		a := rest(t, tok, c.method, u+c.path, c.body, c.hdr)
		if c.code == "" { // v0.3: the legacy error
			var le struct {
				Code    int
				Message string
			}
			if a.status != c.status || json.Unmarshal(a.body, &le) != nil || le.Code != -32601 || !strings.Contains(le.Message, c.want) {
				t.Errorf("%s %s: %d %s", c.method, c.path, a.status, a.body)
			}
			continue
		}
		st := a.rpcStatus(t)
		if a.status != c.status || st.Status != c.code || st.Details[0].Reason != c.reason || !strings.Contains(st.Message, c.want) {
			t.Errorf("%s %s: %d %s\nwant %d %s %s %q", c.method, c.path, a.status, a.body, c.status, c.code, c.reason, c.want)
		}
		if c.status == 405 && a.header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", c.method, c.path)
		}
	}
	// A bad credential: 401 UNAUTHENTICATED with a challenge, by the edge.
	a := rest(t, "not-a-token", "GET", u+"/tasks/x", nil, v1)
	if st := a.rpcStatus(t); a.status != 401 || st.Status != "UNAUTHENTICATED" || st.Details[0].Domain != "mcpv2" || st.Details[0].Reason != "INVALID_CREDENTIAL" ||
		!strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer ") {
		t.Errorf("bad credential: %d %s", a.status, a.body)
	}
	// Over the edge's body cap: 413, by the edge, in the binding's form.
	a = rest(t, tok, "POST", u+"/message:send", `{"message":"`+strings.Repeat("x", 9<<20)+`"}`, v1)
	if st := a.rpcStatus(t); a.status != 413 || st.Status != "RESOURCE_EXHAUSTED" || st.Details[0].Reason != "INVALID_REQUEST" || !strings.Contains(st.Message, "larger than this edge's cap") {
		t.Errorf("9 MiB: %d %.300s", a.status, a.body)
	}
	// No credential: an anonymous caller, who owns no task.
	a = rest(t, "", "GET", u+"/tasks/nope", nil, v1)
	if st := a.rpcStatus(t); a.status != 404 || st.Details[0].Reason != "TASK_NOT_FOUND" {
		t.Errorf("no credential: %d %s", a.status, a.body)
	}
	// The card names the binding.
	card := fetchCard(t, r.base+a2a.CardPath, "1.0")
	if !strings.Contains(string(card), `{"protocolBinding":"HTTP+JSON","protocolVersion":"1.0","url":"`+u+`"}`) {
		t.Errorf("v1.0 card without its HTTP+JSON interface: %s", card)
	}
}

// restEvents reads a REST stream's events (the data lines are
// StreamResponse JSON itself) and their SSE ids, until it ends or n are
// read.
func restEvents(t *testing.T, body io.Reader, n int) (evs []map[string]any, ids []string) {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() && (n <= 0 || len(evs) < n) {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			ids = append(ids, id)
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev["jsonrpc"] != nil || len(ev) != 1 {
			t.Fatalf("event %s", data)
		}
		evs = append(evs, ev)
	}
	return evs, ids
}

// restStream opens a REST event stream (POST, or GET for the v0.3
// subscribe).
func restStream(t *testing.T, ctx context.Context, tok, method, url string, body any, hdr map[string]string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequestWithContext(ctx, method, url, rd)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp
}

// TestRESTStreamSubscribe: message:stream, dropped after its first event;
// :subscribe with Last-Event-ID replays what was missed, then the live
// events to the end; a finished task has nothing to subscribe to.
func TestRESTStreamSubscribe(t *testing.T) {
	r := newRig(t, "")
	tok := r.token()
	u := r.base + a2a.RESTPath
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := restStream(t, ctx, tok, "POST", u+"/message:stream", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}})}, v1)
	evs, ids := restEvents(t, resp.Body, 1)
	resp.Body.Close()
	id := evs[0]["task"].(map[string]any)["id"].(string)
	if len(ids) != 1 || ids[0] != "1" {
		t.Fatalf("the first event's SSE id: %v", ids)
	}
	resp = restStream(t, ctx, tok, "POST", u+"/tasks/"+id+":subscribe", nil, map[string]string{a2a.VersionHeader: "1.0", "Last-Event-ID": "1"})
	defer resp.Body.Close()
	type result struct {
		evs []map[string]any
		ids []string
	}
	got := make(chan result, 1)
	replayed := make(chan struct{})
	go func() {
		evs, ids := restEvents(t, &firstEvent{r: resp.Body, seen: replayed}, 0)
		got <- result{evs, ids}
	}()
	select {
	case <-replayed:
	case all := <-got:
		t.Fatalf("the stream ended before any event: %v", all.evs)
	}
	close(r.release)
	all := <-got
	var kinds []string
	for _, ev := range all.evs {
		for k := range ev {
			kinds = append(kinds, k)
		}
	}
	if strings.Join(kinds, ",") != "statusUpdate,artifactUpdate,statusUpdate" || strings.Join(all.ids, ",") != "2,3,4" {
		t.Fatalf("replayed and live events: %v ids %v", kinds, all.ids)
	}
	r.waitCompleted(t, id)
	a := rest(t, tok, "POST", u+"/tasks/"+id+":subscribe", nil, v1)
	if st := a.rpcStatus(t); a.status != 400 || st.Details[0].Reason != "UNSUPPORTED_OPERATION" {
		t.Fatalf("subscribe to a finished task: %d %s", a.status, a.body)
	}
}

// TestRESTPeer: B, a mesh peer behind A's edge with no edge of its own,
// over A's HTTP+JSON binding: by /peers/{PeerID}/a2a/rest, and by the v1.0
// tenant on A's own URL; A's own PeerID as the tenant is A's face.
func TestRESTPeer(t *testing.T) {
	r := newRig(t, "")
	b, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: []byte(secret), Name: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fb, err := a2a.New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	b.SetA2ACard(fb.CardFor)
	r.n.Host().Peerstore().AddAddrs(b.ID(), b.Host().Addrs(), time.Hour)
	tok := r.token()
	bid := b.ID().String()

	// B's card through A names its REST URL on A.
	card := fetchCard(t, r.base+"/peers/"+bid+a2a.CardPath, "1.0")
	if !strings.Contains(string(card), `"url":"`+r.base+"/peers/"+bid+a2a.RESTPath+`"`) {
		t.Fatalf("B's card through A without its HTTP+JSON URL: %s", card)
	}
	send := func(url string) string {
		t.Helper()
		a := rest(t, tok, "POST", url+"/message:send", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "ping"}})}, v1)
		var sent struct{ Task struct{ ID string } }
		if a.status != 200 || json.Unmarshal(a.body, &sent) != nil || !strings.Contains(string(a.body), "TASK_STATE_COMPLETED") {
			t.Fatalf("message:send at %s: %d %s", url, a.status, a.body)
		}
		return sent.Task.ID
	}
	byPath := send(r.base + "/peers/" + bid + a2a.RESTPath)
	if !strings.Contains(string(rest(t, tok, "GET", r.base+"/peers/"+bid+a2a.RESTPath+"/tasks/"+byPath, nil, v1).body), bid) {
		t.Fatal("B's ping, by path, did not run on B")
	}
	// The tenant: the same face of B as the path.
	a := rest(t, tok, "GET", r.base+a2a.RESTPath+"/"+bid+"/tasks/"+byPath, nil, v1)
	if a.status != 200 || !strings.Contains(string(a.body), byPath) {
		t.Fatalf("B's task by tenant: %d %s", a.status, a.body)
	}
	byTenant := send(r.base + a2a.RESTPath + "/" + bid)
	if a := rest(t, tok, "GET", r.base+"/peers/"+bid+a2a.RESTPath+"/tasks/"+byTenant, nil, v1); a.status != 200 {
		t.Fatalf("B's task by tenant, by path: %d %s", a.status, a.body)
	}
	// B's face's tasks are not A's own.
	if a := rest(t, tok, "GET", r.base+a2a.RESTPath+"/tasks/"+byTenant, nil, v1); a.status != 404 {
		t.Fatalf("a task of B's face on A's own face: %d %s", a.status, a.body)
	}
	// A's own PeerID as the tenant is A's own face.
	own := send(r.base + a2a.RESTPath + "/" + r.n.ID().String())
	if a := rest(t, tok, "GET", r.base+a2a.RESTPath+"/tasks/"+own, nil, v1); a.status != 200 {
		t.Fatalf("a task by A's own tenant on A's face: %d %s", a.status, a.body)
	}
	// On a peer's URL, no other tenant.
	a = rest(t, tok, "GET", r.base+"/peers/"+bid+a2a.RESTPath+"/"+r.n.ID().String()+"/tasks/"+byPath, nil, v1)
	if st := a.rpcStatus(t); a.status != 400 || !strings.Contains(st.Message, "a peer's URL takes no other tenant") {
		t.Fatalf("another tenant on B's URL: %d %s", a.status, a.body)
	}
	// v0.3 on B's URL.
	a = rest(t, tok, "POST", r.base+"/peers/"+bid+a2a.RESTPath+"/v1/message:send", ping03("ping"), v03)
	if a.status != 200 || !strings.Contains(string(a.body), "TASK_STATE_COMPLETED") || !strings.Contains(string(a.body), bid) {
		t.Fatalf("v0.3 message:send on B's URL: %d %s", a.status, a.body)
	}
	// A path value that is no PeerID: the edge's 400, as google.rpc.Status.
	a = rest(t, tok, "GET", r.base+"/peers/nobody/a2a/rest/tasks/x", nil, v1)
	if st := a.rpcStatus(t); a.status != 400 || !strings.Contains(st.Message, "is not a PeerID") {
		t.Fatalf("/peers/nobody: %d %s", a.status, a.body)
	}
}

// legacy is an A2A 0.3 error over HTTP+JSON.
func (a restAnswer) legacy(t *testing.T) (le struct {
	Code    int
	Message string
}) {
	t.Helper()
	if err := json.Unmarshal(a.body, &le); err != nil || le.Code == 0 || le.Message == "" {
		t.Fatalf("not an A2A 0.3 error: %d %s", a.status, a.body)
	}
	return le
}

var v03 = map[string]string{a2a.VersionHeader: "0.3"}

// ping03 is a v0.3 SendMessageRequest in ProtoJSON (as the a2a-js legacy
// REST client writes it: the request as "message") that runs skill.
func ping03(skill string) map[string]any {
	return map[string]any{"message": map[string]any{"messageId": "m-" + strconv.FormatInt(time.Now().UnixNano(), 36), "role": "ROLE_USER",
		"content": []any{map[string]any{"data": map[string]any{"data": map[string]any{"skill": skill}}}}}}
}

// TestRESTv03: A2A 0.3 over HTTP+JSON under /a2a/rest/v1, its bodies the
// ProtoJSON of the v0.3 proto messages, on the same task engine; its
// errors the legacy {code, message}.
func TestRESTv03(t *testing.T) {
	r := newRig(t, "")
	tok := r.token()
	u := r.base + a2a.RESTPath + "/v1"
	a := rest(t, tok, "POST", u+"/message:send", ping03("ping"), v03)
	var sent struct {
		Task struct {
			ID      string
			Status  struct{ State string }
			History []struct{ Content []map[string]any }
		}
	}
	if a.status != 200 || json.Unmarshal(a.body, &sent) != nil || sent.Task.Status.State != "TASK_STATE_COMPLETED" || len(sent.Task.History) == 0 || sent.Task.History[0].Content == nil {
		t.Fatalf("v0.3 message:send: %d %s", a.status, a.body)
	}
	id := sent.Task.ID
	if res, e := r.rpc(t, tok, "0.3", "tasks/get", map[string]any{"id": id}); e != nil || !strings.Contains(string(res), `"state":"completed"`) {
		t.Fatalf("the v0.3 REST task over JSON-RPC: %s %+v", res, e)
	}
	a = rest(t, tok, "GET", u+"/tasks/"+id+"?historyLength=0", nil, v03)
	if a.status != 200 || !strings.Contains(string(a.body), `"id":"`+id+`"`) || strings.Contains(string(a.body), `"history"`) {
		t.Fatalf("v0.3 GET /v1/tasks/{id}?historyLength=0: %d %s", a.status, a.body)
	}
	for _, c := range []struct {
		method, path string
		body         any
		hdr          map[string]string
		status, code int
		want         string
	}{
		{"POST", "/tasks/" + id + ":cancel", nil, v03, 400, -32002, "task not cancelable"},
		{"GET", "/tasks/nope", nil, nil, 404, -32001, `task not found: "nope"`},
		{"POST", "/message:send", `{"message":{"content":[{"text":1}]}}`, v03, 400, -32602, "not the ProtoJSON of an A2A 0.3 SendMessageRequest"},
		{"POST", "/message:send", `{"message":`, v03, 400, -32602, "not the ProtoJSON"},
		{"GET", "/tasks/x", nil, v1, 400, -32009, "A2A-Version 1.0 on a route of A2A 0.3"},
		{"POST", "/card", nil, v03, 405, -32601, "takes GET"},
	} {
		a := rest(t, tok, c.method, u+c.path, c.body, c.hdr)
		if le := a.legacy(t); a.status != c.status || le.Code != c.code || !strings.Contains(le.Message, c.want) {
			t.Errorf("%s /v1%s: %d %s", c.method, c.path, a.status, a.body)
		}
	}
	// The extended card (extcard.go): a secret holder's lists every skill.
	if a := rest(t, tok, "GET", u+"/card", nil, v03); a.status != 200 || !strings.Contains(string(a.body), `"supportsAuthenticatedExtendedCard":true`) || !strings.Contains(string(a.body), `"id":"slow"`) {
		t.Errorf("v0.3 GET /v1/card: %d %s", a.status, a.body)
	}
	// The edge's refusal: the JSON-RPC server error, not mcpv2's -32001
	// (TaskNotFoundError in A2A).
	a = rest(t, "not-a-token", "GET", u+"/tasks/x", nil, v03)
	if le := a.legacy(t); a.status != 401 || le.Code != -32000 {
		t.Errorf("v0.3 bad credential: %d %s", a.status, a.body)
	}
	// A stream, dropped after the task; GET :subscribe with Last-Event-ID
	// replays the rest, each event a v0.3 StreamResponse.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := restStream(t, ctx, tok, "POST", u+"/message:stream", ping03("slow"), v03)
	evs, _ := restEvents(t, resp.Body, 1)
	resp.Body.Close()
	id = evs[0]["task"].(map[string]any)["id"].(string)
	resp = restStream(t, ctx, tok, "GET", u+"/tasks/"+id+":subscribe", nil, map[string]string{a2a.VersionHeader: "0.3", "Last-Event-ID": "1"})
	defer resp.Body.Close()
	got := make(chan []map[string]any, 1)
	replayed := make(chan struct{})
	go func() { evs, _ := restEvents(t, &firstEvent{r: resp.Body, seen: replayed}, 0); got <- evs }()
	select {
	case <-replayed:
	case all := <-got:
		t.Fatalf("the v0.3 stream ended before any event: %v", all)
	}
	close(r.release)
	all := <-got
	var kinds []string
	for _, ev := range all {
		for k := range ev {
			kinds = append(kinds, k)
		}
	}
	last, _ := all[len(all)-1]["statusUpdate"].(map[string]any)
	if strings.Join(kinds, ",") != "statusUpdate,artifactUpdate,statusUpdate" || last["final"] != true || last["status"].(map[string]any)["state"] != "TASK_STATE_COMPLETED" {
		t.Fatalf("v0.3 replayed and live events: %v, last %v", kinds, last)
	}
	// The v0.3 card names the binding.
	card := fetchCard(t, r.base+a2a.CardPath, "0.3")
	if !strings.Contains(string(card), `{"transport":"HTTP+JSON","url":"`+r.base+a2a.RESTPath+`"}`) {
		t.Errorf("v0.3 card without its HTTP+JSON interface: %s", card)
	}
}
