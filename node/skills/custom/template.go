package custom

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"

	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// A handler of type "template" is Go text/template over the arguments:
//
//	{"type": "template", "template": "Hello, {{.name}}!"}

type templateJSON struct {
	Type     string `json:"type"`
	Template string `json:"template"`
}

// templateFuncs are the functions a template may use besides
// text/template's built-ins.
var templateFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"upper": strings.ToUpper,
	"lower": strings.ToLower,
	"trim":  strings.TrimSpace,
	"join": func(list []any, sep string) string {
		parts := make([]string, len(list))
		for i, v := range list {
			parts[i] = fmt.Sprint(v)
		}
		return strings.Join(parts, sep)
	},
}

// newTemplate builds a template handler: Go text/template executed
// over the decoded arguments (a map[string]any with numbers kept as
// json.Number, so that integers print exactly). A missing key prints
// "<no value>" as text/template does; the input schema is where required
// arguments are enforced. Besides the built-ins, templates may use json,
// upper, lower, trim and join.
func newTemplate(name string, raw json.RawMessage, l *Loader) (skills.Handler, error) {
	var tj templateJSON
	if err := decodeStrict(raw, &tj); err != nil {
		return nil, jsonError(raw, err)
	}
	if tj.Template == "" {
		return nil, fieldf("template", "missing")
	}
	if len(tj.Template) > maxTemplate {
		return nil, fieldf("template", "longer than %d bytes", maxTemplate)
	}
	tmpl, err := template.New(name).Funcs(templateFuncs).Parse(tj.Template)
	if err != nil {
		return nil, fieldf("template", "%w", err)
	}
	log, maxOut := l.cfg.log, l.cfg.maxOutput
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		if err := ctx.Err(); err != nil {
			return nil, protocol.Errorf(protocol.CodeSkillExecution, "template skill %q: canceled", name)
		}
		var data map[string]any
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.UseNumber()
		if err := dec.Decode(&data); err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: arguments must be a JSON object", name)
		}
		// The buffer checks ctx on every write: text/template itself cannot
		// be interrupted, but long-running templates write as they go.
		out := &cappedBuffer{max: maxOut, ctx: ctx}
		if err := tmpl.Execute(out, data); err != nil {
			switch {
			case out.overflow:
				return nil, protocol.Errorf(protocol.CodeSkillExecution, "template skill %q: output exceeds %d bytes", name, maxOut)
			case ctx.Err() != nil:
				return nil, protocol.Errorf(protocol.CodeSkillExecution, "template skill %q: canceled", name)
			}
			log.Debug("custom template failed", "skill", name, "err", err)
			return nil, protocol.Errorf(protocol.CodeSkillExecution, "template skill %q: %v", name, err)
		}
		return struct {
			Result string `json:"result"`
		}{out.buf.String()}, nil
	}, nil
}
