// Package chrometest drives Debian's headless chromium for tests, with
// chromedp: a fresh profile per browser, every action bounded, and what
// the pages report recorded (console errors, uncaught exceptions, error
// entries of the browser log such as CSP violations and failed loads,
// dialogs, and the requests as they went over the wire), so that a test
// fails on them at the end of each page visit. Without chromium a test is
// skipped, or failed under MCPV2_REQUIRE_ALL (testenv.SkipEnv).
//
// It is imported by _test.go files only (the dashboard's tests, the NAT
// lab's), and imports internal/testenv alone of the project.
package chrometest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
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

// ChromiumPath is Debian's chromium, the browser of the acceptance.
const ChromiumPath = "/usr/bin/chromium"

// Bounds of the browser's work: a browser's whole life in one test, and
// one action (a navigation, a query, an evaluation, axe).
const (
	BrowserLife = 3 * time.Minute
	ActionWait  = 30 * time.Second
)

// Desktop and Narrow are the two window sizes the dashboard is checked
// and screenshotted at: a laptop's window and a phone's.
var (
	Desktop = Viewport{"desktop", 1280, 800}
	Narrow  = Viewport{"narrow", 390, 844}
)

// Viewport is a window size with its name (in screenshots' file names).
type Viewport struct {
	Name          string
	Width, Height int64
}

// Browser is a headless chromium with a fresh profile and one tab, which
// records what the pages it shows report: console errors, uncaught
// exceptions and error entries of the browser log (failed loads, CSP
// violations), JavaScript dialogs (answered OK at once, so that none
// blocks the page), and the HTTP responses of the tab.
type Browser struct {
	ctx context.Context // the tab

	mu        sync.Mutex
	problems  []string // console errors, exceptions, error log entries since the last check
	dialogs   []string // every dialog that opened, "type: message"
	responses []*network.Response
	onResp    func(*network.Response) // called under mu, in Listen's goroutine: must not block
	wire      map[network.RequestID]*Wire
}

// Wire is one request of the tab as it went over the wire: its URL and
// method, the names of the cookies it carried, and the status of the answer (0: none seen). Unlike a response event, it is
// there for a response the page may not read (a no-cors fetch of another
// origin blocked by Cross-Origin-Resource-Policy).
type Wire struct {
	URL, Method string
	Cookies     []string
	Status      int64
}

// config is what the options set.
type config struct {
	prefix []string
}

// Option configures Start.
type Option func(*config) error

// WithPrefix runs chromium under a command that runs another in place, as
// `ip netns exec NS` (a browser inside a network namespace of the NAT lab).
func WithPrefix(argv ...string) Option {
	return func(c *config) error {
		if len(argv) == 0 {
			return fmt.Errorf("WithPrefix: no command")
		}
		c.prefix = argv
		return nil
	}
}

// Start starts chromium for t (skipped, or failed under MCPV2_REQUIRE_ALL,
// when it is not installed), with a fresh profile, a desktop window and
// one tab; it is closed when t ends.
func Start(t *testing.T, opts ...Option) *Browser {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		testenv.SkipEnv(t, "chromium is not installed (%v): apt-get install chromium", err)
	}
	if _, err := exec.LookPath(ChromiumPath); err != nil {
		testenv.SkipEnv(t, "chromium cannot run: %v", err)
	}
	var cfg config
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			t.Fatal(err)
		}
	}
	alloc := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(ChromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(int(Desktop.Width), int(Desktop.Height)),
		chromedp.DisableGPU,
		// Chromium's own updates, sync, and the like: a test's browser
		// talks to the test's servers only.
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	if os.Geteuid() == 0 {
		alloc = append(alloc, chromedp.NoSandbox) // chromium refuses its sandbox as root
	}
	if len(cfg.prefix) > 0 {
		alloc = append(alloc, chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			cmd.Args = append(append([]string{}, cfg.prefix...), cmd.Args...)
			cmd.Args[len(cfg.prefix)] = ChromiumPath
			cmd.Path = cfg.prefix[0]
			if p, err := exec.LookPath(cfg.prefix[0]); err == nil {
				cmd.Path = p
			}
		}))
	}
	life, cancelLife := context.WithTimeout(context.Background(), BrowserLife)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(life, alloc...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	b := &Browser{ctx: ctx, wire: map[network.RequestID]*Wire{}}
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
		t.Fatalf("start %s: %v", ChromiumPath, err)
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
func (b *Browser) event(ev any) {
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
			w.URL, w.Method = ev.Request.URL, ev.Request.Method
		}
	case *network.EventRequestWillBeSentExtraInfo:
		for _, c := range ev.AssociatedCookies {
			if c.Cookie != nil && len(c.BlockedReasons) == 0 {
				w := b.wireOf(ev.RequestID)
				w.Cookies = append(w.Cookies, c.Cookie.Name)
			}
		}
	case *network.EventResponseReceivedExtraInfo:
		b.wireOf(ev.RequestID).Status = ev.StatusCode
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
func (b *Browser) wireOf(id network.RequestID) *Wire {
	w := b.wire[id]
	if w == nil {
		w = &Wire{}
		b.wire[id] = w
	}
	return w
}

// WireTo returns the requests of the tab so far whose URL is u.
func (b *Browser) WireTo(u string) []Wire {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Wire
	for _, w := range b.wire {
		if w.URL == u {
			out = append(out, *w)
		}
	}
	return out
}

// Run runs one action on b's tab, bounded by ActionWait; an error fails t.
func Run[T any](t *testing.T, b *Browser, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, ActionWait)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// Eval evaluates the JavaScript expression js in the page (awaiting it if
// it is a promise) and decodes its value into T.
func Eval[T any](t *testing.T, b *Browser, js string) T {
	t.Helper()
	return Run(t, b, "evaluate "+js, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
}

// Navigate loads u in the tab and returns the main document's HTTP status.
// The problems recorded so far are dropped: a visit is judged by its own.
func (b *Browser) Navigate(t *testing.T, u string) int64 {
	t.Helper()
	b.mu.Lock()
	b.problems = nil
	b.mu.Unlock()
	resp := Run(t, b, "navigate to "+u, chromedp.NavigateResponse(u))
	if resp == nil {
		t.Fatalf("navigate to %s: no response", u)
	}
	return resp.Status
}

// Follow runs a (a click on a link or a form's submit button) and waits
// for the navigation it starts; it returns the new page's HTTP status.
func (b *Browser) Follow(t *testing.T, what string, a chromedp.Action[chromedp.Void]) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, ActionWait)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, a)
	if err != nil || resp == nil {
		t.Fatalf("%s: %v (response %v)", what, err, resp)
	}
	return resp.Status
}

// Open loads the dashboard page u, which must answer 200 and show its
// <main id="main">.
func (b *Browser) Open(t *testing.T, u string) {
	t.Helper()
	if st := b.Navigate(t, u); st != 200 {
		t.Fatalf("GET %s in the browser: %d, want 200", u, st)
	}
	Run(t, b, "wait for main#main on "+u, chromedp.WaitVisible(chromedp.CSS("main#main")))
}

// TakeProblems returns (and forgets) the console errors, exceptions and
// error log entries recorded since the last navigation or check, after a
// round trip to the page so that every event it sent before is in.
func (b *Browser) TakeProblems(t *testing.T) []string {
	t.Helper()
	Eval[int](t, b, "1")
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

// Clean fails t on every console error, uncaught exception and error log
// entry of the visit so far: the end of each page visit.
func (b *Browser) Clean(t *testing.T, what string) {
	t.Helper()
	for _, p := range b.TakeProblems(t) {
		t.Errorf("%s: %s", what, p)
	}
}

// Dialogs returns the dialogs that opened in the tab so far.
func (b *Browser) Dialogs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...)
}

// WaitResponse returns a channel that gets the first response of the tab
// whose URL matches, from now on (the caller then triggers it).
func (b *Browser) WaitResponse(match func(*network.Response) bool) <-chan *network.Response {
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

// Exists reports whether the CSS selector sel matches an element now.
func Exists(t *testing.T, b *Browser, sel string) bool {
	t.Helper()
	return Eval[bool](t, b, fmt.Sprintf("document.querySelector(%s) !== null", JSString(sel)))
}

// Text is the textContent of the first element of sel ("" when none).
func Text(t *testing.T, b *Browser, sel string) string {
	t.Helper()
	return Eval[string](t, b, fmt.Sprintf("(document.querySelector(%s) || {}).textContent || ''", JSString(sel)))
}

// WaitDOM polls the page every 50 ms, at most d, until the JavaScript
// expression cond is true; then t fails with what. The page stays as it
// is: no reload. An evaluation that fails while a form's navigation
// replaces the document is tried again.
func WaitDOM(t *testing.T, b *Browser, d time.Duration, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, ActionWait)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (%s; last error %v)\n%s", d, what, cond, err, b.Describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Describe tells where the tab is and what its <main> says, for a
// failure's message.
func (b *Browser) Describe() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + ((document.querySelector("main") || document.body || {}).innerText || "").slice(0, 2000)`))
	if err != nil {
		return fmt.Sprintf("(the page cannot be read: %v)", err)
	}
	return "the page: " + s
}

// JSString is s as a JavaScript string literal.
func JSString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// SetViewport resizes the page's viewport to v.
func (b *Browser) SetViewport(t *testing.T, v Viewport) {
	t.Helper()
	Run(t, b, "viewport "+v.Name, chromedp.EmulateViewport(v.Width, v.Height))
}

// Screenshot takes a full-page PNG of the page at the viewport v (set with
// SetViewport first) and checks that it is a PNG of v's width: a page
// wider than its window fails here too.
func Screenshot(t *testing.T, b *Browser, v Viewport) []byte {
	t.Helper()
	buf := Run(t, b, "screenshot", chromedp.FullScreenshot(100))
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("the screenshot at %s is no PNG: %v", v.Name, err)
	}
	if w := img.Bounds().Dx(); int64(w) != v.Width || img.Bounds().Dy() == 0 {
		t.Errorf("the screenshot at %s is %v, want %d wide", v.Name, img.Bounds(), v.Width)
	}
	return buf
}
