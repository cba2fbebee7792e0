package dashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// chromiumPath is Debian's chromium, the browser of the acceptance.
const chromiumPath = "/usr/bin/chromium"

// Bounds of the browser's work: a browser's whole life in one test, and
// one action (a navigation, a query, an evaluation, axe).
const (
	browserLife = 3 * time.Minute
	actionWait  = 30 * time.Second
)

// Desktop and narrow are the two widths of the screenshots (and of the axe
// runs): a laptop's window and a phone's.
var (
	desktop = viewport{"desktop", 1280, 800}
	narrow  = viewport{"narrow", 390, 844}
)

// viewport is a window size with its name in the screenshots' file names.
type viewport struct {
	name          string
	width, height int64
}

// browser is a headless chromium with a fresh profile and one tab, which
// records what the pages it shows report: console errors, uncaught
// exceptions and error entries of the browser log (failed loads, CSP
// violations), JavaScript dialogs (answered OK at once, so that none
// blocks the page), and the HTTP responses of the tab.
type browser struct {
	ctx context.Context // the tab

	mu        sync.Mutex
	problems  []string // console errors, exceptions, error log entries since the last check
	dialogs   []string // every dialog that opened, "type: message"
	responses []*network.Response
	onResp    func(*network.Response) // called under mu, in Listen's goroutine: must not block
	wire      map[network.RequestID]*wireReq
}

// wireReq is one request of the tab as it went over the wire: its URL and
// method, whether it carried the dashboard's session cookie, and the
// status of the answer (0: none seen). Unlike a response event, it is
// there for a response the page may not read (a no-cors fetch of another
// origin blocked by Cross-Origin-Resource-Policy).
type wireReq struct {
	url, method string
	cookie      bool
	status      int64
}

// newBrowser starts chromium for t (skipped, or failed under
// MCPV2_REQUIRE_ALL, when it is not installed), with a fresh profile and a
// desktop window; it is closed when t ends.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.SkipEnv(t, "chromium is not installed (%v): apt-get install chromium", err)
	}
	if _, err := exec.LookPath(chromiumPath); err != nil {
		testenv.SkipEnv(t, "chromium cannot run: %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(int(desktop.width), int(desktop.height)),
		chromedp.DisableGPU,
		// Chromium's own updates, sync, and the like: a test's browser
		// talks to the test's servers only.
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium refuses its sandbox as root
	}
	life, cancelLife := context.WithTimeout(context.Background(), browserLife)
	alloc, cancelAlloc := chromedp.NewExecAllocator(life, opts...)
	ctx, cancelTab := chromedp.NewContext(alloc)
	b := &browser{ctx: ctx, wire: map[network.RequestID]*wireReq{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancelTab()
		cancelAlloc()
		cancelLife()
		wg.Wait()
	})
	// The first action starts the browser, bound to life (not to a
	// shorter action's context).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	if err := chromedp.Listen(ctx, b.event); err != nil {
		t.Fatal(err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, fmt.Sprintf("%s: %s", ev.Type, ev.Message))
			b.mu.Unlock()
			// Answer it (OK), as the owner would: an alert blocks the
			// page until it is answered, and the Access page asks to
			// confirm a revoke.
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return b
}

// event records one event of the tab (chromedp.Listen: it must return
// fast and send no command).
func (b *browser) event(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				if a.Value != nil {
					args = append(args, string(a.Value))
				} else {
					args = append(args, a.Description)
				}
			}
			b.problems = append(b.problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		b.problems = append(b.problems, fmt.Sprintf("uncaught exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
	case *cdplog.EventEntryAdded:
		if e := ev.Entry; e != nil && e.Level == cdplog.EntryLevelError {
			b.problems = append(b.problems, fmt.Sprintf("log %s error: %s (%s)", e.Source, e.Text, e.URL))
		}
	case *network.EventRequestWillBeSent:
		if ev.Request != nil {
			w := b.wireOf(ev.RequestID)
			w.url, w.method = ev.Request.URL, ev.Request.Method
		}
	case *network.EventRequestWillBeSentExtraInfo:
		for _, c := range ev.AssociatedCookies {
			if c.Cookie != nil && c.Cookie.Name == cookieName && len(c.BlockedReasons) == 0 {
				b.wireOf(ev.RequestID).cookie = true
			}
		}
	case *network.EventResponseReceivedExtraInfo:
		b.wireOf(ev.RequestID).status = ev.StatusCode
	case *network.EventResponseReceived:
		if ev.Response != nil {
			b.responses = append(b.responses, ev.Response)
			if b.onResp != nil {
				b.onResp(ev.Response)
			}
		}
	}
}

// wireOf returns the record of request id, made when new; b.mu is held.
func (b *browser) wireOf(id network.RequestID) *wireReq {
	w := b.wire[id]
	if w == nil {
		w = &wireReq{}
		b.wire[id] = w
	}
	return w
}

// wireTo returns the requests of the tab so far whose URL is u.
func (b *browser) wireTo(u string) []wireReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []wireReq
	for _, w := range b.wire {
		if w.url == u {
			out = append(out, *w)
		}
	}
	return out
}

// run runs one action on b's tab, bounded by actionWait; an error fails t.
func run[T any](t *testing.T, b *browser, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, actionWait)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// eval evaluates the JavaScript expression js in the page (awaiting it if
// it is a promise) and decodes its value into T.
func eval[T any](t *testing.T, b *browser, js string) T {
	t.Helper()
	return run(t, b, "evaluate "+js, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
}

// navigate loads u in the tab and returns the main document's HTTP status.
// The problems recorded so far are dropped: a visit is judged by its own.
func (b *browser) navigate(t *testing.T, u string) int64 {
	t.Helper()
	b.mu.Lock()
	b.problems = nil
	b.mu.Unlock()
	resp := run(t, b, "navigate to "+u, chromedp.NavigateResponse(u))
	if resp == nil {
		t.Fatalf("navigate to %s: no response", u)
	}
	return resp.Status
}

// open loads the dashboard page u, which must answer 200 and show its
// <main id="main">.
func (b *browser) open(t *testing.T, u string) {
	t.Helper()
	if st := b.navigate(t, u); st != 200 {
		t.Fatalf("GET %s in the browser: %d, want 200", u, st)
	}
	run(t, b, "wait for main#main on "+u, chromedp.WaitVisible(chromedp.CSS("main#main")))
}

// takeProblems returns (and forgets) the console errors, exceptions and
// error log entries recorded since the last navigation or check, after a
// round trip to the page so that every event it sent before is in.
func (b *browser) takeProblems(t *testing.T) []string {
	t.Helper()
	eval[int](t, b, "1")
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

// clean fails t on every console error, uncaught exception and error log
// entry of the visit so far: the end of each page visit.
func (b *browser) clean(t *testing.T, what string) {
	t.Helper()
	for _, p := range b.takeProblems(t) {
		t.Errorf("%s: %s", what, p)
	}
}

// dialogsSoFar returns the dialogs that opened in the tab so far.
func (b *browser) dialogsSoFar() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...)
}

// waitResponse returns a channel that gets the first response of the tab
// whose URL matches, from now on (the caller then triggers it).
func (b *browser) waitResponse(match func(*network.Response) bool) <-chan *network.Response {
	ch := make(chan *network.Response, 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	prev := b.onResp
	b.onResp = func(r *network.Response) {
		if prev != nil {
			prev(r)
		}
		if match(r) {
			select {
			case ch <- r:
			default:
			}
		}
	}
	return ch
}

// exists reports whether the CSS selector sel matches an element now.
func exists(t *testing.T, b *browser, sel string) bool {
	t.Helper()
	return eval[bool](t, b, fmt.Sprintf("document.querySelector(%s) !== null", jsString(sel)))
}

// text is the textContent of the first element of sel ("" when none).
func text(t *testing.T, b *browser, sel string) string {
	t.Helper()
	return eval[string](t, b, fmt.Sprintf("(document.querySelector(%s) || {}).textContent || ''", jsString(sel)))
}

// waitDOM polls the page every 50 ms, at most d, until the JavaScript
// expression cond is true; then t fails with what. The page stays as it
// is: no reload. An evaluation that fails while a form's navigation
// replaces the document is tried again.
func waitDOM(t *testing.T, b *browser, d time.Duration, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, actionWait)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (%s; last error %v)\n%s", d, what, cond, err, b.describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// describe tells where the tab is and what its <main> says, for a
// failure's message.
func (b *browser) describe() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + ((document.querySelector("main") || document.body || {}).innerText || "").slice(0, 2000)`))
	if err != nil {
		return fmt.Sprintf("(the page cannot be read: %v)", err)
	}
	return "the page: " + s
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// setViewport resizes the page's viewport to v.
func (b *browser) setViewport(t *testing.T, v viewport) {
	t.Helper()
	run(t, b, "viewport "+v.name, chromedp.EmulateViewport(v.width, v.height))
}

// axeViolation is one violation of axe.run, with the targets (CSS
// selectors) of its nodes.
type axeViolation struct {
	ID      string  `json:"id"`
	Impact  string  `json:"impact"`
	Help    string  `json:"help"`
	Targets [][]any `json:"targets"`
}

var axeOnce struct {
	sync.Once
	src string
	err error
}

// npmDir holds the pinned axe-core (package-lock.json).
var npmDir, _ = filepath.Abs(filepath.Join("testdata", "npm"))

// axeSource returns axe.min.js of the pinned axe-core, installing it (npm
// ci from the lock file) once when it is missing: .ci/run installs it
// before the tests; a developer's first go test does it here. Without npm
// the test is skipped (failed under MCPV2_REQUIRE_ALL).
func axeSource(t *testing.T) string {
	t.Helper()
	axeOnce.Do(func() {
		file := filepath.Join(npmDir, "node_modules", "axe-core", "axe.min.js")
		if _, err := os.Stat(file); err != nil {
			if _, err := exec.LookPath("npm"); err != nil {
				axeOnce.err = fmt.Errorf("axe-core is not installed and npm is missing: %w", err)
				return
			}
			cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
			cmd.Dir = npmDir
			if out, err := cmd.CombinedOutput(); err != nil {
				axeOnce.err = fmt.Errorf("npm ci in %s: %v\n%s", npmDir, err, out)
				return
			}
		}
		b, err := os.ReadFile(file)
		axeOnce.src, axeOnce.err = string(b), err
	})
	if axeOnce.err != nil {
		testenv.SkipEnv(t, "%v", axeOnce.err)
	}
	return axeOnce.src
}

// axeViolations injects axe-core into the page through DevTools
// (Runtime.evaluate, which the page's CSP does not govern) and returns the
// violations of axe.run(document).
func axeViolations(t *testing.T, b *browser) []axeViolation {
	t.Helper()
	src := axeSource(t)
	if !eval[bool](t, b, "typeof window.axe === 'object'") {
		run(t, b, "inject axe-core", chromedp.Evaluate[chromedp.Void](src))
	}
	return eval[[]axeViolation](t, b, `axe.run(document).then(r => r.violations.map(v => ({
		id: v.id, impact: v.impact || "", help: v.help, targets: v.nodes.map(n => n.target)})))`)
}

// checkAxe fails t on every axe violation of the page, with its id,
// impact and the nodes' targets.
func checkAxe(t *testing.T, b *browser, what string) {
	t.Helper()
	for _, v := range axeViolations(t, b) {
		t.Errorf("%s: axe %s (%s): %s; nodes %v", what, v.ID, v.Impact, v.Help, v.Targets)
	}
}

// updateScreenshots names the variable that makes the tests write their
// screenshots to docs/dashboard/.
const updateScreenshots = "MCPV2_UPDATE_SCREENSHOTS"

// screenshotDir is docs/dashboard of the repository.
var screenshotDir, _ = filepath.Abs(filepath.Join("..", "..", "..", "docs", "dashboard"))

// screenshot takes a full-page PNG of the page at the viewport's width,
// checks that it is a PNG of that width, and writes it to
// docs/dashboard/<name>-<viewport>.png when MCPV2_UPDATE_SCREENSHOTS=1
// (so that CI leaves the tree clean).
func screenshot(t *testing.T, b *browser, name string, v viewport) {
	t.Helper()
	buf := run(t, b, "screenshot "+name, chromedp.FullScreenshot(100))
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("screenshot %s-%s is no PNG: %v", name, v.name, err)
	}
	if w := img.Bounds().Dx(); int64(w) != v.width || img.Bounds().Dy() == 0 {
		t.Errorf("screenshot %s-%s is %v, want %d wide", name, v.name, img.Bounds(), v.width)
	}
	if os.Getenv(updateScreenshots) != "1" {
		return
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(screenshotDir, name+"-"+v.name+".png")
	if err := os.WriteFile(file, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", file)
}
