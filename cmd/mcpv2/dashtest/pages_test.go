package dashtest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/mcpv2/mcpv2/internal/chrometest"
	"github.com/mcpv2/mcpv2/internal/testenv"
)

// pages are the dashboard's pages (the contract's table): the name of
// their screenshots, the path, and the /v1 route their JSON twin equals.
var pages = []struct{ name, path, v1 string }{
	{"node", "/", "/v1/status"},
	{"peers", "/peers", "/v1/peers"},
	{"skills", "/skills", "/v1/skills"},
	{"mesh", "/mesh?q=translate_history", "/v1/find?q=translate_history"},
	{"activity", "/activity", "/v1/activity"},
	{"access", "/access", "/v1/access"},
}

// translateArgs are translate_history's arguments (SPEC): one user turn
// from OpenAI's format to Claude's.
const translateArgs = `{"history":[{"role":"user","content":"hello from the dashboard"}],"from":"openai","to":"claude"}`

// TestLogin (issue 21, acceptance 1): the login link of the banner opens
// the Node page in the browser; a request without the session cookie is
// refused (401, a page that says to log in with the link), and so is one
// with a foreign Origin (403), while the same request from the
// dashboard's own origin is served.
func TestLogin(t *testing.T) {
	a := startNode(t)
	ui := a.ui(t)

	for _, path := range []string{"/", "/peers", "/v1/status", "/v1/activity"} {
		if r := send(t, http.MethodGet, ui+path, nil, nil); r.status != http.StatusUnauthorized {
			t.Errorf("GET %s without the cookie: %d, want 401\n%s", path, r.status, r.body)
		} else if strings.Contains(string(r.body), a.peerID()) {
			t.Errorf("GET %s without the cookie tells the PeerID:\n%s", path, r.body)
		}
	}
	if r := send(t, http.MethodPost, ui+"/v1/call", map[string]string{"Origin": ui}, map[string]any{"peer": "", "skill": "ping", "arguments": map[string]any{}}); r.status != http.StatusUnauthorized {
		t.Errorf("POST /v1/call without the cookie: %d, want 401\n%s", r.status, r.body)
	}
	bad := strings.Replace(a.link(t), "token=", "token=x", 1)
	if r := send(t, http.MethodGet, bad, nil, nil); r.status != http.StatusUnauthorized || len(r.header.Values("Set-Cookie")) != 0 {
		t.Errorf("GET a wrong login link: %d, cookies %q; want 401 and none", r.status, r.header.Values("Set-Cookie"))
	}

	c := login(t, a.link(t))
	r := send(t, http.MethodGet, ui+"/", withCookie(c, nil), nil)
	if r.status != 200 {
		t.Fatalf("GET / with the cookie: %d\n%s", r.status, r.body)
	}
	for k, want := range map[string]string{"Content-Security-Policy": dashCSP, "X-Content-Type-Options": "nosniff",
		"Referrer-Policy": "no-referrer", "Cache-Control": "no-store"} {
		if got := r.header.Get(k); got != want {
			t.Errorf("GET /: %s = %q, want %q", k, got, want)
		}
	}

	// A foreign Origin is refused, on a read as on an action; an action
	// with neither Origin nor Sec-Fetch-Site is too. The same action from
	// the dashboard's origin runs.
	ping := map[string]any{"peer": "", "skill": "ping", "arguments": map[string]any{}}
	for _, tc := range []struct {
		method, path string
		hdr          map[string]string
		body         any
		want         int
	}{
		{http.MethodGet, "/v1/status", map[string]string{"Origin": "http://evil.example"}, nil, 403},
		{http.MethodGet, "/", map[string]string{"Origin": "http://127.0.0.1:1"}, nil, 403},
		{http.MethodPost, "/v1/call", map[string]string{"Origin": "http://evil.example"}, ping, 403},
		{http.MethodPost, "/v1/call", map[string]string{"Origin": "null"}, ping, 403},
		{http.MethodPost, "/v1/call", nil, ping, 403},
		{http.MethodPost, "/v1/call", map[string]string{"Sec-Fetch-Site": "cross-site"}, ping, 403},
		{http.MethodPost, "/v1/call", map[string]string{"Origin": ui}, ping, 200},
		{http.MethodPost, "/v1/call", map[string]string{"Sec-Fetch-Site": "same-origin"}, ping, 200},
	} {
		if r := send(t, tc.method, ui+tc.path, withCookie(c, tc.hdr), tc.body); r.status != tc.want {
			t.Errorf("%s %s with the cookie and %v: %d, want %d\n%s", tc.method, tc.path, tc.hdr, r.status, tc.want, r.body)
		}
	}

	// In the browser: without the cookie, the page says to log in; the
	// link logs in and shows the Node page.
	b := chrometest.Start(t)
	if st := b.Navigate(t, ui+"/"); st != http.StatusUnauthorized {
		t.Errorf("the browser's GET / without the cookie: %d, want 401", st)
	}
	if chrometest.Exists(t, b, "#peer-id") || strings.Contains(chrometest.Eval[string](t, b, "document.body.innerText"), a.peerID()) {
		t.Errorf("the page without the cookie shows the node")
	}
	checkAxe(t, b, "the login page")
	b.TakeProblems(t) // the 401 itself is logged as a failed load
	b.Open(t, a.link(t))
	if u := chrometest.Eval[string](t, b, "location.href"); u != ui+"/" {
		t.Errorf("the login link lands on %s, want %s/", u, ui)
	}
	if id := strings.TrimSpace(chrometest.Text(t, b, "#peer-id")); id != a.peerID() {
		t.Errorf("#peer-id = %q, want %s", id, a.peerID())
	}
	if chrometest.Eval[bool](t, b, "document.cookie.includes('"+cookiePrefix+"')") {
		t.Errorf("the page's script can read the session cookie (not HttpOnly)")
	}
	b.Clean(t, "the Node page")
}

// TestJSONTwins: each page answers JSON under its own path with Accept:
// application/json, the same document as its /v1 route (compared by their
// top-level keys: uptimes and times move between two requests).
func TestJSONTwins(t *testing.T) {
	a := startNode(t)
	ui := a.ui(t)
	c := login(t, a.link(t))
	for _, p := range pages {
		page := send(t, http.MethodGet, ui+p.path, withCookie(c, map[string]string{"Accept": "application/json"}), nil)
		v1 := send(t, http.MethodGet, ui+p.v1, withCookie(c, nil), nil)
		if page.status != 200 || v1.status != 200 {
			t.Errorf("%s (JSON): %d, %s: %d", p.path, page.status, p.v1, v1.status)
			continue
		}
		if ct := page.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s with Accept: application/json: Content-Type %q", p.path, ct)
		}
		var pm, vm map[string]any
		if err := json.Unmarshal(page.body, &pm); err != nil {
			t.Errorf("%s (JSON): %v\n%s", p.path, err, page.body)
			continue
		}
		if err := json.Unmarshal(v1.body, &vm); err != nil {
			t.Errorf("%s: %v\n%s", p.v1, err, v1.body)
			continue
		}
		if pk, vk := slices.Sorted(maps.Keys(pm)), slices.Sorted(maps.Keys(vm)); !slices.Equal(pk, vk) {
			t.Errorf("%s (JSON) has the keys %v, %s has %v", p.path, pk, p.v1, vk)
		}
	}
}

// TestPages (issue 21, acceptance 1 and 2): two nodes, B started with A as
// its bootstrap peer; A's dashboard in the browser. The Peers page shows
// B, direct; the Skills page runs translate_history through the form
// generated from its schema; the Mesh page finds B by skill and runs
// translate_history on it through the call form; a call made with the CLI
// appears on the Activity page within a second, without a reload, and the
// filter form keeps only its caller's calls; a running `mcpv2 send` shows
// a progress bar; the Access page revokes a key. Then every page, at
// desktop and narrow widths, has no console error and no axe violation,
// and is screenshotted; last, the send is interrupted and Activity shows
// the partial upload kept for a resume.
func TestPages(t *testing.T) {
	a := startNode(t, "--name", "alpha", "--description", "the dashboard's node")
	bNode := startNode(t, "--name", "beta", "--description", "a second node", "--bootstrap", a.p2pAddr(t))
	ui := a.ui(t)
	b := chrometest.Start(t)
	b.Open(t, a.link(t))
	b.Clean(t, "the login")

	t.Run("node", func(t *testing.T) {
		b.Open(t, ui+"/")
		if id := strings.TrimSpace(chrometest.Text(t, b, "#peer-id")); id != a.peerID() {
			t.Errorf("#peer-id = %q, want %s", id, a.peerID())
		}
		for _, sel := range []string{"#reachability", "#listen", "#version", "#uptime", "#rights"} {
			if strings.TrimSpace(chrometest.Text(t, b, sel)) == "" {
				t.Errorf("the Node page's %s is missing or empty", sel)
			}
		}
		for _, sel := range []string{"form#logout", `nav[aria-label="Pages"] a`, "h1"} {
			if !chrometest.Exists(t, b, sel) {
				t.Errorf("the Node page has no %s", sel)
			}
		}
		if l := chrometest.Text(t, b, "#listen"); !strings.Contains(l, "/ip4/127.0.0.1/tcp/") {
			t.Errorf("#listen = %q, want the node's loopback listen address", l)
		}
		b.Clean(t, "the Node page")
	})

	t.Run("peers", func(t *testing.T) {
		row := fmt.Sprintf(`#conns tr[data-peer=%q]`, bNode.peerID())
		reloadUntil(t, b, ui+"/peers", 20*time.Second, "B in #conns", fmt.Sprintf("document.querySelector(%s)", chrometest.JSString(row)))
		if k := strings.TrimSpace(chrometest.Text(t, b, row+" td.kind")); k != "direct" {
			t.Errorf("B's connection kind = %q, want direct (loopback, no relay)", k)
		}
		if !chrometest.Exists(t, b, fmt.Sprintf(`#history tr[data-peer=%q]`, bNode.peerID())) {
			t.Errorf("#history has no row of B")
		}
		b.Clean(t, "the Peers page")
	})

	t.Run("skills", func(t *testing.T) {
		b.Open(t, ui+"/skills")
		sec := `#skills section[data-skill="translate_history"]`
		if !chrometest.Exists(t, b, sec+" form.run") {
			t.Fatalf("the Skills page has no form to run translate_history")
		}
		var args map[string]json.RawMessage
		if err := json.Unmarshal([]byte(translateArgs), &args); err != nil {
			t.Fatal(err)
		}
		fill(t, b, sec+` form.run textarea[name="history"]`, string(args["history"]))
		fill(t, b, sec+` form.run [name="from"]`, "openai")
		fill(t, b, sec+` form.run [name="to"]`, "claude")
		chrometest.Run(t, b, "run translate_history", chromedp.Click(chromedp.CSS(sec+` form.run button[type="submit"]`)))
		chrometest.WaitDOM(t, b, 15*time.Second, "the answer of translate_history", answered(sec+" output.result", sec+" .error"))
		if got := chrometest.Text(t, b, sec+" output.result"); !strings.Contains(got, "claude") || !strings.Contains(got, "hello from the dashboard") {
			t.Errorf("translate_history's answer on the Skills page: %q", got)
		}
		b.Clean(t, "the Skills page")
	})

	t.Run("mesh", func(t *testing.T) {
		// B publishes its card to the DHT through A: ask A's dashboard
		// (as a script would, in JSON) until B is found.
		c := login(t, a.link(t))
		waitFor(t, 60*time.Second, "A's find to list B", func() bool {
			r := send(t, http.MethodGet, ui+"/mesh?q=translate_history", withCookie(c, map[string]string{"Accept": "application/json"}), nil)
			return r.status == 200 && strings.Contains(string(r.body), bNode.peerID())
		})
		b.Open(t, ui+"/mesh")
		fill(t, b, "#find-q", "translate_history")
		chrometest.Run(t, b, "find", chromedp.Click(chromedp.CSS(`#find [type="submit"]`)))
		li := fmt.Sprintf(`#results li[data-peer=%q]`, bNode.peerID())
		chrometest.WaitDOM(t, b, 30*time.Second, "B in the results", fmt.Sprintf("document.querySelector(%s)", chrometest.JSString(li)))
		if n := strings.TrimSpace(chrometest.Text(t, b, li+" .card-name")); n != "beta" {
			t.Errorf("B's card name = %q, want beta", n)
		}
		if v := strings.TrimSpace(chrometest.Text(t, b, li+" .verified")); v != "verified" {
			t.Errorf("B's card: .verified = %q, want verified (B signs its card)", v)
		}
		chrometest.Run(t, b, "use translate_history", chromedp.Click(chromedp.CSS(li+` button.use-skill[data-skill="translate_history"]`)))
		if p := chrometest.Eval[string](t, b, `document.querySelector("#call-peer").value`); !strings.Contains(p, bNode.peerID()) {
			t.Errorf("#call-peer = %q after choosing B's skill, want B", p)
		}
		if s := chrometest.Eval[string](t, b, `document.querySelector("#call-skill").value`); s != "translate_history" {
			t.Errorf("#call-skill = %q, want translate_history", s)
		}
		fill(t, b, "#call-args", translateArgs)
		chrometest.Run(t, b, "call B", chromedp.Click(chromedp.CSS("#call-run")))
		chrometest.WaitDOM(t, b, 30*time.Second, "the answer of B", answered("#call-result", "#call-error"))
		if e := strings.TrimSpace(chrometest.Text(t, b, "#call-error")); e != "" {
			t.Fatalf("the call of B's translate_history failed: %s", e)
		}
		if got := chrometest.Text(t, b, "#call-result"); !strings.Contains(got, "claude") || !strings.Contains(got, "hello from the dashboard") {
			t.Errorf("#call-result = %q", got)
		}
		// It ran on B, called by A.
		if !slices.ContainsFunc(testenv.AuditLines(t, bNode.dataDir), func(l map[string]any) bool {
			return l["skill"] == "translate_history" && l["outcome"] == "ok" && l["caller"] == a.peerID()
		}) {
			t.Errorf("B's audit log has no translate_history called by A")
		}
		b.Clean(t, "the Mesh page")
	})

	t.Run("activity live", func(t *testing.T) {
		client := t.TempDir()
		out, _, code := mcpv2(t, "id", "--data-dir", client)
		caller := bannerValue(out, "MCPV2_PEER_ID")
		if code != 0 || caller == "" {
			t.Fatalf("mcpv2 id: exit %d\n%s", code, out)
		}
		stream := b.WaitResponse(func(r *network.Response) bool { return strings.Contains(r.URL, "/v1/audit/stream") })
		b.Open(t, ui+"/activity")
		select {
		case r := <-stream:
			if r.Status != 200 {
				t.Fatalf("the Activity page's stream: %d", r.Status)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the Activity page opened no /v1/audit/stream in 10 s")
		}
		row := fmt.Sprintf(`#audit tr[data-skill="translate_history"][data-caller=%q]`, caller)
		if chrometest.Exists(t, b, row) {
			t.Fatalf("a row of the client's call before it was made")
		}
		if out, errOut, code := mcpv2(t, "call", a.p2pAddr(t), "translate_history", translateArgs,
			"--secret", secret, "--data-dir", client, "--no-nat"); code != 0 {
			t.Fatalf("mcpv2 call: exit %d\n%s\n%s", code, out, errOut)
		}
		// Acceptance: the call appears within a second, the page left
		// open (no reload).
		chrometest.WaitDOM(t, b, time.Second, "the CLI's call on the Activity page", fmt.Sprintf("document.querySelector(%s)", chrometest.JSString(row)))
		if o := chrometest.Eval[string](t, b, fmt.Sprintf("document.querySelector(%s).dataset.outcome", chrometest.JSString(row))); o != "ok" {
			t.Errorf("the call's row: outcome %q, want ok", o)
		}
		b.Clean(t, "the Activity page")

		// The filter form: only the client's calls.
		fill(t, b, "#f-caller", caller)
		if st := b.Follow(t, "filter", chromedp.Click(chromedp.CSS(`#filter button[type="submit"]`))); st != 200 {
			t.Fatalf("the filter form: %d", st)
		}
		callers := chrometest.Eval[[]string](t, b, `[...document.querySelectorAll("#audit tbody tr")].map(r => r.dataset.caller)`)
		if len(callers) != 1 || callers[0] != caller {
			t.Errorf("the Activity page filtered by caller %s lists the callers %q, want the client's one call", caller, callers)
		}
		if first := chrometest.Eval[string](t, b, `(document.querySelector("#audit tbody tr") || {dataset: {}}).dataset.caller || ""`); first != caller {
			t.Errorf("the newest row is not first: the first row's caller is %q", first)
		}
		b.Clean(t, "the Activity page")
	})

	// A send that lasts: 4 MiB at 128 KiB/s, from its own client. It runs
	// while the pages are screenshotted, then stops.
	file := filepath.Join(t.TempDir(), "big.bin")
	const size = 4 << 20
	buf := make([]byte, size)
	_, _ = rand.Read(buf)
	if err := os.WriteFile(file, buf, 0o600); err != nil {
		t.Fatal(err)
	}
	sendCmd := exec.Command(binPath, "send", file, a.p2pAddr(t), "--limit-rate", "128K", "--secret", secret,
		"--data-dir", t.TempDir(), "--no-nat")
	sendCmd.Env = testenv.CleanEnv()
	sendLog := &testenv.Buffer{}
	sendCmd.Stdout, sendCmd.Stderr = sendLog, sendLog
	if err := sendCmd.Start(); err != nil {
		t.Fatal(err)
	}
	sendDone := make(chan error, 1)
	go func() { sendDone <- sendCmd.Wait() }()
	t.Cleanup(func() {
		_ = sendCmd.Process.Kill()
		<-sendDone
	})

	t.Run("transfer", func(t *testing.T) {
		row := `#transfers tr[data-name="big.bin"]`
		prog := fmt.Sprintf(`(() => { const p = document.querySelector(%s); return p && p.value > 0 ? {value: p.value, max: p.max} : null })()`,
			chrometest.JSString(row+" progress"))
		b.Open(t, ui+"/activity")
		chrometest.WaitDOM(t, b, 20*time.Second, "the send's progress bar", prog)
		p := chrometest.Eval[struct {
			Value float64 `json:"value"`
			Max   float64 `json:"max"`
		}](t, b, prog)
		if p.Max != size || p.Value <= 0 || p.Value >= size {
			t.Errorf("the send's progress bar: value %v of max %v, want between 0 and %d", p.Value, p.Max, size)
		}
		if !chrometest.Exists(t, b, row+" .resume") {
			t.Errorf("the transfer's row has no .resume")
		}
		select {
		case err := <-sendDone:
			sendDone <- err
			t.Errorf("the send ended before its progress was checked: %v\n%s", err, sendLog.String())
		default:
		}
		b.Clean(t, "the Activity page with a transfer")
	})

	t.Run("access", func(t *testing.T) {
		addKey(t, a, "dash-key")
		b.Open(t, ui+"/access")
		if strings.TrimSpace(chrometest.Text(t, b, "#policy")) == "" && !chrometest.Exists(t, b, "#policy") {
			t.Errorf("the Access page has no #policy")
		}
		chrometest.Run(t, b, "revoke dash-key", chromedp.Click(chromedp.CSS(`#keys tr[data-key="dash-key"] button.revoke`)))
		waitFor(t, 10*time.Second, "dash-key to be revoked", func() bool { return keyStatus(t, a)["dash-key"] == "revoked" })
		b.Clean(t, "the Access page")
	})

	t.Run("keyboard", func(t *testing.T) {
		// From the top of a page, Tab reaches the skip link (visible
		// when focused), then each page of the nav and the logout
		// button, in that order; the skip link's Enter moves to <main>.
		b.Open(t, ui+"/peers")
		var stops []string
		for range 8 {
			chrometest.Run(t, b, "Tab", chromedp.KeyEvent(kb.Tab))
			stops = append(stops, chrometest.Eval[string](t, b, `(() => { const e = document.activeElement;
				return e.tagName + " " + (e.getAttribute("href") || e.closest("form")?.id || "") })()`))
		}
		want := []string{"A #main", "A /", "A /peers", "A /skills", "A /mesh", "A /activity", "A /access", "BUTTON logout"}
		if !slices.Equal(stops, want) {
			t.Errorf("Tab stops %q, want %q", stops, want)
		}
		for range 7 {
			chrometest.Run(t, b, "Shift+Tab", chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift)))
		}
		if !chrometest.Eval[bool](t, b, `(() => { const r = document.activeElement.getBoundingClientRect();
			return document.activeElement.classList.contains("skip") && r.left >= 0 && r.top >= 0 && r.width > 0 })()`) {
			t.Errorf("the focused skip link is not visible")
		}
		chrometest.Run(t, b, "Enter", chromedp.KeyEvent(kb.Enter))
		chrometest.WaitDOM(t, b, 5*time.Second, "the skip link to reach #main", `location.hash === "#main"`)
		b.Clean(t, "the keyboard walk")
	})

	t.Run("every page", func(t *testing.T) {
		for _, v := range []chrometest.Viewport{chrometest.Desktop, chrometest.Narrow} {
			b.SetViewport(t, v)
			for _, p := range pages {
				b.Open(t, ui+p.path)
				what := fmt.Sprintf("the %s page (%s)", p.name, v.Name)
				for _, sel := range []string{`nav[aria-label="Pages"]`, "h1", "#rights", "form#logout"} {
					if !chrometest.Exists(t, b, sel) {
						t.Errorf("%s has no %s", what, sel)
					}
				}
				if over := chrometest.Eval[int](t, b, "document.documentElement.scrollWidth - window.innerWidth"); over > 0 {
					t.Errorf("%s is %d px wider than the window: it scrolls sideways", what, over)
				}
				checkAxe(t, b, what)
				screenshot(t, b, p.name, v)
				b.Clean(t, what)
			}
		}
		b.SetViewport(t, chrometest.Desktop)
	})

	t.Run("resume state", func(t *testing.T) {
		// The send is interrupted: the partial upload stays for a resume,
		// and the Activity page says so (it refreshes itself).
		_ = sendCmd.Process.Kill()
		err := <-sendDone
		sendDone <- err
		b.Open(t, ui+"/activity")
		row := `#transfers tr.partial[data-name="big.bin"]`
		chrometest.WaitDOM(t, b, 10*time.Second, "the interrupted send's resume state", fmt.Sprintf(
			`(() => { const r = document.querySelector(%s); return r && r.querySelector("progress").value > 0 && r.querySelector(".resume").textContent.includes("resume") })()`,
			chrometest.JSString(row)))
		b.Clean(t, "the Activity page after the send")
	})
	if d := b.Dialogs(); len(d) > 0 {
		t.Logf("dialogs answered: %q", d)
	}
}

// fill sets the value of the form field sel as typing would (with its
// input and change events).
func fill(t *testing.T, b *chrometest.Browser, sel, value string) {
	t.Helper()
	ok := chrometest.Eval[bool](t, b, fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return false;
		e.focus(); e.value = %s; e.dispatchEvent(new Event("input", {bubbles: true}));
		e.dispatchEvent(new Event("change", {bubbles: true})); return true })()`, chrometest.JSString(sel), chrometest.JSString(value)))
	if !ok {
		t.Fatalf("no form field %s", sel)
	}
}

// reloadUntil loads u again every 250 ms, at most d, until the JavaScript
// expression cond is true on the loaded page; then t fails with what.
// Each load is a page visit: it must have no console errors.
func reloadUntil(t *testing.T, b *chrometest.Browser, u string, d time.Duration, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		b.Open(t, u)
		if chrometest.Eval[bool](t, b, "!!("+cond+")") {
			return
		}
		b.Clean(t, u)
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s on %s", d, what, u)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// answered is a JavaScript condition: the element result holds a JSON
// answer, or the element errSel an error.
func answered(result, errSel string) string {
	return fmt.Sprintf(`(() => { const r = document.querySelector(%s), e = document.querySelector(%s);
		if (e && e.textContent.trim()) return true;
		try { JSON.parse(r.textContent); return true } catch { return false } })()`, chrometest.JSString(result), chrometest.JSString(errSel))
}

// bannerValue is the first value of key in KEY=VALUE lines.
func bannerValue(out, key string) string {
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+"="); ok {
			return v
		}
	}
	return ""
}
