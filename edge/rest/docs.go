package rest

import (
	_ "embed"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// openAPIDoc is the OpenAPI 3.1 document of every route of the face
// (openapi.json, served at OpenAPIPath; a test validates it and checks
// every route's requests and answers against it).
//
//go:embed openapi.json
var openAPIDoc []byte

// docsPage is the /docs page: hand-written HTML and JavaScript that
// fetches the document and renders its routes, parameters and schemas
// with a try-it form. It is served from the binary, with nothing from a
// CDN (a few kB, where swagger-ui would add megabytes to the binary and
// to the memory of each page view).
//
//go:embed docs.html
var docsPage []byte

// OpenAPI returns the face's OpenAPI 3.1 document (a copy).
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

// docsPolicy keeps the page's requests on this origin and runs only its
// own inline script and style.
const docsPolicy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// serveStatic answers GET (and HEAD) of an open document with one audit
// line.
func (f *Face) serveStatic(w http.ResponseWriter, r *http.Request, ctype string, body []byte) {
	start := time.Now()
	c := f.e.Caller(r)
	c.Via = "rest"
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		f.fail(w, r, c, start, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: method %s is not allowed on %s; use GET", protocol.Clip(r.Method, 20), r.URL.Path), http.StatusMethodNotAllowed)
		return
	}
	f.b.Audit(r.Context(), c, auditMethod(r), nil, start)
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if ctype == "text/html; charset=utf-8" {
		h.Set("Content-Security-Policy", docsPolicy)
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

func (f *Face) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	f.serveStatic(w, r, "application/json", openAPIDoc)
}

func (f *Face) serveDocs(w http.ResponseWriter, r *http.Request) {
	f.serveStatic(w, r, "text/html; charset=utf-8", docsPage)
}
