package localapi

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
)

// dash serves n's dashboard on a free loopback port and returns the API
// and the login link.
func dash(t *testing.T, n *node.Node) (*API, string) {
	t.Helper()
	a, err := New(n, WithSocket(""), WithDashboard("127.0.0.1:0", false))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a, a.DashboardLink()
}

// browser is a client with a cookie jar that does not follow redirects.
func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	return do(t, c, http.MethodGet, u, "", hdr...)
}

func do(t *testing.T, c *http.Client, method, u, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" { // the jar would match the cookies on Host: send them as a browser that resolved it would
			req.Host = hdr[i+1]
			if c.Jar != nil {
				for _, ck := range c.Jar.Cookies(req.URL) {
					req.AddCookie(ck)
				}
			}
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(b)
}

func login(t *testing.T, c *http.Client, link string) string {
	t.Helper()
	st, h, _ := get(t, c, link)
	if st != http.StatusSeeOther || h.Get("Location") != "/" {
		t.Fatalf("login: %d to %q, want 303 to /", st, h.Get("Location"))
	}
	ck := h.Get("Set-Cookie")
	u, _ := url.Parse(link)
	for _, want := range []string{cookiePrefix + u.Port() + "=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(ck, want) {
			t.Fatalf("login cookie %q lacks %q", ck, want)
		}
	}
	return u.Scheme + "://" + u.Host
}

func TestDashboardLoginAndChecks(t *testing.T) {
	n := newNode(t, "", nil)
	_, link := dash(t, n)
	anon := browser(t)
	base := strings.SplitN(link, "/login", 2)[0]

	// Without the cookie: a page is a 401 page, the API a 401 JSON error.
	if st, _, body := get(t, anon, base+"/peers"); st != http.StatusUnauthorized || !strings.Contains(body, "MCPV2_UI") {
		t.Fatalf("page without a cookie: %d %.200s", st, body)
	}
	if st, _, body := get(t, anon, base+"/v1/status"); st != http.StatusUnauthorized || !strings.Contains(body, `"unauthorized"`) {
		t.Fatalf("API without a cookie: %d %.200s", st, body)
	}
	if st, _, _ := get(t, anon, base+"/login?token=nope"); st != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", st)
	}
	// The icon a browser asks for on any document of this origin (a
	// refusal's text too): nothing, never a 404 in its console.
	if st, _, body := get(t, anon, base+"/favicon.ico"); st != http.StatusNoContent || body != "" {
		t.Fatalf("/favicon.ico: %d %.100s", st, body)
	}

	b := browser(t)
	login(t, b, link)
	st, h, body := get(t, b, base+"/")
	if st != http.StatusOK || !strings.Contains(body, n.ID().String()) || !strings.Contains(body, `id="rights"`) {
		t.Fatalf("node page: %d %.300s", st, body)
	}
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Fatalf("CSP %q lacks %q", csp, want)
		}
	}
	// Each page, and its JSON.
	for _, p := range pageNames {
		if st, _, body := get(t, b, base+p.path); st != http.StatusOK || !strings.Contains(body, "<h1>"+p.title+"</h1>") {
			t.Fatalf("page %s: %d %.300s", p.path, st, body)
		}
		st, h, body := get(t, b, base+p.path, "Accept", "application/json")
		if st != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || !json.Valid([]byte(body)) {
			t.Fatalf("page %s as JSON: %d %s %.300s", p.path, st, h.Get("Content-Type"), body)
		}
	}
	var s StatusResponse
	_, _, body = get(t, b, base+"/", "Accept", "application/json")
	if err := json.Unmarshal([]byte(body), &s); err != nil || s.PeerID != n.ID().String() || s.DashboardURL != base+"/" {
		t.Fatalf("node JSON %+v (%v)", s, err)
	}

	// DNS rebinding: a name other than localhost, with the cookie.
	host := strings.TrimPrefix(base, "http://")
	port := host[strings.LastIndex(host, ":")+1:]
	if st, _, _ := get(t, b, base+"/v1/status", "Host", "evil.example:"+port); st != http.StatusForbidden {
		t.Fatalf("Host evil.example: %d, want 403", st)
	}
	if st, _, _ := get(t, b, base+"/v1/status", "Host", "127.0.0.2:"+port); st != http.StatusForbidden {
		t.Fatalf("Host 127.0.0.2: %d, want 403", st)
	}
	if st, _, body := get(t, b, base+"/v1/status", "Host", "localhost:"+port); st != http.StatusOK {
		t.Fatalf("Host localhost: %d, want 200: %s", st, body)
	}
	// Another origin, even on a GET and with the cookie.
	if st, _, _ := get(t, b, base+"/v1/status", "Origin", "http://evil.example"); st != http.StatusForbidden {
		t.Fatalf("Origin evil.example: %d, want 403", st)
	}
	if st, _, _ := do(t, b, http.MethodPost, base+"/v1/call", `{"skill":"ping"}`, "Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"); st != http.StatusForbidden {
		t.Fatalf("a cross-site POST: %d, want 403", st)
	}
	if st, _, _ := do(t, b, http.MethodPost, base+"/v1/call", `{"skill":"ping"}`, "Content-Type", "application/json"); st != http.StatusForbidden {
		t.Fatalf("a POST with neither Origin nor Sec-Fetch-Site: %d, want 403", st)
	}
	// A same-origin call runs as the owner and is audited as local:ui.
	st, _, body = do(t, b, http.MethodPost, base+"/v1/call", `{"skill":"ping","arguments":{}}`, "Origin", base, "Content-Type", "application/json")
	if st != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Fatalf("call ping: %d %s", st, body)
	}
	recs, _, err := store.TailAudit(ctxT(t), n.DataDir(), store.AuditFilter{Caller: "local:ui"}, 5)
	if err != nil || len(recs) == 0 || recs[len(recs)-1].Skill != "ping" {
		t.Fatalf("audit of the call: %+v %v", recs, err)
	}
	// The link is not given to the dashboard, only to the socket, and no
	// key is made there: a stolen cookie must not outlive a logout.
	if st, _, _ := get(t, b, base+"/v1/ui/link"); st != http.StatusForbidden {
		t.Fatalf("/v1/ui/link on the dashboard: %d, want 403", st)
	}
	if st, _, body := do(t, b, http.MethodPost, base+"/v1/keys", `{"name":"thief","grants":["*"]}`, "Origin", base, "Content-Type", "application/json"); st != http.StatusForbidden {
		t.Fatalf("POST /v1/keys on the dashboard: %d %s, want 403", st, body)
	}
	// A page of another port of this host (same-site: the cookie goes
	// along) may navigate to a page, not fetch or stream.
	if st, _, _ := get(t, b, base+"/v1/status", "Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "no-cors"); st != http.StatusForbidden {
		t.Fatalf("a same-site no-cors GET: %d, want 403", st)
	}
	if st, _, _ := get(t, b, base+"/peers", "Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "navigate"); st != http.StatusOK {
		t.Fatalf("a same-site navigation: %d, want 200", st)
	}

	// Logout ends the session and replaces the token: neither the old
	// cookie nor the old link works.
	old := b.Jar.Cookies(mustURL(t, base))
	if st, _, _ := do(t, b, http.MethodPost, base+"/logout", "", "Origin", base); st != http.StatusOK {
		t.Fatalf("logout: %d", st)
	}
	replay := browser(t)
	replay.Jar.SetCookies(mustURL(t, base), old)
	if st, _, _ := get(t, replay, base+"/v1/status"); st != http.StatusUnauthorized {
		t.Fatalf("the old cookie after logout: %d, want 401", st)
	}
	if st, _, _ := get(t, replay, link); st != http.StatusUnauthorized {
		t.Fatalf("the old link after logout: %d, want 401", st)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestDashboardAddr(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		public bool
		ok     bool
	}{
		{"127.0.0.1:0", false, true}, {"localhost:8384", false, true}, {"[::1]:0", false, true},
		{"0.0.0.0:0", false, false}, {"192.0.2.1:80", false, false}, {"0.0.0.0:0", true, true},
		{"127.0.0.1", false, false}, {"127.0.0.1:http", false, false}, {"127.0.0.1:70000", false, false},
	} {
		if err := CheckDashboardAddr(tc.addr, tc.public); (err == nil) != tc.ok {
			t.Errorf("CheckDashboardAddr(%q, %v) = %v, want ok %v", tc.addr, tc.public, err, tc.ok)
		}
	}
}

// TestDashboardAuditStream: a call shows on the stream as it is audited,
// the filter applies, and the streams are capped.
func TestDashboardAuditStream(t *testing.T) {
	n := newNode(t, "", nil)
	a, link := dash(t, n)
	base := strings.SplitN(link, "/login", 2)[0]
	b := browser(t)
	login(t, b, link)
	sc := &http.Client{Jar: b.Jar} // no timeout: a stream
	var bodies []io.Closer
	t.Cleanup(func() {
		for _, c := range bodies {
			c.Close()
		}
	})
	open := func(q string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodGet, base+"/v1/audit/stream"+q, nil)
		resp, err := sc.Do(req)
		if err == nil {
			bodies = append(bodies, resp.Body)
		}
		return resp, err
	}
	resp, err := open("?skill=ping")
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %v %v", resp, err)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Scan() // the comment line
	for _, skill := range []string{"no_such_skill", "ping"} {
		if _, err := a.call(ctxT(t), CallRequest{Skill: skill, Arguments: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for lines.Scan() && len(got) < 2 {
		if l := lines.Text(); l != "" {
			got = append(got, l)
		}
	}
	if len(got) != 2 || got[0] != "event: audit" || !strings.Contains(got[1], `"skill":"ping"`) {
		t.Fatalf("stream lines %q", got)
	}
	for i := 1; i < maxStreams; i++ {
		if r, err := open(""); err != nil || r.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %v %v", i+1, r, err)
		}
	}
	if r, err := open(""); err != nil || r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("stream %d: %v %v, want 503", maxStreams+1, r, err)
	}
	if st, _, _ := get(t, b, base+"/v1/status"); st != http.StatusOK {
		t.Fatalf("status with every stream open: %d", st)
	}
	// A logout ends the streams that are open: a stolen cookie's stream
	// does not outlive it.
	if st, _, _ := do(t, b, http.MethodPost, base+"/logout", "", "Origin", base); st != http.StatusOK {
		t.Fatalf("logout: %d", st)
	}
	ended := make(chan struct{})
	go func() {
		for lines.Scan() {
		}
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second): // the stream's own context lasts 30 s
		t.Fatal("the open event stream outlived the logout")
	}
}

// TestDashboardTasks: the Activity page lists the A2A tasks with their
// events, as JSON and on the page, the task's text escaped.
func TestDashboardTasks(t *testing.T) {
	n := newNode(t, "", nil)
	_, link := dash(t, n)
	base := strings.SplitN(link, "/login", 2)[0]
	b := browser(t)
	login(t, b, link)
	now := time.Now()
	task := protocol.StoredTask{ID: "task-<b>1</b>", ContextID: "ctx", Owner: "a2a:secret", State: "working", Created: now, Updated: now,
		Task: json.RawMessage(`{"id":"task-1"}`)}
	for _, ev := range []string{`{"status":"submitted"}`, `{"status":"working","note":"<script>alert(1)</script>"}`} {
		if _, err := n.SaveTask(task, json.RawMessage(ev)); err != nil {
			t.Fatal(err)
		}
	}
	var act ActivityResponse
	_, _, body := get(t, b, base+"/activity", "Accept", "application/json")
	if err := json.Unmarshal([]byte(body), &act); err != nil || len(act.Tasks) != 1 || act.Tasks[0].ID != task.ID || len(act.Tasks[0].Events) != 2 {
		t.Fatalf("activity JSON tasks %+v (%v): %.300s", act.Tasks, err, body)
	}
	st, _, page := get(t, b, base+"/activity")
	if st != http.StatusOK || !strings.Contains(page, `data-task="task-&lt;b&gt;1&lt;/b&gt;"`) || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") ||
		strings.Contains(page, "<script>alert") || strings.Contains(page, "<b>1</b>") {
		t.Fatalf("activity page: %d, the task and its events escaped? %.2000s", st, page)
	}
}

// TestDashboardBoundLoopback: without public, a dashboard whose address
// resolved off loopback is refused after the listen, and nothing stays
// listening (the check before it trusts a name such as "localhost").
func TestDashboardBoundLoopback(t *testing.T) {
	n := newNode(t, "", nil)
	a := &API{n: n, cfg: config{dashAddr: "0.0.0.0:0", log: slog.New(slog.DiscardHandler), now: time.Now}}
	if d, err := startDashboard(a); err == nil || !strings.Contains(err.Error(), "not loopback") {
		if d != nil {
			d.close()
		}
		t.Fatalf("startDashboard(0.0.0.0:0) without public: %v, want a refusal", err)
	}
}

// TestTemplatesParse: the dashboard parses its templates on the first page
// served, not at start, so a template broken by an edit shows here rather
// than as the first visitor's 500.
func TestTemplatesParse(t *testing.T) {
	pages, err := parseTemplates()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"message"}
	for _, p := range pageNames {
		names = append(names, p.name)
	}
	for _, n := range names {
		if pages[n] == nil {
			t.Errorf("no template for page %q", n)
		}
	}
}
