package a2a_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
)

// receiver is a webhook on loopback that keeps what it got.
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []push
	seen chan struct{} // a notification came
}

type push struct {
	path, auth, token, ctype string
	body                     []byte
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{seen: make(chan struct{}, 100)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, push{path: r.URL.Path, auth: r.Header.Get("Authorization"), token: r.Header.Get(a2a.TokenHeader), ctype: r.Header.Get("Content-Type"), body: b})
		rc.mu.Unlock()
		rc.seen <- struct{}{}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// waitFor waits (at most 10 s) until the receiver holds n notifications.
func (rc *receiver) waitFor(t *testing.T, n int) []push {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		rc.mu.Lock()
		got := append([]push(nil), rc.got...)
		rc.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-rc.seen:
		case <-deadline:
			t.Fatalf("%d notifications of %d came", len(got), n)
		}
	}
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// verifyJWT checks a notification's JWT against the node's JWKS and
// returns its claims.
func verifyJWT(t *testing.T, base, auth string, body []byte, aud string) map[string]any {
	t.Helper()
	resp, err := http.Get(base + a2a.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []struct{ Kty, Crv, X, Kid string } `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || len(set.Keys) != 1 || set.Keys[0].Kty != "OKP" || set.Keys[0].Crv != "Ed25519" {
		t.Fatalf("jwks: %v %+v", err, set)
	}
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	parts := strings.Split(tok, ".")
	if !ok || len(parts) != 3 {
		t.Fatalf("Authorization %q is no Bearer JWT", auth)
	}
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	var h map[string]string
	_ = json.Unmarshal(hb, &h)
	if h["alg"] != "EdDSA" || h["kid"] != set.Keys[0].Kid {
		t.Fatalf("JWT header %s, key %s", hb, set.Keys[0].Kid)
	}
	x, _ := base64.RawURLEncoding.DecodeString(set.Keys[0].X)
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	if !ed25519.Verify(ed25519.PublicKey(x), []byte(parts[0]+"."+parts[1]), sig) {
		t.Fatal("the JWT does not verify with the JWKS key")
	}
	cb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var cl map[string]any
	_ = json.Unmarshal(cb, &cl)
	sum := sha256.Sum256(body)
	if cl["aud"] != aud || cl["iss"] != h["kid"] || cl["request_body_sha256"] != hex.EncodeToString(sum[:]) || cl["jti"] == "" {
		t.Fatalf("claims %s (aud %s)", cb, aud)
	}
	return cl
}

func TestPushEveryStateVerified(t *testing.T) {
	r := newRigOpts(t, nil, nil, a2a.WithOutboundAllow(loopback))
	rc := newReceiver(t)
	tok := r.token()
	card := fetchCard(t, r.base+a2a.CardPath, "1.0")
	if !strings.Contains(string(card), `"pushNotifications":true`) || !strings.Contains(string(card), `"jwksUrl":"`+r.base+a2a.JWKSPath+`"`) {
		t.Fatalf("card: %s", card)
	}
	if _, err := a2a.VerifyCard(card); err != nil {
		t.Fatal(err)
	}
	hook := rc.srv.URL + "/hook?x=1"
	res, e := r.rpc(t, tok, "1.0", "SendMessage", map[string]any{
		"message":       msg(map[string]any{"data": map[string]any{"skill": "ping", "arguments": map[string]any{"payload": "x"}}}),
		"configuration": map[string]any{"taskPushNotificationConfig": map[string]any{"url": hook, "token": "client-token"}}})
	if e != nil {
		t.Fatal(e.Message)
	}
	var sent struct{ Task struct{ ID string } }
	_ = json.Unmarshal(res, &sent)
	got := rc.waitFor(t, 4) // the task, working, the artifact, completed
	var states []string
	for _, p := range got {
		if p.token != "client-token" || p.ctype != "application/a2a+json" {
			t.Fatalf("headers: %+v", p)
		}
		cl := verifyJWT(t, r.base, p.auth, p.body, hook)
		if cl["taskId"] != sent.Task.ID {
			t.Fatalf("taskId claim %v, task %s", cl["taskId"], sent.Task.ID)
		}
		var sr map[string]struct {
			Status struct{ State string } `json:"status"`
			TaskID string                 `json:"taskId"`
			ID     string                 `json:"id"`
		}
		if err := json.Unmarshal(p.body, &sr); err != nil || len(sr) != 1 {
			t.Fatalf("not a StreamResponse: %s", p.body)
		}
		for k, v := range sr {
			switch k {
			case "task", "statusUpdate":
				states = append(states, v.Status.State)
			case "artifactUpdate":
			default:
				t.Fatalf("StreamResponse member %q", k)
			}
		}
	}
	if strings.Join(states, ",") != "TASK_STATE_SUBMITTED,TASK_STATE_WORKING,TASK_STATE_COMPLETED" {
		t.Fatalf("states in order: %v", states)
	}
}

func TestPushConfigOperations(t *testing.T) {
	r := newRigOpts(t, nil, nil, a2a.WithOutboundAllow(loopback))
	rc := newReceiver(t)
	tok := r.token()
	res, e := r.rpc(t, tok, "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}}),
		"configuration": map[string]any{"returnImmediately": true}})
	if e != nil {
		t.Fatal(e.Message)
	}
	var sent struct{ Task struct{ ID string } }
	_ = json.Unmarshal(res, &sent)
	id := sent.Task.ID
	// The task is working (waiting in "slow") before any config is set:
	// the configs hear only its artifact and its end.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if res, _ := r.rpc(t, tok, "1.0", "GetTask", map[string]any{"id": id}); strings.Contains(string(res), "TASK_STATE_WORKING") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task did not start working")
		}
	}
	// v1.0: create two, get, list; the credentials are not read back.
	res, e = r.rpc(t, tok, "1.0", "CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "id": "a", "url": rc.srv.URL + "/a",
		"authentication": map[string]any{"scheme": "Bearer", "credentials": "s3cret"}})
	if e != nil || strings.Contains(string(res), "s3cret") || !strings.Contains(string(res), `"id":"a"`) {
		t.Fatalf("create: %s %+v", res, e)
	}
	if res, e = r.rpc(t, tok, "1.0", "CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "url": rc.srv.URL + "/b"}); e != nil {
		t.Fatal(e.Message)
	}
	var b struct{ ID string }
	_ = json.Unmarshal(res, &b)
	if b.ID == "" {
		t.Fatalf("no id given: %s", res)
	}
	res, e = r.rpc(t, tok, "1.0", "GetTaskPushNotificationConfig", map[string]any{"taskId": id, "id": "a"})
	if e != nil || !strings.Contains(string(res), `"scheme":"Bearer"`) || strings.Contains(string(res), "s3cret") {
		t.Fatalf("get: %s %+v", res, e)
	}
	res, e = r.rpc(t, tok, "1.0", "ListTaskPushNotificationConfigs", map[string]any{"taskId": id})
	var list struct{ Configs []struct{ ID string } }
	if _ = json.Unmarshal(res, &list); e != nil || len(list.Configs) != 2 {
		t.Fatalf("list: %s %+v", res, e)
	}
	// Another caller's task is not found, as one that does not exist.
	other := r.anon(t)
	if _, e := r.rpc(t, other, "1.0", "ListTaskPushNotificationConfigs", map[string]any{"taskId": id}); e == nil || e.Code != -32001 {
		t.Fatalf("another caller's task: %+v", e)
	}
	if _, e := r.rpc(t, other, "1.0", "CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "url": rc.srv.URL}); e == nil || e.Code != -32001 {
		t.Fatalf("another caller's task: %+v", e)
	}
	// Each field within its cap, but the config over the store's as JSON
	// (& is escaped as six bytes): the client's error, naming the field.
	if _, e := r.rpc(t, tok, "1.0", "CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "url": rc.srv.URL,
		"authentication": map[string]any{"scheme": "Basic", "credentials": strings.Repeat("&", 4096)}}); e == nil || e.Code != protocol.CodeInvalidParams ||
		!strings.Contains(e.Message, "authentication.credentials takes") {
		t.Fatalf("a config that escapes past the store's cap: %+v", e)
	}
	// v0.3 forms of the same configs.
	res, e = r.rpc(t, tok, "0.3", "tasks/pushNotificationConfig/get", map[string]any{"id": id, "pushNotificationConfigId": "a"})
	if e != nil || !strings.Contains(string(res), `"pushNotificationConfig":{`) || !strings.Contains(string(res), `"schemes":["Bearer"]`) {
		t.Fatalf("v0.3 get: %s %+v", res, e)
	}
	if res, e = r.rpc(t, tok, "0.3", "tasks/pushNotificationConfig/set", map[string]any{"taskId": id,
		"pushNotificationConfig": map[string]any{"id": "c", "url": rc.srv.URL + "/c", "token": "t"}}); e != nil || !strings.Contains(string(res), `"taskId":"`+id) {
		t.Fatalf("v0.3 set: %s %+v", res, e)
	}
	res, e = r.rpc(t, tok, "0.3", "tasks/pushNotificationConfig/list", map[string]any{"id": id})
	var l03 []any
	if _ = json.Unmarshal(res, &l03); e != nil || len(l03) != 3 {
		t.Fatalf("v0.3 list: %s %+v", res, e)
	}
	if res, e = r.rpc(t, tok, "0.3", "tasks/pushNotificationConfig/delete", map[string]any{"id": id, "pushNotificationConfigId": "c"}); e != nil || string(res) != "null" {
		t.Fatalf("v0.3 delete: %s %+v", res, e)
	}
	if _, e = r.rpc(t, tok, "1.0", "DeleteTaskPushNotificationConfig", map[string]any{"taskId": id, "id": b.ID}); e != nil {
		t.Fatal(e.Message)
	}
	if _, e = r.rpc(t, tok, "1.0", "GetTaskPushNotificationConfig", map[string]any{"taskId": id, "id": b.ID}); e == nil || e.Code != -32001 {
		t.Fatalf("deleted config: %+v", e)
	}
	// The cap: MaxPushConfigs per task ("a" is one).
	for i := 1; i < a2a.MaxPushConfigs; i++ {
		if _, e = r.rpc(t, tok, "1.0", "CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "url": rc.srv.URL + "/more"}); e != nil {
			t.Fatalf("config %d: %s", i, e.Message)
		}
	}
	if _, e = r.rpc(t, tok, "1.0", "CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "url": rc.srv.URL}); e == nil || e.Code != protocol.CodeInvalidParams || !strings.Contains(e.Message, "the most a task may") {
		t.Fatalf("past the cap: %+v", e)
	}
	// The task goes on: its artifact and completed state reach every
	// config's webhook; "a" gets the client's credentials, the others the
	// node's JWT; the deleted ones nothing.
	close(r.release)
	r.waitCompletedAs(t, tok, id)
	got := rc.waitFor(t, 2*a2a.MaxPushConfigs)
	toA := 0
	for _, p := range got {
		switch p.path {
		case "/a":
			toA++
			if p.auth != "Bearer s3cret" {
				t.Fatalf("config a's webhook got Authorization %q", p.auth)
			}
		case "/more":
			verifyJWT(t, r.base, p.auth, p.body, rc.srv.URL+"/more")
		default:
			t.Fatalf("a notification to %s, a deleted config's", p.path)
		}
	}
	if toA != 2 {
		t.Fatalf("config a got %d notifications, want 2 (artifact, completed)", toA)
	}
}

func TestPushRefusesPrivateTargets(t *testing.T) {
	r := newRig(t, "") // no --outbound-allow
	tok := r.token()
	res, e := r.rpc(t, tok, "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}}),
		"configuration": map[string]any{"returnImmediately": true}})
	if e != nil {
		t.Fatal(e.Message)
	}
	var sent struct{ Task struct{ ID string } }
	_ = json.Unmarshal(res, &sent)
	for url, class := range map[string]string{
		"http://127.0.0.1:9/hook":     "loopback",
		"http://localhost:9/hook":     "loopback",
		"http://10.1.2.3/hook":        "private",
		"http://[fd00::1]/hook":       "private",
		"http://169.254.169.254/meta": "link-local",
		"http://100.64.0.1/":          "CGNAT",
		"ftp://example.com/":          "scheme",
	} {
		_, e := r.rpc(t, tok, "1.0", "CreateTaskPushNotificationConfig", map[string]any{"taskId": sent.Task.ID, "url": url})
		if e == nil || e.Code != protocol.CodeInvalidParams || !strings.Contains(e.Message, class) {
			t.Errorf("%s: %+v (want -32602 naming %s)", url, e, class)
		}
	}
	// With the message too: refused before the task is made.
	_, e = r.rpc(t, tok, "0.3", "message/send", map[string]any{"message": map[string]any{"kind": "message", "messageId": "m1", "role": "user",
		"parts": []any{map[string]any{"kind": "text", "text": "hi"}}}, "configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": "http://192.168.1.1/"}}})
	if e == nil || !strings.Contains(e.Message, "private") {
		t.Fatalf("message with a private webhook: %+v", e)
	}
}

// A webhook that fails is tried, then its notification dropped with one
// audit line, and its circuit opens: its next notifications are dropped
// unsent, with no line of their own, and the other webhooks of the task
// hear every one.
func TestPushDeadReceiverDropped(t *testing.T) {
	r := newRigOpts(t, nil, nil, a2a.WithOutboundAllow(loopback), a2a.WithPushRetry(3, 5*time.Millisecond))
	// A receiver that is down: 503 to every try.
	var mu sync.Mutex
	hits := 0
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().String()
	l.Close()
	rc := newReceiver(t)
	tok := r.token()
	// The configs' ids order them: a task's configs hear each event in
	// the order of their ids, so that when "c" hears the last event, "a"
	// and "b" have had it.
	res, e := r.rpc(t, tok, "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}}),
		"configuration": map[string]any{"returnImmediately": true, "taskPushNotificationConfig": map[string]any{"id": "a", "url": down.URL + "/hook"}}})
	if e != nil {
		t.Fatal(e.Message)
	}
	var sent struct{ Task struct{ ID string } }
	_ = json.Unmarshal(res, &sent)
	host := strings.TrimPrefix(down.URL, "http://")
	drops := func() (map[string]int, []json.RawMessage) {
		t.Helper()
		lines, err := r.n.AuditLog(context.Background(), protocol.AuditQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, l := range lines {
			var rec struct {
				Method, Outcome, Remote, Auth, Error string
				Code                                 int
			}
			_ = json.Unmarshal(l, &rec)
			if rec.Method == a2a.PushAuditMethod {
				if rec.Outcome != "error" || rec.Code != protocol.CodeInternal || rec.Auth != "secret" {
					t.Fatalf("audit line: %s", l)
				}
				n[rec.Remote]++
			}
		}
		return n, lines
	}
	// The task waits in "slow": its first event (the task) went to "a",
	// tried 3 times, then dropped with one audit line.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n, _ := drops(); n[host] > 0 {
			break
		}
		if time.Now().After(deadline) {
			_, lines := drops()
			t.Fatalf("no audit line of a dropped notification: %s", lines)
		}
	}
	for _, id := range []string{"b", "c"} {
		u := rc.srv.URL + "/c"
		if id == "b" {
			u = "http://" + gone + "/hook"
		}
		if _, e := r.rpc(t, tok, "1.0", "CreateTaskPushNotificationConfig", map[string]any{"taskId": sent.Task.ID, "id": id, "url": u}); e != nil {
			t.Fatal(e.Message)
		}
	}
	// The task ends: its artifact and completed state reach "c"; "b"
	// (the port that is gone refuses each try) drops the artifact after
	// 3 tries, with one line, and then the completed state unsent; "a"
	// sends neither.
	close(r.release)
	r.waitCompletedAs(t, tok, sent.Task.ID)
	rc.waitFor(t, 2)
	n, lines := drops()
	mu.Lock()
	tried := hits
	mu.Unlock()
	if n[host] != 1 || n[gone] != 1 || len(n) != 2 || tried != 3 {
		t.Fatalf("audit lines by webhook: %v, want %s 1, %s 1; the webhook that is down was tried %d times, want 3: %s", n, host, gone, tried, lines)
	}
}

// One caller's webhooks that never answer hold at most pushPerOwner of
// the senders: another caller's notification is sent while they hang.
func TestPushHangDoesNotStarve(t *testing.T) {
	r := newRigOpts(t, nil, nil, a2a.WithOutboundAllow(loopback), a2a.WithPushRetry(1, 0))
	block := make(chan struct{})
	var mu sync.Mutex
	hanging, most := 0, 0
	arrived := make(chan struct{}, 64)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		hanging++
		most = max(most, hanging)
		mu.Unlock()
		arrived <- struct{}{}
		select {
		case <-block:
		case <-req.Context().Done():
		}
		mu.Lock()
		hanging--
		mu.Unlock()
	}))
	defer hang.Close()
	defer close(block)
	fast := newReceiver(t)
	attacker := r.anon(t) // an edge session anyone may have
	for range 8 {
		if _, e := r.rpc(t, attacker, "1.0", "SendMessage", map[string]any{
			"message":       msg(map[string]any{"data": map[string]any{"skill": "ping"}}),
			"configuration": map[string]any{"taskPushNotificationConfig": map[string]any{"url": hang.URL}}}); e != nil {
			t.Fatal(e.Message)
		}
	}
	<-arrived // the attacker's webhooks hold senders now
	if _, e := r.rpc(t, r.token(), "1.0", "SendMessage", map[string]any{
		"message":       msg(map[string]any{"data": map[string]any{"skill": "ping"}}),
		"configuration": map[string]any{"taskPushNotificationConfig": map[string]any{"url": fast.srv.URL}}}); e != nil {
		t.Fatal(e.Message)
	}
	fast.waitFor(t, 1) // while the attacker's webhooks hang
	mu.Lock()
	defer mu.Unlock()
	if most > 2 {
		t.Fatalf("one caller's hanging webhooks held %d senders at once, want at most 2", most)
	}
}

func TestPushOffWithoutStore(t *testing.T) {
	r := newRigWith(t, nil, func(n *node.Node) a2a.Backend { return noPush{n} })
	card := fetchCard(t, r.base+a2a.CardPath, "1.0")
	if strings.Contains(string(card), `"pushNotifications":true`) {
		t.Fatalf("card: %s", card)
	}
	if _, e := r.rpc(t, r.token(), "1.0", "ListTaskPushNotificationConfigs", map[string]any{"taskId": "x"}); e == nil || e.Code != -32003 {
		t.Fatalf("push off: %+v", e)
	}
}

// noPush is a Backend that is no PushStore.
type noPush struct{ a2a.Backend }

// countReads is the node as a Backend that counts its PushConfigs reads.
type countReads struct {
	*node.Node
	mu    sync.Mutex
	reads map[string]int
}

func (c *countReads) PushConfigs(taskID string) ([]json.RawMessage, error) {
	c.mu.Lock()
	c.reads[taskID]++
	c.mu.Unlock()
	return c.Node.PushConfigs(taskID)
}

// The events of a task without configs read its configs once, not for
// each event; a config set on the running task is heard from then on.
func TestPushConfigsReadOnce(t *testing.T) {
	cr := &countReads{reads: map[string]int{}}
	r := newRigOpts(t, nil, func(n *node.Node) a2a.Backend { cr.Node = n; return cr }, a2a.WithOutboundAllow(loopback))
	tok := r.token()
	res, e := r.rpc(t, tok, "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}}),
		"configuration": map[string]any{"returnImmediately": true}})
	if e != nil {
		t.Fatal(e.Message)
	}
	var sent struct{ Task struct{ ID string } }
	_ = json.Unmarshal(res, &sent)
	id := sent.Task.ID
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if res, _ := r.rpc(t, tok, "1.0", "GetTask", map[string]any{"id": id}); strings.Contains(string(res), "TASK_STATE_WORKING") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task did not start working")
		}
	}
	cr.mu.Lock()
	n := cr.reads[id]
	cr.mu.Unlock()
	if n != 1 {
		t.Fatalf("two events (the task, working) of a task without configs read its configs %d times, want 1", n)
	}
	rc := newReceiver(t)
	if _, e := r.rpc(t, tok, "1.0", "CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "url": rc.srv.URL}); e != nil {
		t.Fatal(e.Message)
	}
	close(r.release)
	r.waitCompletedAs(t, tok, id)
	rc.waitFor(t, 2) // the artifact and the completed state
	cr.mu.Lock()
	n = cr.reads[id]
	cr.mu.Unlock()
	if n != 2 {
		t.Fatalf("the configs were read %d times, want 2 (the first event, and once after the config was set)", n)
	}
}
