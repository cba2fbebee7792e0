package orchestrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
)

// textFields are the result fields taken as a result's text, in order.
var textFields = []string{"response", "answer", "result", "text", "summary", "output", "content", "message"}

// resultData is the template data of one done dependency (see the package
// documentation).
func resultData(r *SubtaskResult) map[string]any {
	var v any
	dec := json.NewDecoder(bytes.NewReader(r.Result))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		v = nil
	}
	raw := r.Result
	var b bytes.Buffer
	if err := json.Compact(&b, r.Result); err == nil {
		raw = b.Bytes()
	}
	return map[string]any{
		"result": v,
		"text":   resultText(v, raw),
		"raw":    string(raw),
		"skill":  r.Skill,
		"agent":  r.Agent,
	}
}

// resultText is the text form of a decoded result v whose JSON is raw.
func resultText(v any, raw []byte) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		for _, k := range textFields {
			switch f := x[k].(type) {
			case string:
				return f
			case json.Number:
				return f.String()
			case bool:
				return fmt.Sprint(f)
			}
		}
	}
	return string(raw)
}

var errRenderTooLarge = fmt.Errorf("rendered arguments exceed %d bytes", MaxRenderedBytes)

// budget is what one subtask's templates may still produce, in bytes: what
// they write, and what their text functions (json, print, printf, println,
// html, js, urlquery) return even when it is not written. Without loops
// ({{range}} is refused), this bounds a render's work by the size of its
// templates and of the data.
type budget struct {
	left int
}

// spend takes n bytes from the budget.
func (b *budget) spend(n int) error {
	if n > b.left {
		b.left = 0
		return errRenderTooLarge
	}
	b.left -= n
	return nil
}

// text wraps a string-producing function so that its output is spent.
func (b *budget) text(f func(args ...any) string) func(args ...any) (string, error) {
	return func(args ...any) (string, error) {
		s := f(args...)
		return s, b.spend(len(s))
	}
}

// funcs are the template functions that spend b: json, and the builtin
// text functions in their place.
func (b *budget) funcs() template.FuncMap {
	return template.FuncMap{
		"json": func(v any) (string, error) {
			s, err := templateJSON(v)
			if err != nil {
				return "", err
			}
			return s, b.spend(len(s))
		},
		"printf": func(format string, args ...any) (string, error) {
			if err := checkFormat(format); err != nil {
				return "", err
			}
			s := fmt.Sprintf(format, args...)
			return s, b.spend(len(s))
		},
		"print":    b.text(fmt.Sprint),
		"println":  b.text(fmt.Sprintln),
		"html":     b.text(template.HTMLEscaper),
		"js":       b.text(template.JSEscaper),
		"urlquery": b.text(template.URLQueryEscaper),
	}
}

// checkFormat refuses a printf format with a width or precision of more
// than four digits, or taken from an argument ('*'): fmt would build the
// whole padded string before the budget could see it.
func checkFormat(format string) error {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		digits := 0
		for i++; i < len(format); i++ {
			c := format[i]
			if c == '*' {
				return errors.New("printf: '*' widths are not allowed")
			}
			if c >= '0' && c <= '9' {
				if digits++; digits > 4 {
					return errors.New("printf: widths and precisions above 9999 are not allowed")
				}
				continue
			}
			digits = 0
			if c == '%' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
				break
			}
		}
	}
	return nil
}

// templateJSON renders v as compact JSON without HTML escaping.
func templateJSON(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// limitWriter collects a template's output, spending its budget.
type limitWriter struct {
	buf bytes.Buffer
	b   *budget
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if err := w.b.spend(len(p)); err != nil {
		return 0, err
	}
	return w.buf.Write(p)
}

// renderArgs runs the templates of args over data and returns the rendered
// object. Empty or null args render as {}.
func renderArgs(args json.RawMessage, data map[string]any) (json.RawMessage, error) {
	if noArguments(args) {
		return json.RawMessage("{}"), nil
	}
	obj, err := decodeObject(args)
	if err != nil {
		return nil, err
	}
	out, err := renderValue(obj, data, &budget{left: MaxRenderedBytes})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	if b.Len() > MaxRenderedBytes {
		return nil, errRenderTooLarge
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// renderValue renders the templates in v, spending b.
func renderValue(v any, data map[string]any, b *budget) (any, error) {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "{{") {
			return x, nil
		}
		t, err := parseTemplate(x, b)
		if err != nil {
			return nil, err
		}
		w := &limitWriter{b: b}
		if err := t.Execute(w, data); err != nil {
			if errors.Is(err, errRenderTooLarge) {
				return nil, errRenderTooLarge
			}
			return nil, fmt.Errorf("template %q: %w", truncate(x, 80), err)
		}
		if isJSONAction(t.Root) {
			var j any
			dec := json.NewDecoder(bytes.NewReader(w.buf.Bytes()))
			dec.UseNumber()
			if err := dec.Decode(&j); err == nil {
				return j, nil
			}
		}
		return w.buf.String(), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := renderValue(e, data, b)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := renderValue(e, data, b)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	}
	return v, nil
}

// isJSONAction reports whether the template is exactly one action whose
// pipeline ends in a call of json: {{json .a.result}} or {{.a | json}}.
func isJSONAction(root *parse.ListNode) bool {
	if root == nil || len(root.Nodes) != 1 {
		return false
	}
	a, ok := root.Nodes[0].(*parse.ActionNode)
	if !ok || a.Pipe == nil || len(a.Pipe.Decl) > 0 || len(a.Pipe.Cmds) == 0 {
		return false
	}
	last := a.Pipe.Cmds[len(a.Pipe.Cmds)-1]
	if len(last.Args) == 0 {
		return false
	}
	id, ok := last.Args[0].(*parse.IdentifierNode)
	return ok && id.Ident == "json"
}
