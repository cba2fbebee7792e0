package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/protocol"
)

// Prompt is a prompt template (MCP prompts/list and prompts/get): a Go
// text/template body over the arguments, rendered as one user message.
type Prompt struct {
	// Name is the prompt's name: letters, digits, _ . - (at most 64).
	Name string `json:"name"`
	// Description says what the prompt is for.
	Description string `json:"description"`
	// Arguments are the prompt's arguments; the body reads each as
	// {{.NAME}}, an empty string when it was not given.
	Arguments []PromptArgument `json:"arguments"`
	// Template is the body, a Go text/template.
	Template string `json:"template"`

	tmpl *template.Template
}

// PromptArgument is one argument of a Prompt.
type PromptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
	// Enum, when set, lists the values the argument may take.
	Enum []string `json:"enum,omitempty"`
	// Aliases are other names the argument may be given by (the seed's
	// "text" for summarize's "content"). Given under two names, the
	// values must agree; a required argument is there under any of them.
	Aliases []string `json:"aliases,omitempty"`
}

// Limits of a prompts file.
const (
	maxPromptsFile = 1 << 20
	maxPromptArg   = 1 << 20 // one argument's value, in bytes
	maxRendered    = 4 << 20 // a rendered prompt, in bytes
)

var promptName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// promptsFile is the file's form:
//
//	{"prompts": [{"name": "review", "description": "Review code",
//	  "arguments": [{"name": "code", "required": true}],
//	  "template": "Review this code:\n{{.code}}"}]}
type promptsFile struct {
	Prompts []Prompt `json:"prompts"`
}

// LoadPrompts reads a prompts file (see promptsFile). A missing file is no
// prompts unless mustExist is set; every other problem names the file and
// what is wrong: bad JSON, an unknown field, a bad name, a duplicate, a
// template that does not parse or names an argument not declared.
func LoadPrompts(path string, mustExist bool) ([]Prompt, error) {
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && !mustExist {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("prompts file %s: %w", path, err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxPromptsFile+1))
	if err != nil {
		return nil, fmt.Errorf("prompts file %s: %w", path, err)
	}
	if len(data) > maxPromptsFile {
		return nil, fmt.Errorf("prompts file %s: larger than %d bytes", path, maxPromptsFile)
	}
	return ParsePrompts(path, data)
}

// ParsePrompts parses the prompts file format; name is used in errors.
func ParsePrompts(name string, data []byte) ([]Prompt, error) {
	var pf promptsFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pf); err != nil {
		return nil, fmt.Errorf("prompts file %s: %s", name, protocol.JSONErrorText(err))
	}
	seen := map[string]bool{}
	for i := range pf.Prompts {
		p := &pf.Prompts[i]
		if err := p.compile(); err != nil {
			return nil, fmt.Errorf("prompts file %s: prompt %d: %w", name, i+1, err)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("prompts file %s: prompt %q is defined twice", name, p.Name)
		}
		seen[p.Name] = true
	}
	return pf.Prompts, nil
}

// compile checks p and parses its template.
func (p *Prompt) compile() error {
	if !promptName.MatchString(p.Name) {
		return fmt.Errorf("name %q: want 1 to 64 letters, digits, _ . or -", protocol.Clip(p.Name, 80))
	}
	if strings.TrimSpace(p.Template) == "" {
		return fmt.Errorf("prompt %q: the template is empty", p.Name)
	}
	args := map[string]bool{}
	names := map[string]bool{} // arguments and aliases
	for _, a := range p.Arguments {
		if !promptName.MatchString(a.Name) || names[a.Name] {
			return fmt.Errorf("prompt %q: argument %q is not a valid name or is declared twice", p.Name, protocol.Clip(a.Name, 80))
		}
		args[a.Name], names[a.Name] = true, true
		for _, al := range a.Aliases {
			if !promptName.MatchString(al) || names[al] {
				return fmt.Errorf("prompt %q: alias %q of argument %q is not a valid name or is declared twice", p.Name, protocol.Clip(al, 80), a.Name)
			}
			names[al] = true
		}
	}
	for _, a := range p.Arguments {
		for _, al := range a.Aliases {
			if args[al] {
				return fmt.Errorf("prompt %q: alias %q of argument %q is also an argument", p.Name, al, a.Name)
			}
		}
	}
	t, err := template.New(p.Name).Option("missingkey=error").Parse(p.Template)
	if err != nil {
		return fmt.Errorf("prompt %q: template: %w", p.Name, err)
	}
	// A template that names an argument nobody declared fails here, at
	// load, rather than at each prompts/get.
	probe := map[string]string{}
	for a := range args {
		probe[a] = ""
	}
	if err := t.Execute(io.Discard, probe); err != nil {
		return fmt.Errorf("prompt %q: template: %w", p.Name, err)
	}
	p.tmpl = t
	return nil
}

// render fills p's template with args, checking them against p's
// declaration: every required argument present (under its name or an
// alias), none unknown, names of one argument agreeing, each within its
// enum and size.
func (p *Prompt) render(args map[string]string) (string, *protocol.Error) {
	vals := make(map[string]string, len(p.Arguments))
	known := make(map[string]bool, len(p.Arguments))
	for _, a := range p.Arguments {
		known[a.Name] = true
		v, ok := args[a.Name]
		from := a.Name
		for _, al := range a.Aliases {
			known[al] = true
			av, has := args[al]
			if !has {
				continue
			}
			if ok && av != v {
				return "", protocol.Errorf(protocol.CodeInvalidParams, "invalid params: prompt %q: arguments %q and %q name the same argument and disagree; give one of them", p.Name, from, al)
			}
			v, ok, from = av, true, al
		}
		switch {
		case !ok && a.Required:
			if len(a.Aliases) > 0 {
				return "", protocol.Errorf(protocol.CodeInvalidParams, "invalid params: prompt %q needs argument %q (or %s)", p.Name, a.Name, strings.Join(quoteAll(a.Aliases), " or "))
			}
			return "", protocol.Errorf(protocol.CodeInvalidParams, "invalid params: prompt %q needs argument %q", p.Name, a.Name)
		case len(v) > maxPromptArg:
			return "", protocol.Errorf(protocol.CodeInvalidParams, "invalid params: argument %q of prompt %q is larger than %d bytes", a.Name, p.Name, maxPromptArg)
		case ok && len(a.Enum) > 0 && !slices.Contains(a.Enum, v):
			return "", protocol.Errorf(protocol.CodeInvalidParams, "invalid params: argument %q of prompt %q is %q; want one of %s", a.Name, p.Name, protocol.Clip(v, 40), strings.Join(a.Enum, ", "))
		}
		vals[a.Name] = v
	}
	for k := range args {
		if !known[k] {
			return "", protocol.Errorf(protocol.CodeInvalidParams, "invalid params: prompt %q has no argument %q", p.Name, protocol.Clip(k, 64))
		}
	}
	var b bytes.Buffer
	if err := p.tmpl.Execute(&limitBuffer{b: &b, n: maxRendered}, vals); err != nil {
		return "", protocol.Errorf(protocol.CodeInvalidParams, "invalid params: prompt %q could not be rendered: %s", p.Name, protocol.Clip(err.Error(), 200))
	}
	return b.String(), nil
}

// limitBuffer fails a write past n bytes, so that a template cannot grow
// without bound.
type limitBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitBuffer) Write(p []byte) (int, error) {
	if l.b.Len()+len(p) > l.n {
		return 0, fmt.Errorf("the rendered prompt is larger than %d bytes", l.n)
	}
	return l.b.Write(p)
}

// quoteAll quotes each of ss, for messages.
func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// sdkPrompt is p as prompts/list shows it. An alias is listed as an
// argument of its own, after its argument; an argument that has aliases
// is listed as not required (MCP has no way to say "one of these"), and
// its description says that it is required under one of its names.
func (p *Prompt) sdkPrompt() *sdk.Prompt {
	sp := &sdk.Prompt{Name: p.Name, Description: p.Description}
	for _, a := range p.Arguments {
		d := a.Description
		if len(a.Enum) > 0 {
			d = strings.TrimSpace(d + " (one of: " + strings.Join(a.Enum, ", ") + ")")
		}
		req := a.Required
		if len(a.Aliases) > 0 {
			if req {
				d = strings.TrimSpace(d + "; required, as " + strconv.Quote(a.Name) + " or " + strings.Join(quoteAll(a.Aliases), " or "))
			}
			req = false
		}
		sp.Arguments = append(sp.Arguments, &sdk.PromptArgument{Name: a.Name, Description: d, Required: req})
		for _, al := range a.Aliases {
			sp.Arguments = append(sp.Arguments, &sdk.PromptArgument{Name: al,
				Description: "another name of " + strconv.Quote(a.Name) + " (give one of them; both must agree)"})
		}
	}
	return sp
}

func (f *Face) getPrompt(p Prompt) sdk.PromptHandler {
	return func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		text, perr := p.render(req.Params.Arguments)
		if perr != nil {
			return nil, protocolToWire(perr)
		}
		return &sdk.GetPromptResult{Description: p.Description,
			Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: text}}}}, nil
	}
}

// builtinPrompts are summarize and analyze, the two prompts the seed had.
func builtinPrompts() []Prompt {
	ps := []Prompt{
		{Name: "summarize", Description: "Summarize a text: brief, detailed, or as bullet points.",
			Arguments: []PromptArgument{
				{Name: "content", Description: "the text to summarize", Required: true, Aliases: []string{"text"}},
				{Name: "style", Description: "brief (default), detailed or bullets", Enum: []string{"brief", "detailed", "bullets"}},
			},
			Template: `{{if eq .style "detailed"}}Write a detailed summary of the text below: every main point, in order, with the reasoning that connects them.` +
				`{{else if eq .style "bullets"}}Summarize the text below as a list of short bullet points, one per main point.` +
				`{{else}}Summarize the text below in two or three sentences.{{end}}

Text:
{{.content}}`},
		{Name: "analyze", Description: "Analyze a text for its sentiment, key themes, entities, or in general.",
			Arguments: []PromptArgument{
				{Name: "content", Description: "the text to analyze", Required: true, Aliases: []string{"text"}},
				{Name: "focus", Description: "sentiment, key_themes, entities or general (default)", Enum: []string{"sentiment", "key_themes", "entities", "general"}},
			},
			Template: `{{if eq .focus "sentiment"}}Analyze the sentiment of the text below: overall tone (positive, negative, neutral or mixed), how strong it is, and the passages that show it.` +
				`{{else if eq .focus "key_themes"}}Identify the key themes of the text below: each theme in a few words, with the passages that carry it.` +
				`{{else if eq .focus "entities"}}List the named entities of the text below (people, organizations, places, products, dates), each with its type and role in the text.` +
				`{{else}}Analyze the text below: its purpose, main claims, tone, and anything notable or questionable.{{end}}

Text:
{{.content}}`},
	}
	for i := range ps {
		if err := ps[i].compile(); err != nil {
			panic("mcp: built-in prompt: " + err.Error())
		}
	}
	return ps
}
