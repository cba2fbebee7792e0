package rest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/chrometest"
)

// TestDocsInChromium: /docs renders in headless Chromium from the
// binary's own document — every route listed, no console error, no
// request that leaves the origin — and its try-it form sends a request.
func TestDocsInChromium(t *testing.T) {
	r := newRig(t, nil)
	b := chrometest.Start(t)
	if st := b.Navigate(t, r.base+"/docs"); st != 200 {
		t.Fatalf("/docs: status %d", st)
	}
	chrometest.WaitDOM(t, b, 20*time.Second, "the document rendered", `document.body.getAttribute("data-ready") === "true"`)
	listed := chrometest.Eval[[]string](t, b, `Array.from(document.querySelectorAll("details.op")).map(e => e.getAttribute("data-route"))`)
	doc := loadDoc(t)
	want := 0
	for path, item := range doc.Paths.Map() {
		for m := range item.Operations() {
			want++
			found := false
			for _, l := range listed {
				found = found || l == m+" "+path
			}
			if !found {
				t.Errorf("the page does not list %s %s", m, path)
			}
		}
	}
	if len(listed) != want {
		t.Errorf("the page lists %d routes, the document %d", len(listed), want)
	}
	// Try it: the scanner's GET, sent by the page's form.
	chrometest.Eval[bool](t, b, `(() => { const d = document.querySelector('details.op[data-route="GET /api/v1/mcp/security/scan"]'); d.open = true; d.querySelector("button").click(); return true })()`)
	chrometest.WaitDOM(t, b, 20*time.Second, "the try-it answer", `(document.querySelector('details.op[data-route="GET /api/v1/mcp/security/scan"] pre.response') || {}).textContent`)
	if st := chrometest.Text(t, b, `details.op[data-route="GET /api/v1/mcp/security/scan"] .status`); st != "HTTP 200" {
		t.Fatalf("the try-it status: %q", st)
	}
	out := chrometest.Text(t, b, `details.op[data-route="GET /api/v1/mcp/security/scan"] pre.response`)
	if !strings.Contains(out, "attack_vectors") {
		t.Fatalf("the try-it answer: %.300s", out)
	}
	// Every resource the page loaded is of this origin.
	urls := chrometest.Eval[[]string](t, b, `[location.href].concat(performance.getEntriesByType("resource").map(e => e.name))`)
	for _, u := range urls {
		if !strings.HasPrefix(u, r.base+"/") {
			t.Errorf("a request left the origin: %s", u)
		}
	}
	if len(urls) < 3 { // the page, the document, the try-it request
		t.Errorf("the page made %d requests, want the document's and the form's: %v", len(urls), urls)
	}
	b.Clean(t, "/docs")
}
