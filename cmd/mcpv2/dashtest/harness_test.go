package dashtest

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/internal/chrometest"
)

// dashCSP is the dashboard's Content-Security-Policy of the contract.
const dashCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// TestHarness shows that the checks the dashboard's tests rely on can
// fail: on pages served with the dashboard's CSP, the browser records a
// blocked inline script (a CSP violation), a console.error and an
// uncaught exception, and a dialog; axe-core, injected through DevTools
// despite the CSP, finds an image without alt text; and a clean page has
// none of these (no false alarm from the browser itself, such as a
// favicon request).
func TestHarness(t *testing.T) {
	head := `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>t</title><link rel="icon" href="data:,"></head><body><main id="main"><h1>t</h1>`
	pages := map[string]string{
		"/clean":  head + `<p>fine</p></main></body></html>`,
		"/csp":    head + `<script>window.inlineRan = true</script></main></body></html>`,
		"/err":    head + `<script src="/err.js"></script></main></body></html>`,
		"/dialog": head + `<script src="/dialog.js"></script></main></body></html>`,
		"/xss":    head + `<script src="/xss.js"></script></main></body></html>`,
		"/axe":    head + `<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" width="10" height="10"></main></body></html>`,
	}
	scripts := map[string]string{
		"/err.js":    `console.error("from the page"); throw new Error("thrown by the page");`,
		"/dialog.js": `alert("hello");`,
		// A page that puts the payload in as markup: the CSP stops its
		// handlers, but its elements are there, and inert must see them.
		"/xss.js": `document.querySelector("main").insertAdjacentHTML("beforeend", "<p>" + new URLSearchParams(location.search).get("q") + "</p>");`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", dashCSP)
		if js, ok := scripts[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write([]byte(js))
			return
		}
		html, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(html))
	}))
	defer srv.Close()
	b := chrometest.Start(t)

	b.Open(t, srv.URL+"/clean")
	if p := b.TakeProblems(t); len(p) != 0 {
		t.Errorf("a clean page reports %q", p)
	}
	if v := axeViolations(t, b); len(v) != 0 {
		t.Errorf("axe on a clean page: %+v", v)
	}

	b.Open(t, srv.URL+"/csp")
	if chrometest.Eval[bool](t, b, "window.inlineRan === true") {
		t.Errorf("an inline script ran under script-src 'self'")
	}
	if p := b.TakeProblems(t); !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, "Content Security Policy") }) {
		t.Errorf("the CSP violation of an inline script is not reported: %q", p)
	}

	b.Open(t, srv.URL+"/err")
	p := b.TakeProblems(t)
	if !slices.ContainsFunc(p, func(s string) bool {
		return strings.Contains(s, "console.error") && strings.Contains(s, "from the page")
	}) ||
		!slices.ContainsFunc(p, func(s string) bool {
			return strings.Contains(s, "uncaught") && strings.Contains(s, "thrown by the page")
		}) {
		t.Errorf("console.error and an uncaught exception: reported %q", p)
	}

	b.Open(t, srv.URL+"/dialog")
	waitFor(t, chrometest.ActionWait, "the alert to be recorded", func() bool { return len(b.Dialogs()) > 0 })
	if d := b.Dialogs(); len(d) != 1 || d[0] != "alert: hello" {
		t.Errorf("dialogs %q, want [alert: hello]", d)
	}

	b.Open(t, srv.URL+"/xss?q="+url.QueryEscape(xss))
	if p := inertProblems(t, b, true); !slices.ContainsFunc(p, func(s string) bool { return strings.HasPrefix(s, "the payload made elements") }) ||
		!slices.Contains(p, "the payload is not shown as text") {
		t.Errorf("inert on a page that makes markup of xss: %q, want its elements and the missing text reported", p)
	}
	b.TakeProblems(t) // the CSP reports of the blocked handlers

	b.Open(t, srv.URL+"/axe")
	v := axeViolations(t, b)
	if !slices.ContainsFunc(v, func(v axeViolation) bool { return v.ID == "image-alt" && len(v.Targets) == 1 }) {
		t.Errorf("axe (injected under the page's CSP) does not find the image without alt: %+v", v)
	}
	b.SetViewport(t, chrometest.Narrow)
	screenshot(t, b, "harness", chrometest.Narrow)
}
