package localapi

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"time"
)

// ui holds the pages' templates and the static assets (app.js, style.css):
// built into the binary, nothing fetched at run time.
//
//go:embed ui
var ui embed.FS

// navItem is a link of the pages' navigation.
type navItem struct {
	Path, Label string
	Current     bool
}

// pageNames are the pages, in the navigation's order, with their titles.
var pageNames = []struct{ name, path, title string }{
	{"node", "/", "Node"}, {"peers", "/peers", "Peers"}, {"skills", "/skills", "Skills"},
	{"mesh", "/mesh", "Mesh"}, {"activity", "/activity", "Activity"}, {"access", "/access", "Access"},
}

// pageData is what a page's template gets.
type pageData struct {
	Page, Title, PeerID, Error string
	Nav                        []navItem
	Data                       any
}

// templateFuncs format the pages' values. Every value a template prints
// goes through html/template's escaping: text from peers and callers is
// data, never markup.
var templateFuncs = template.FuncMap{
	"short": func(s string) string {
		if len(s) > 16 {
			return s[:8] + "…" + s[len(s)-6:]
		}
		return s
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"clock": func(t time.Time) string { return t.Local().Format("15:04:05.000") },
	"iso":   func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"seconds": func(s int64) string {
		return (time.Duration(s) * time.Second).String()
	},
	"bytes": func(n int64) string {
		switch {
		case n >= 1<<30:
			return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d B", n)
	},
	"indent": func(raw json.RawMessage) string {
		var b bytes.Buffer
		if json.Indent(&b, raw, "", "  ") != nil {
			return string(raw)
		}
		return b.String()
	},
	"list": func(s ...string) []string { return s },
}

// parseTemplates parses each page with the layout.
func parseTemplates() (map[string]*template.Template, error) {
	base, err := template.New("").Funcs(templateFuncs).ParseFS(ui, "ui/layout.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: templates: %w", err)
	}
	out := map[string]*template.Template{"message": base}
	for _, p := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(ui, "ui/"+p.name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: templates: %w", err)
		}
		out[p.name] = t
	}
	return out, nil
}

// renderPage renders page name with data and status; err, when set, is
// said at the top of the page.
func (a *API) renderPage(w http.ResponseWriter, status int, name string, data any, err error) {
	pd := pageData{Page: name, PeerID: a.n.ID().String(), Data: data}
	for _, p := range pageNames {
		pd.Nav = append(pd.Nav, navItem{Path: p.path, Label: p.title, Current: p.name == name})
		if p.name == name {
			pd.Title = p.title
		}
	}
	if err != nil {
		pd.Error = err.Error()
	}
	a.render(w, status, name, "layout", pd)
}

// renderMessage renders a page of one heading and one sentence (the login
// and logout pages).
func (a *API) renderMessage(w http.ResponseWriter, status int, title, heading, text string) {
	a.render(w, status, "message", "message", struct{ Title, Heading, Text string }{title, heading, text})
}

// render executes a template into a buffer first, so that a failure is a
// clean 500 and not half a page.
func (a *API) render(w http.ResponseWriter, status int, set, name string, data any) {
	var b bytes.Buffer
	pages, err := a.pages()
	if err == nil {
		err = pages[set].ExecuteTemplate(&b, name, data)
	}
	if err != nil {
		a.cfg.log.Error("dashboard: render", "page", set, "err", err)
		writeError(w, http.StatusInternalServerError, CodeInternal, "the page could not be made: "+err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// staticHandler serves ui/static under /static/.
func staticHandler() http.Handler {
	sub, err := fs.Sub(ui, "ui/static")
	if err != nil {
		panic(err) // the directory is embedded: unreachable
	}
	files := http.FileServerFS(sub)
	return http.StripPrefix("/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
}
