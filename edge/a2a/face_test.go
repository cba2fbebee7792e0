package a2a_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreTopFunction("github.com/libp2p/go-libp2p/p2p/transport/quicreuse.(*reuse).gc"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

const secret = "a2a-face-test-secret"

type rig struct {
	n    *node.Node
	e    *edge.Server
	face *a2a.Face
	base string
	// release lets the "slow" skill finish.
	release chan struct{}
}

func newRig(t *testing.T, dataDir string) *rig {
	t.Helper()
	return newRigWith(t, func(c *node.Config) {
		if dataDir != "" {
			c.DataDir = dataDir
		}
	}, nil)
}

// newRigWith is a node "alice" with cfg changed by mod (nil: none), its
// edge, and the face over b(n) (b nil: the node itself). The skill "slow"
// waits for release: a task that runs while the test looks.
func newRigWith(t *testing.T, mod func(*node.Config), b func(*node.Node) a2a.Backend) *rig {
	t.Helper()
	return newRigOpts(t, mod, b)
}

// newRigOpts is newRigWith with options for a2a.New.
func newRigOpts(t *testing.T, mod func(*node.Config), b func(*node.Node) a2a.Backend, opts ...a2a.Option) *rig {
	t.Helper()
	return newRigEdge(t, mod, nil, b, opts...)
}

// newRigEdge is newRigOpts with the edge's Config changed by emod (nil:
// none).
func newRigEdge(t *testing.T, mod func(*node.Config), emod func(*edge.Config), b func(*node.Node) a2a.Backend, opts ...a2a.Option) *rig {
	t.Helper()
	cfg := node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: []byte(secret), Name: "alice"}
	if mod != nil {
		mod(&cfg)
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{n: n, release: make(chan struct{})}
	if err := n.Registry().AddRaw(protocol.SkillDescriptor{Name: "slow", Description: "waits", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			select {
			case <-r.release:
				return map[string]any{"text": "slow done"}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}); err != nil {
		t.Fatal(err)
	}
	ecfg := edge.Config{BindHost: "127.0.0.1", Secret: []byte(secret)}
	if emod != nil {
		emod(&ecfg)
	}
	e, err := edge.New(n, ecfg)
	if err != nil {
		t.Fatal(err)
	}
	var back a2a.Backend = n
	if b != nil {
		back = b(n)
	}
	f, err := a2a.New(back, opts...)
	if err != nil {
		t.Fatal(err)
	}
	f.Mount(e)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	r.e, r.face = e, f
	r.base = "http://127.0.0.1:" + strconv.Itoa(e.BoundPort())
	t.Cleanup(func() {
		select {
		case <-r.release:
		default:
			close(r.release)
		}
		e.Close()
		f.Close()
		n.Close()
	})
	return r
}

// waitCompleted polls GetTask until task id is completed, at most 10 s
// (the task runs in the node; no event of the test's says when).
func (r *rig) waitCompleted(t *testing.T, id string) {
	t.Helper()
	r.waitCompletedAs(t, r.token(), id)
}

// waitCompletedAs is waitCompleted for the caller of credential tok ("":
// none).
func (r *rig) waitCompletedAs(t *testing.T, tok, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, _ := r.rpc(t, tok, "1.0", "GetTask", map[string]any{"id": id})
		if strings.Contains(string(res), "TASK_STATE_COMPLETED") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s did not complete: %.300s", id, res)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *rig) token() string { tok, _ := r.e.MintSession("127.0.0.1"); return tok }

// rpc posts one JSON-RPC request in version v ("" sends no header) and
// decodes the answer.
func (r *rig) rpc(t *testing.T, tok, v, method string, params any) (result json.RawMessage, rerr *struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, r.base+a2a.Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	if v != "" {
		req.Header.Set(a2a.VersionHeader, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil || out.JSONRPC != "2.0" {
		t.Fatalf("%s: answer %d %s", method, resp.StatusCode, b)
	}
	if out.Error == nil && string(out.ID) != "7" {
		t.Fatalf("%s: id %s", method, out.ID)
	}
	return out.Result, out.Error
}

func msg(parts ...map[string]any) map[string]any {
	ps := make([]any, len(parts))
	for i, p := range parts {
		ps[i] = p
	}
	return map[string]any{"messageId": "m-" + strconv.FormatInt(time.Now().UnixNano(), 36), "role": "ROLE_USER", "parts": ps}
}

func TestCardSignedBothVersions(t *testing.T) {
	r := newRig(t, "")
	get := func(v string) []byte { return fetchCard(t, r.base+a2a.CardPath, v) }
	v1 := get("1.0")
	var c1 map[string]any
	_ = json.Unmarshal(v1, &c1)
	ifs, _ := c1["supportedInterfaces"].([]any)
	if len(ifs) < 2 || !strings.Contains(string(v1), `"url":"`+r.base+`/a2a"`) || c1["name"] != "alice" {
		t.Fatalf("v1.0 card: %s", v1)
	}
	if id, err := a2a.VerifyCard(v1); err != nil || id != r.n.ID().String() {
		t.Fatalf("v1.0 card signature: %v %s", err, id)
	}
	v03 := get("")
	if !strings.Contains(string(v03), `"protocolVersion":"0.3.0"`) || !strings.Contains(string(v03), `"preferredTransport":"JSONRPC"`) {
		t.Fatalf("v0.3 card: %s", v03)
	}
	if _, err := a2a.VerifyCard(v03); err != nil {
		t.Fatalf("v0.3 card signature: %v", err)
	}
	// A forged card: one changed field breaks the signature.
	forged := bytes.Replace(v1, []byte(`"name":"alice"`), []byte(`"name":"mallory"`), 1)
	if _, err := a2a.VerifyCard(forged); !errors.Is(err, a2a.ErrBadSignature) {
		t.Fatalf("a forged card verified: %v", err)
	}
	// A card whose host is made up by the request names the edge's own.
	req, _ := http.NewRequest(http.MethodGet, r.base+a2a.CardAlias, nil)
	req.Host = "evil.example.com:" + strconv.Itoa(r.e.BoundPort())
	req.Header.Set(a2a.VersionHeader, "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(b), `"url"`) {
		t.Fatalf("a card for a made-up host (DNS rebinding): %d %s", resp.StatusCode, b)
	}
	if resp, _ := http.Get(r.base + a2a.CardPath + "?A2A-Version=9.9"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a card of an unknown version: %d", resp.StatusCode)
	}
}

func TestTasksBothVersions(t *testing.T) {
	r := newRig(t, "")
	tok := r.token()
	for _, v := range []string{"1.0", "0.3", ""} {
		t.Run("v"+v, func(t *testing.T) {
			send := "SendMessage"
			get, cancel := "GetTask", "CancelTask"
			if v != "1.0" {
				send, get, cancel = "message/send", "tasks/get", "tasks/cancel"
			}
			res, e := r.rpc(t, tok, v, send, map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "ping", "arguments": map[string]any{"payload": "x"}}})})
			if e != nil {
				t.Fatalf("send: %+v", e)
			}
			var task map[string]any
			_ = json.Unmarshal(res, &task)
			if v == "1.0" {
				task, _ = task["task"].(map[string]any)
			} else if task["kind"] != "task" {
				t.Fatalf("v0.3 task has no kind: %s", res)
			}
			state := task["status"].(map[string]any)["state"]
			if (v == "1.0" && state != "TASK_STATE_COMPLETED") || (v != "1.0" && state != "completed") {
				t.Fatalf("state %v: %s", state, res)
			}
			if !strings.Contains(string(res), `"pong":true`) {
				t.Fatalf("no ping result in the artifact: %s", res)
			}
			id := task["id"].(string)
			if res, e = r.rpc(t, tok, v, get, map[string]any{"id": id}); e != nil || !strings.Contains(string(res), id) {
				t.Fatalf("get: %s %+v", res, e)
			}
			if _, e = r.rpc(t, tok, v, cancel, map[string]any{"id": id}); e == nil || e.Code != -32002 {
				t.Fatalf("cancel of a finished task: %+v", e)
			}
			if _, e = r.rpc(t, tok, v, get, map[string]any{"id": "nope"}); e == nil || e.Code != -32001 {
				t.Fatalf("an unknown task: %+v", e)
			}
			// Another caller does not see it.
			if _, e = r.rpc(t, r.anon(t), v, get, map[string]any{"id": id}); e == nil || e.Code != -32001 {
				t.Fatalf("another caller's task: %+v", e)
			}
		})
	}
	// ListTasks (v1.0): the caller's own, newest first, paged.
	res, e := r.rpc(t, tok, "1.0", "ListTasks", map[string]any{"pageSize": 2})
	var l struct {
		Tasks         []map[string]any `json:"tasks"`
		NextPageToken string           `json:"nextPageToken"`
		TotalSize     int              `json:"totalSize"`
	}
	_ = json.Unmarshal(res, &l)
	if e != nil || len(l.Tasks) != 2 || l.TotalSize != 3 || l.NextPageToken == "" {
		t.Fatalf("ListTasks: %s %+v", res, e)
	}
	res, _ = r.rpc(t, tok, "1.0", "ListTasks", map[string]any{"pageSize": 2, "pageToken": l.NextPageToken})
	_ = json.Unmarshal(res, &l)
	if len(l.Tasks) != 1 || l.NextPageToken != "" {
		t.Fatalf("ListTasks page 2: %s", res)
	}
	// Text goes to ask; the answer is text in the artifact.
	res, e = r.rpc(t, tok, "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"text": "hello there"})})
	if e != nil || !strings.Contains(string(res), "local responder") {
		t.Fatalf("text to ask: %s %+v", res, e)
	}
	// An anonymous caller may not run upload_file: rejected, not failed.
	res, e = r.rpc(t, r.anon(t), "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "upload_file", "arguments": map[string]any{"filename": "x", "content": "x"}}})})
	if e != nil || !strings.Contains(string(res), "TASK_STATE_REJECTED") || !strings.Contains(string(res), "-32009") {
		t.Fatalf("anonymous upload: %s %+v", res, e)
	}
}

func (r *rig) anon(t *testing.T) string {
	resp, err := http.Get(r.base + "/mcpv2/session")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct{ SessionID string }
	_ = json.NewDecoder(resp.Body).Decode(&s)
	return s.SessionID
}

func TestInputRequired(t *testing.T) {
	r := newRig(t, "")
	tok := r.token()
	res, e := r.rpc(t, tok, "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "upload_file", "arguments": map[string]any{"filename": "a.txt"}}})})
	if e != nil || !strings.Contains(string(res), "TASK_STATE_INPUT_REQUIRED") {
		t.Fatalf("missing content: %s %+v", res, e)
	}
	var w struct {
		Task struct{ ID, ContextID string }
	}
	_ = json.Unmarshal(res, &w)
	m := msg(map[string]any{"data": map[string]any{"arguments": map[string]any{"content": "given later"}}})
	m["taskId"] = w.Task.ID
	res, e = r.rpc(t, tok, "1.0", "SendMessage", map[string]any{"message": m})
	if e != nil || !strings.Contains(string(res), "TASK_STATE_COMPLETED") {
		t.Fatalf("the answer to input-required: %s %+v", res, e)
	}
	if f, _, err := r.n.Store().Files().Open("a.txt"); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != "given later" {
			t.Fatalf("file %q", b)
		}
	}
	// A finished task takes no more messages.
	if _, e = r.rpc(t, tok, "1.0", "SendMessage", map[string]any{"message": m}); e == nil || e.Code != -32004 {
		t.Fatalf("a message to a finished task: %+v", e)
	}
}

// sseEvents reads a stream's events until it ends or n are read.
func sseEvents(t *testing.T, body io.Reader, n int) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() && (n <= 0 || len(out) < n) {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev["jsonrpc"] != "2.0" || ev["id"] != float64(7) {
			t.Fatalf("event %s", data)
		}
		out = append(out, ev)
	}
	return out
}

// firstEvent passes r through and closes seen once a whole SSE event (a
// data line, then a blank line) has been read from it.
type firstEvent struct {
	r    io.Reader
	buf  []byte
	seen chan struct{} // nil once closed
}

func (e *firstEvent) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if e.seen != nil {
		e.buf = append(e.buf, p[:n]...)
		if i := bytes.Index(e.buf, []byte("data: ")); i >= 0 && bytes.Contains(e.buf[i:], []byte("\n\n")) {
			close(e.seen)
			e.seen, e.buf = nil, nil
		}
	}
	return n, err
}

func (r *rig) stream(t *testing.T, ctx context.Context, method string, params any, hdr map[string]string) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.base+a2a.Path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.token())
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(a2a.VersionHeader, "1.0")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %d %s", method, resp.StatusCode, b)
	}
	return resp
}

// TestStreamResubscribeCancel: a streamed task, its stream dropped while it
// runs, a resubscription (Last-Event-ID) that gets what was missed, and a
// cancel; a restart keeps the tasks and fails the one that ran.
func TestStreamResubscribeCancel(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	resp := r.stream(t, ctx, "SendStreamingMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}})}, nil)
	evs := sseEvents(t, resp.Body, 2) // the task, then working
	cancel()
	resp.Body.Close()
	task := evs[0]["result"].(map[string]any)["task"].(map[string]any)
	id := task["id"].(string)
	if evs[1]["result"].(map[string]any)["statusUpdate"] == nil {
		t.Fatalf("second event %v", evs[1])
	}
	close(r.release) // the task finishes while nobody listens… almost: see below
	// Wait for it to finish, then a resubscription is refused (terminal).
	r.waitCompleted(t, id)
	if _, e := r.rpc(t, r.token(), "1.0", "SubscribeToTask", map[string]any{"id": id}); e == nil || e.Code != -32004 {
		t.Fatalf("subscribe to a finished task: %+v", e)
	}
}

func TestResubscribeReplays(t *testing.T) {
	r := newRig(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := r.stream(t, ctx, "SendStreamingMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}})}, nil)
	evs := sseEvents(t, resp.Body, 1) // only the task: the client drops after it
	resp.Body.Close()
	id := evs[0]["result"].(map[string]any)["task"].(map[string]any)["id"].(string)
	// Resubscribe naming event 1 as the last seen: event 2 (working),
	// which was sent while nobody listened, is replayed; then the live
	// ones follow to the end.
	resp = r.stream(t, ctx, "SubscribeToTask", map[string]any{"id": id}, map[string]string{"Last-Event-ID": "1"})
	defer resp.Body.Close()
	got := make(chan []map[string]any, 1)
	replayed := make(chan struct{})
	go func() { got <- sseEvents(t, &firstEvent{r: resp.Body, seen: replayed}, 0) }()
	// Let the task finish only once the replay has come, so that the rest
	// comes live.
	select {
	case <-replayed:
	case all := <-got:
		t.Fatalf("the stream ended before any event: %v", all)
	}
	close(r.release)
	all := <-got
	var kinds []string
	for _, ev := range all {
		for k := range ev["result"].(map[string]any) {
			kinds = append(kinds, k)
		}
	}
	if strings.Join(kinds, ",") != "statusUpdate,artifactUpdate,statusUpdate" {
		t.Fatalf("replayed and live events: %v", kinds)
	}
	last := all[len(all)-1]["result"].(map[string]any)["statusUpdate"].(map[string]any)
	if last["status"].(map[string]any)["state"] != "TASK_STATE_COMPLETED" || last["metadata"].(map[string]any)["mcpv2/seq"] != float64(4) {
		t.Fatalf("last event %v", last)
	}
}

func TestCancelRunning(t *testing.T) {
	r := newRig(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := r.stream(t, ctx, "message/stream", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}})}, map[string]string{a2a.VersionHeader: "0.3"})
	defer resp.Body.Close()
	evs := sseEvents(t, resp.Body, 1)
	id := evs[0]["result"].(map[string]any)["id"].(string)
	res, e := r.rpc(t, r.token(), "0.3", "tasks/cancel", map[string]any{"id": id})
	if e != nil || !strings.Contains(string(res), `"state":"canceled"`) {
		t.Fatalf("cancel: %s %+v", res, e)
	}
	rest := sseEvents(t, resp.Body, 0)
	lastEv := rest[len(rest)-1]["result"].(map[string]any)
	if lastEv["kind"] != "status-update" || lastEv["final"] != true || lastEv["status"].(map[string]any)["state"] != "canceled" {
		t.Fatalf("the stream's last event: %v", lastEv)
	}
}

// TestRestartFailsRunningTasks: a task that ran when the node stopped is
// failed at the next start; finished tasks stay.
func TestRestartFailsRunningTasks(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, dir)
	res, _ := r.rpc(t, r.token(), "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "ping"}})})
	var done struct{ Task struct{ ID string } }
	_ = json.Unmarshal(res, &done)
	res, _ = r.rpc(t, r.token(), "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}}), "configuration": map[string]any{"returnImmediately": true}})
	var running struct{ Task struct{ ID string } }
	_ = json.Unmarshal(res, &running)
	// Stop the node under the face's feet, as a crash would.
	r.e.Close()
	r.n.Close()
	r.face.Close()
	st, err := node.New(node.Config{DataDir: dir, ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, err := a2a.New(st)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, err := st.Task(done.Task.ID); err != nil || got.State != "completed" {
		t.Fatalf("finished task after the restart: %+v %v", got, err)
	}
	// The store closed before the face could record anything more: the
	// task was left working, and the restart failed it.
	if got, err := st.Task(running.Task.ID); err != nil || got.State != "failed" || !strings.Contains(string(got.Task), "stopped while the task ran") {
		t.Fatalf("the running task after the restart: %+v %v", got, err)
	}
}

func TestBadRequests(t *testing.T) {
	r := newRig(t, "")
	post := func(v, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, r.base+a2a.Path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+r.token())
		if v != "" {
			req.Header.Set(a2a.VersionHeader, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		v, body string
		status  int
		want    string
	}{
		{"1.0", `{"jsonrpc":"2.0","id":1,"method":`, 400, `"code":-32700`},
		{"1.0", `[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`, 400, `"code":-32700`},
		{"1.0", `{"jsonrpc":"1.0","id":1,"method":"GetTask"}`, 400, `"code":-32600`},
		{"1.0", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`, 200, `method of A2A 0.3`},
		{"", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`, 200, `method of A2A 1.0`},
		{"2.0", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`, 200, `"code":-32009`},
		{"1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}}`, 200, `"code":-32602`},
		{"1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"url":"http://x/y"}]}}}`, 200, `"code":-32005`},
		{"1.0", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{}}`, 200, `"code":-32602,"message":"invalid params: taskId (the task's) is missing"`},
	} {
		status, body := post(c.v, c.body)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s, want %d and %s", c.v, c.body, status, body, c.status, c.want)
		}
	}
	// Oversized: the edge's cap.
	status, body := post("1.0", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"`+strings.Repeat("x", 9<<20)+`"}}`)
	if status != http.StatusRequestEntityTooLarge {
		t.Errorf("9 MiB: %d %.200s", status, body)
	}
	// No credential: an anonymous caller, who owns no task.
	resp, err := http.Post(r.base+a2a.Path, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"nope"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "task not found") {
		t.Errorf("no credential: %d %s", resp.StatusCode, b)
	}
	// A bad credential: 401 with a challenge.
	req, _ := http.NewRequest(http.MethodPost, r.base+a2a.Path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"GetTask"}`))
	req.Header.Set("Authorization", "Bearer not-a-token")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
		t.Errorf("bad credential: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// It serves on.
	if _, e := r.rpc(t, r.token(), "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "ping"}})}); e != nil {
		t.Fatalf("after the bad requests: %+v", e)
	}
}

// TestRunningCaps: one caller may run at most 8 tasks at once; a ninth is
// refused, while another caller still gets a slot.
func TestRunningCaps(t *testing.T) {
	r := newRig(t, "")
	tok := r.token()
	for i := range 8 {
		if _, e := r.rpc(t, tok, "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}}), "configuration": map[string]any{"returnImmediately": true}}); e != nil {
			t.Fatalf("task %d: %+v", i, e)
		}
	}
	_, e := r.rpc(t, tok, "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}}), "configuration": map[string]any{"returnImmediately": true}})
	if e == nil || !strings.Contains(e.Message, "the most one caller may") {
		t.Fatalf("a ninth task: %+v", e)
	}
	if _, e := r.rpc(t, r.anon(t), "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "ping"}})}); e != nil {
		t.Fatalf("another caller: %+v", e)
	}
}

// TestPeerFace: an A2A client of A's edge uses B, which has no edge: B's
// card, signed by B and naming A's URL for it, and tasks whose skills run
// on B over libp2p with the caller's own grants on A.
func TestPeerFace(t *testing.T) {
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

	peerBase := r.base + "/peers/" + b.ID().String()
	req, _ := http.NewRequest(http.MethodGet, peerBase+a2a.CardPath, nil)
	req.Header.Set(a2a.VersionHeader, "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	card, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if signer, err := a2a.VerifyCard(card); err != nil || signer != b.ID().String() {
		t.Fatalf("B's card through A: %v signer %s\n%s", err, signer, card)
	}
	if !strings.Contains(string(card), `"url":"`+peerBase+`/a2a"`) || !strings.Contains(string(card), `"name":"bob"`) {
		t.Fatalf("B's card does not name A's URL for it: %s", card)
	}
	// B signs the credentials A's edge said it takes (agent/a2a-card's
	// credentials): A serves callers without one, so {} is offered.
	if !strings.Contains(string(card), `,{}]`) {
		t.Fatalf("B's card through A does not say that A takes callers without a credential: %s", card)
	}

	post := func(tok, method string, params any) string {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
		req, _ := http.NewRequest(http.MethodPost, peerBase+a2a.Path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set(a2a.VersionHeader, "1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return string(out)
	}
	out := post(r.token(), "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "ping"}})})
	if !strings.Contains(out, "TASK_STATE_COMPLETED") || !strings.Contains(out, b.ID().String()) {
		t.Fatalf("ping on B through A: %s", out)
	}
	var w struct {
		Result struct{ Task struct{ ID string } }
	}
	_ = json.Unmarshal([]byte(out), &w)
	if got := post(r.token(), "GetTask", map[string]any{"id": w.Result.Task.ID}); !strings.Contains(got, w.Result.Task.ID) {
		t.Fatalf("GetTask through B's face: %s", got)
	}
	// B's face's tasks are not A's own face's.
	if _, e := r.rpc(t, r.token(), "1.0", "GetTask", map[string]any{"id": w.Result.Task.ID}); e == nil || e.Code != -32001 {
		t.Fatalf("a task of B's face through A's own face: %+v", e)
	}
	// An anonymous caller gets no more from B through A than from A.
	out = post(r.anon(t), "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "upload_file", "arguments": map[string]any{"filename": "x", "content": "x"}}})})
	if !strings.Contains(out, "TASK_STATE_REJECTED") {
		t.Fatalf("anonymous upload to B through A: %s", out)
	}
	if _, _, err := b.Store().Files().Open("x"); err == nil {
		t.Fatal("the anonymous upload reached B")
	}
}
