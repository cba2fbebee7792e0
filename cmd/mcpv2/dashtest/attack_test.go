package dashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/mcpv2/mcpv2/internal/chrometest"
)

// The attacks of issue 21 (acceptance 3) on the dashboard, each from the
// attacker's side: what the attacker can send or serve, and what the
// victim's node must still hold afterwards.

// TestAttackCSRF: the owner is logged in to the dashboard; a page of
// another origin on the same machine (127.0.0.1, another port: the same
// site, so the SameSite=Strict cookie goes along) makes the owner's
// browser POST to the dashboard: fetch() to /v1/keys (add a key for the
// attacker) and /v1/call (write a file with upload_file), as "simple"
// requests that need no CORS preflight, then a form that logs the owner
// out. Each is refused (403), and nothing changed: the keys are the same,
// no file was written, the session and the login link still work.
func TestAttackCSRF(t *testing.T) {
	a := startNode(t)
	ui := a.ui(t)
	addKey(t, a, "owners-key")
	keysBefore := keyStatus(t, a)

	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><title>cute cats</title><link rel="icon" href="data:,"></head><body>
<form id="out" method="post" action="%[1]s/logout"><input type="hidden" name="x" value="1"></form>
<script>
(async () => {
  const simple = {method: "POST", mode: "no-cors", credentials: "include", headers: {"Content-Type": "text/plain"}};
  try { await fetch("%[1]s/v1/keys", {...simple, body: JSON.stringify({name: "attackers-key", grants: ["*"]})}); } catch (e) {}
  try { await fetch("%[1]s/v1/call", {...simple, body: JSON.stringify({peer: "", skill: "upload_file",
    arguments: {filename: "csrf.txt", content: "pwned"}})}); } catch (e) {}
  document.getElementById("out").submit();
})();
</script></body></html>`, ui)
	}))
	defer evil.Close()

	b := chrometest.Start(t)
	b.Open(t, a.link(t))
	b.Clean(t, "the login")
	logout := b.WaitResponse(func(r *network.Response) bool { return r.URL == ui+"/logout" })
	b.Navigate(t, evil.URL)
	select {
	case r := <-logout:
		if r.Status != http.StatusForbidden {
			t.Errorf("the cross-origin form POST /logout: %d, want 403", r.Status)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the attacker's page did not submit its form in 20 s")
	}
	// The requests went out with the cookie (the same site): the
	// dashboard refused them for their Origin. A request's wire events
	// may come after its response's.
	paths := []string{"/v1/keys", "/v1/call", "/logout"}
	waitFor(t, 10*time.Second, "the wire events of the attacker's requests", func() bool {
		for _, path := range paths {
			if w := b.WireTo(ui + path); len(w) == 0 || w[0].Status == 0 || w[0].Method == "" {
				return false
			}
		}
		return true
	})
	for _, path := range paths {
		w := b.WireTo(ui + path)
		if len(w) != 1 || w[0].Method != http.MethodPost || !slices.ContainsFunc(w[0].Cookies, func(c string) bool { return strings.HasPrefix(c, cookiePrefix) }) || w[0].Status != http.StatusForbidden {
			t.Errorf("the cross-origin POST %s: %+v, want one POST with the cookie, answered 403", path, w)
		}
	}

	if after := keyStatus(t, a); fmt.Sprint(after) != fmt.Sprint(keysBefore) {
		t.Errorf("the keys changed: %v, were %v", after, keysBefore)
	}
	if _, err := os.Stat(filepath.Join(a.dataDir, "files", "csrf.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the attacker's upload_file wrote csrf.txt (stat: %v)", err)
	}
	b.Open(t, ui+"/")
	if id := strings.TrimSpace(chrometest.Text(t, b, "#peer-id")); id != a.peerID() {
		t.Errorf("after the attack the owner's session no longer shows the Node page (#peer-id %q)", id)
	}
	b.Clean(t, "the Node page after the attack")
	login(t, a.link(t)) // the login link still works: no logout happened
}

// TestAttackDNSRebinding: a page of evil.example whose name the attacker
// rebinds to 127.0.0.1 reaches the dashboard's port with Host (and Origin)
// evil.example:PORT. Each request is refused with 403, even one that
// carries a valid cookie or the login token, and none sets a cookie or
// tells the node's PeerID; the allowed names of loopback are served.
func TestAttackDNSRebinding(t *testing.T) {
	a := startNode(t)
	ui := a.ui(t)
	_, port, _ := strings.Cut(a.host(t), ":")
	c := login(t, a.link(t))
	evilHost := "evil.example:" + port
	evilOrigin := "http://" + evilHost
	tok := mustQuery(t, a.link(t), "token")

	for _, tc := range []struct {
		method, path string
		hdr          map[string]string
	}{
		{http.MethodGet, "/", withCookie(c, map[string]string{"Host": evilHost})},
		{http.MethodGet, "/v1/status", withCookie(c, map[string]string{"Host": evilHost})},
		{http.MethodGet, "/peers", withCookie(c, map[string]string{"Host": evilHost, "Accept": "application/json"})},
		{http.MethodGet, "/v1/audit/stream", withCookie(c, map[string]string{"Host": evilHost})},
		{http.MethodGet, "/login?token=" + url.QueryEscape(tok), map[string]string{"Host": evilHost}},
		{http.MethodPost, "/v1/call", withCookie(c, map[string]string{"Host": evilHost, "Origin": evilOrigin})},
		{http.MethodPost, "/logout", withCookie(c, map[string]string{"Host": evilHost, "Origin": evilOrigin})},
		{http.MethodGet, "/", map[string]string{"Host": evilHost}},
		{http.MethodGet, "/", withCookie(c, map[string]string{"Host": "127.0.0.2:" + port})},
		{http.MethodGet, "/", withCookie(c, map[string]string{"Host": "localhost.evil.example:" + port})},
	} {
		var body any
		if tc.method == http.MethodPost && strings.HasSuffix(tc.path, "/call") {
			body = map[string]any{"peer": "", "skill": "ping", "arguments": map[string]any{}}
		}
		r := send(t, tc.method, ui+tc.path, tc.hdr, body)
		if r.status != http.StatusForbidden {
			t.Errorf("%s %s with %v: %d, want 403\n%s", tc.method, tc.path, tc.hdr, r.status, r.body)
		}
		if sc := r.header.Values("Set-Cookie"); len(sc) != 0 {
			t.Errorf("%s %s with %v set cookies %q", tc.method, tc.path, tc.hdr, sc)
		}
		if strings.Contains(string(r.body), a.peerID()) {
			t.Errorf("%s %s with %v tells the PeerID", tc.method, tc.path, tc.hdr)
		}
	}
	for _, h := range []string{a.host(t), "127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port} {
		if r := send(t, http.MethodGet, ui+"/v1/status", withCookie(c, map[string]string{"Host": h}), nil); r.status != 200 {
			t.Errorf("GET /v1/status with Host %s: %d, want 200\n%s", h, r.status, r.body)
		}
	}
}

// TestAttackStolenLink: someone copies the owner's login link (from a
// terminal's scrollback, a shell history). The owner logs out from the
// page; the old link no longer logs in (401), and no session of before
// works any more (401): neither the one of the page nor another. `mcpv2
// ui` prints a new link, which works.
func TestAttackStolenLink(t *testing.T) {
	a := startNode(t)
	ui := a.ui(t)
	stolen := a.link(t)
	c1 := login(t, stolen)
	c2 := login(t, stolen) // the thief's session, taken before the logout
	if r := send(t, http.MethodGet, ui+"/v1/status", withCookie(c2, nil), nil); r.status != 200 {
		t.Fatalf("GET /v1/status with a fresh session: %d", r.status)
	}
	r := send(t, http.MethodPost, ui+"/logout", withCookie(c1, map[string]string{"Origin": ui}), nil)
	if r.status >= 400 {
		t.Fatalf("POST /logout from the page: %d\n%s", r.status, r.body)
	}
	if r := send(t, http.MethodGet, stolen, nil, nil); r.status != http.StatusUnauthorized || len(r.header.Values("Set-Cookie")) != 0 {
		t.Errorf("the stolen link after the logout: %d, cookies %q; want 401 and none", r.status, r.header.Values("Set-Cookie"))
	}
	for _, c := range []*http.Cookie{c1, c2} {
		for _, path := range []string{"/", "/v1/status"} {
			if r := send(t, http.MethodGet, ui+path, withCookie(c, nil), nil); r.status != http.StatusUnauthorized {
				t.Errorf("GET %s with a session of before the logout: %d, want 401", path, r.status)
			}
		}
	}
	out, errOut, code := mcpv2(t, "ui", "--data-dir", a.dataDir)
	fresh := bannerValue(out, "MCPV2_UI")
	if code != 0 || fresh == "" {
		t.Fatalf("mcpv2 ui: exit %d, want a MCPV2_UI= line\n%s\n%s", code, out, errOut)
	}
	if fresh == stolen {
		t.Fatalf("mcpv2 ui prints the old link after the logout")
	}
	c3 := login(t, fresh)
	if r := send(t, http.MethodGet, ui+"/v1/status", withCookie(c3, nil), nil); r.status != 200 {
		t.Errorf("GET /v1/status with the new link's session: %d", r.status)
	}
	if r := send(t, http.MethodGet, stolen, nil, nil); r.status != http.StatusUnauthorized {
		t.Errorf("the stolen link after mcpv2 ui: %d, want 401", r.status)
	}
}

// xss is what the attacker puts in every text the dashboard shows: an
// image whose error handler runs script, the end of a script element and
// a new one, the end of an attribute and an SVG with a load handler.
const xss = `<img src=x onerror=alert(1)></script><script>alert(2)</script>"'><svg onload=alert(3)>`

// TestAttackXSS: an attacker's node whose card name, description and
// skill description are xss, and whose skill answers xss; the attacker's
// calls of a skill named xss, which the victim's audit log records; the
// victim's own custom skill (as a third-party MCP server's tool would
// bring it) described as xss; and xss in the URLs of the dashboard. Every
// page shows it as text: no dialog opens, no element of the payload
// exists, the text is there, escaped.
func TestAttackXSS(t *testing.T) {
	dir := t.TempDir()
	victimSkills := writeJSON(t, filepath.Join(dir, "victim-skills.json"), map[string]any{"skills": []any{
		map[string]any{"name": "imported", "description": xss, "input_schema": map[string]any{"type": "object",
			"properties": map[string]any{"q": map[string]any{"type": "string", "description": xss}}},
			"handler": map[string]any{"type": "template", "template": "ok"}},
	}})
	a := startNode(t, "--skills", victimSkills)
	ui := a.ui(t)
	evilSkills := writeJSON(t, filepath.Join(dir, "evil-skills.json"), map[string]any{"skills": []any{
		map[string]any{"name": "gift", "description": xss, "tags": []string{"gift"}, "input_schema": map[string]any{"type": "object"},
			"handler": map[string]any{"type": "template", "template": xss}},
	}})
	evilPolicy := writeJSON(t, filepath.Join(dir, "evil-policy.json"), map[string]any{"grants": map[string]any{"*": []string{"*"}}})
	evil := startNode(t, "--name", xss, "--description", xss, "--skills", evilSkills, "--policy", evilPolicy,
		"--bootstrap", a.p2pAddr(t))

	b := chrometest.Start(t)
	b.Open(t, a.link(t))
	b.Clean(t, "the login")

	// The audit log, live and then as rendered by the server.
	stream := b.WaitResponse(func(r *network.Response) bool { return strings.Contains(r.URL, "/v1/audit/stream") })
	b.Open(t, ui+"/activity")
	select {
	case <-stream:
	case <-time.After(10 * time.Second):
		t.Fatalf("the Activity page opened no /v1/audit/stream in 10 s")
	}
	if out, errOut, code := mcpv2(t, "call", a.p2pAddr(t), xss, "{}", "--data-dir", t.TempDir(), "--no-nat"); code == 0 {
		t.Fatalf("the call of a skill named xss succeeded:\n%s\n%s", out, errOut)
	}
	auditRow := fmt.Sprintf(`[...document.querySelectorAll("#audit tr")].some(r => r.dataset.skill === %s)`, chrometest.JSString(xss))
	chrometest.WaitDOM(t, b, 10*time.Second, "the attacker's call on the Activity page", auditRow)
	inert(t, b, "the Activity page (live)", true)
	b.Clean(t, "the Activity page (live)")
	b.Open(t, ui+"/activity")
	if !chrometest.Eval[bool](t, b, auditRow) {
		t.Errorf("the Activity page has no row of the attacker's call after a reload")
	}
	inert(t, b, "the Activity page", true)
	b.Clean(t, "the Activity page")

	b.Open(t, ui+"/skills")
	if !strings.Contains(chrometest.Text(t, b, `section[data-skill="imported"]`), xss) {
		t.Errorf("the Skills page does not show the skill's description as text")
	}
	inert(t, b, "the Skills page", true)
	b.Clean(t, "the Skills page")

	// The attacker's card, found by its skill.
	c := login(t, a.link(t))
	waitFor(t, 60*time.Second, "A's find to list the attacker", func() bool {
		r := send(t, http.MethodGet, ui+"/mesh?q=gift", withCookie(c, map[string]string{"Accept": "application/json"}), nil)
		return r.status == 200 && strings.Contains(string(r.body), evil.peerID())
	})
	b.Open(t, ui+"/mesh?q=gift")
	li := fmt.Sprintf(`#results li[data-peer=%q]`, evil.peerID())
	chrometest.WaitDOM(t, b, 30*time.Second, "the attacker in the results", fmt.Sprintf("document.querySelector(%s)", chrometest.JSString(li)))
	if n := chrometest.Text(t, b, li+" .card-name"); n != xss {
		t.Errorf("the attacker's .card-name = %q, want the name as text", n)
	}
	inert(t, b, "the Mesh page", true)
	b.Clean(t, "the Mesh page")
	chrometest.Run(t, b, "use gift", chromedp.Click(chromedp.CSS(li+` button.use-skill[data-skill="gift"]`)))
	chrometest.Run(t, b, "call gift", chromedp.Click(chromedp.CSS("#call-run")))
	chrometest.WaitDOM(t, b, 30*time.Second, "the attacker's answer", answered("#call-result", "#call-error"))
	if !chrometest.Eval[bool](t, b, `(() => { try { return JSON.stringify(JSON.parse(document.querySelector("#call-result").textContent)).includes(JSON.stringify(`+chrometest.JSString(xss)+`).slice(1, -1)) } catch { return false } })()`) {
		t.Errorf("#call-result = %q, want the answer (xss) as JSON text (error: %q)", chrometest.Text(t, b, "#call-result"), chrometest.Text(t, b, "#call-error"))
	}
	inert(t, b, "the Mesh page's answer", false)
	b.Clean(t, "the Mesh page's answer")

	b.Open(t, ui+"/peers")
	inert(t, b, "the Peers page", false)
	b.Clean(t, "the Peers page")

	// The payload in the URL: reflected into the find box, the filters,
	// a 404 and the login page.
	for _, u := range []string{
		ui + "/mesh?q=" + url.QueryEscape(xss),
		ui + "/activity?skill=" + url.QueryEscape(xss) + "&caller=" + url.QueryEscape(xss),
		ui + "/" + url.PathEscape(xss),
		ui + "/login?token=" + url.QueryEscape(xss),
	} {
		b.Navigate(t, u)
		inert(t, b, u, false)
		b.TakeProblems(t) // a 404 or 401 is logged as a failed load: no check of the console here
	}
	if d := b.Dialogs(); len(d) != 0 {
		t.Errorf("dialogs opened: %q", d)
	}
}

// inert fails t when the page holds a dialog or an element of xss: an
// image of src x, an element with an event handler attribute, a script
// that calls alert; with visible, the page must show xss as text. The
// caller then checks the visit's console (b.clean): a CSP report of a
// blocked inline handler is an error there.
func inert(t *testing.T, b *chrometest.Browser, what string, visible bool) {
	t.Helper()
	for _, p := range inertProblems(t, b, visible) {
		t.Errorf("%s: %s", what, p)
	}
}

// inertProblems is what inert reports.
func inertProblems(t *testing.T, b *chrometest.Browser, visible bool) []string {
	t.Helper()
	var out []string
	if d := b.Dialogs(); len(d) != 0 {
		out = append(out, fmt.Sprintf("dialogs opened: %q", d))
	}
	found := chrometest.Eval[[]string](t, b, `(() => {
		const bad = [];
		for (const e of document.querySelectorAll('img[src="x"], [onerror], [onload], [onclick], [onmouseover], [onfocus]')) {
			bad.push(e.outerHTML.slice(0, 120));
		}
		for (const s of document.scripts) {
			if (s.textContent.includes("alert(")) bad.push(s.outerHTML.slice(0, 120));
		}
		return bad;
	})()`)
	if len(found) != 0 {
		out = append(out, fmt.Sprintf("the payload made elements: %q", found))
	}
	if visible && !strings.Contains(chrometest.Eval[string](t, b, "document.body.innerText"), xss) {
		out = append(out, "the payload is not shown as text")
	}
	return out
}

// TestAttackSSEFlood: with a valid session, a script opens audit streams
// until the node refuses: 16 are served, the 17th gets 503, and the node
// still answers its API and pages; when one stream ends, a new one is
// served again.
func TestAttackSSEFlood(t *testing.T) {
	a := startNode(t)
	ui := a.ui(t)
	c := login(t, a.link(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var open []*http.Response
	var transports []*http.Transport
	defer func() {
		for _, r := range open {
			r.Body.Close()
		}
		for _, tr := range transports {
			tr.CloseIdleConnections()
		}
	}()
	stream := func() (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ui+"/v1/audit/stream", nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "text/event-stream")
		req.AddCookie(c)
		tr := &http.Transport{} // one connection each, as a flood is
		transports = append(transports, tr)
		hc := &http.Client{Transport: tr}
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		type res struct {
			r   *http.Response
			err error
		}
		ch := make(chan res, 1)
		go func() { r, err := hc.Do(req); ch <- res{r, err} }()
		select {
		case x := <-ch:
			return x.r, x.err
		case <-rctx.Done():
			cancel() // the stream's headers never came: end the test's requests
			x := <-ch
			if x.r != nil {
				x.r.Body.Close()
			}
			return nil, fmt.Errorf("no answer in 10 s: a stream must send its headers at once")
		}
	}
	for i := 1; i <= 16; i++ {
		r, err := stream()
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		open = append(open, r)
		if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("stream %d: %d %s, want 200 text/event-stream", i, r.StatusCode, r.Header.Get("Content-Type"))
		}
	}
	r, err := stream()
	if err != nil {
		t.Fatalf("stream 17: %v", err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("stream 17: %d, want 503", r.StatusCode)
	}
	if r := send(t, http.MethodGet, ui+"/v1/status", withCookie(c, nil), nil); r.status != 200 {
		t.Errorf("GET /v1/status during the flood: %d", r.status)
	}
	if r := send(t, http.MethodGet, ui+"/activity", withCookie(c, nil), nil); r.status != 200 {
		t.Errorf("GET /activity during the flood: %d", r.status)
	}
	ping := map[string]any{"peer": "", "skill": "ping", "arguments": map[string]any{}}
	if r := send(t, http.MethodPost, ui+"/v1/call", withCookie(c, map[string]string{"Origin": ui}), ping); r.status != 200 {
		t.Errorf("POST /v1/call during the flood: %d\n%s", r.status, r.body)
	}
	var answer map[string]any
	if r := send(t, http.MethodPost, ui+"/v1/call", withCookie(c, map[string]string{"Origin": ui}), ping); json.Unmarshal(r.body, &answer) != nil || answer["result"] == nil {
		t.Errorf("POST /v1/call ping during the flood: %s", r.body)
	}
	open[0].Body.Close()
	open = open[1:]
	waitFor(t, 10*time.Second, "a stream to be served once one ended", func() bool {
		r, err := stream()
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode == 200 {
			open = append(open, r)
			return true
		}
		r.Body.Close()
		return false
	})
}

// writeJSON writes v as JSON to file and returns file.
func writeJSON(t *testing.T, file string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// mustQuery is the query parameter key of the URL u.
func mustQuery(t *testing.T, u, key string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil || p.Query().Get(key) == "" {
		t.Fatalf("%s has no %s (%v)", u, key, err)
	}
	return p.Query().Get(key)
}
