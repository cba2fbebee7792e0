package custom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpv2/mcpv2/node/guard"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// This file is the custom skills file's format and its checks; the handler
// kinds each have a file of their own (template.go, http.go, command.go,
// mcp.go).

// Limits of a custom skills file (SPEC §3).
const (
	// MaxFileSize is the largest custom skills file Parse and LoadFile read.
	MaxFileSize = 1 << 20
	// MaxSkills is the most skills one custom skills file may hold.
	MaxSkills = 256
	// DefaultMaxOutput is the default cap on what one custom skill call
	// may produce: template output, command stdout, HTTP answer body.
	DefaultMaxOutput = 1 << 20
	// DefaultTimeout is the default timeout_s of command and http handlers.
	DefaultTimeout = 30 * time.Second
	// MaxTimeout is the largest timeout_s a command or http handler may ask for.
	MaxTimeout = 600 * time.Second
	// DefaultMemoryMB is the default memory_mb (RLIMIT_AS) of a command handler.
	DefaultMemoryMB = 1024
	// MaxMemoryMB is the largest memory_mb a command handler may ask for.
	MaxMemoryMB = 1 << 20
)

// Skill is one validated custom skill, ready to be registered. Its
// Handler is safe for concurrent use.
type Skill struct {
	// Descriptor is what tools/list and the agent card publish.
	Descriptor protocol.SkillDescriptor
	// Kind is the handler type: "template", "command", "http", "mcp" or "a2a".
	Kind string
	// Handler runs the skill; it expects arguments already validated
	// against Descriptor.InputSchema (Registry.Call does that).
	Handler skills.Handler
	// Guard is what the node's prompt-injection guard scans of the
	// skill's arguments before it runs: guard.DefaultPlan (every string
	// argument) with the kinds the file's "guard" map gives; nil when the
	// file says "guard": false.
	Guard *guard.Plan

	// mcp is an "mcp" handler that ResolveMCP has not made concrete
	// yet (Handler is nil until then); fileSchema says the file gave the
	// skill's input_schema.
	mcp        *mcpHandler
	fileSchema bool
	// guardRaw is the file's "guard", for the skills an "mcp" skill
	// makes (their names and schemas come from the server).
	guardRaw json.RawMessage
}

// Parse parses and checks the contents of a custom skills file and
// builds each skill's handler, without registering anything. The file is
//
//	{"skills": [{"name", "description"?, "tags"?, "input_schema"?, "guard"?, "read_only"?, "handler"}]}
//
// "read_only": true declares the skill free of side effects
// (SkillDescriptor.ReadOnly, the MCP face's readOnlyHint); absent or false,
// it is not.
//
// The node's prompt-injection guard scans every string argument of a
// custom skill by default, each as its schema's "format" or its name says
// (guard.DefaultPlan, docs/guard.md). "guard": false opts the skill out;
// a "guard" map sets the kind of named arguments, "prompt" (text that
// reaches an LLM), "path" (a file path), "sql" (a query), "sql+prompt"
// (a value put into a query: both rules), "off" (not
// scanned) or "auto" (by name), and "*" sets it for every other argument,
// e.g. {"question": "prompt", "where": "sql", "blob": "off"}, or
// {"text": "prompt", "*": "off"} to scan text alone.
//
// and a handler is one of
//
//	{"type": "template", "template": "Hello, {{.name}}!"}
//	{"type": "command", "command": ["prog", "arg"], "timeout_s"?: 30, "memory_mb"?: 1024, "env"?: {"K": "v"}}
//	{"type": "http", "url": "https://...", "timeout_s"?: 30, "headers"?: {"Authorization": "Bearer ${ENV:API_KEY}"}}
//	{"type": "mcp", ...} (see mcp.go; ResolveMCP makes such skills concrete)
//	{"type": "a2a", "url": "https://agent", "skill"?: "echo", "timeout_s"?: 30, "card_ttl_s"?: 600, "headers"?: {...}} (see a2a.go)
//
// Header and env values may hold ${ENV:NAME}, replaced at load time by the
// node's environment variable NAME (so that keys stay out of the file); no
// other substitution exists. A missing input_schema means any object.
//
// Parse enforces the file size and skill count limits, and refuses unknown
// fields, bad or duplicate names, input schemas that do not compile or are
// not of type object, unknown handler types, templates that do not parse,
// programs that cannot be found, and URLs that are not http or https.
// Errors name the skill ("skill \"greet\": ..." or "skill #3: ..." when it
// has no usable name) and the field; they do not name the file (LoadFile
// adds it). When a command skill is present, the scratch directory
// (WithScratchDir) is created.
//
// The command skills of a Loader share one cap on concurrent runs
// (WithMaxCommandRuns). When they would run as root (the node is root and
// WithRunAs is not given), Parse logs a warning. After Close, Parse fails
// with an error that wraps net.ErrClosed.
func (l *Loader) Parse(data []byte) ([]Skill, error) {
	return l.parse(data, l.cfg.baseDir)
}

// parse is Parse with relative program paths resolved against baseDir
// ("": the current directory).
func (l *Loader) parse(data []byte, baseDir string) ([]Skill, error) {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("custom: %w", net.ErrClosed)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("file is larger than %d bytes", MaxFileSize)
	}
	var file struct {
		Skills []json.RawMessage `json:"skills"`
	}
	if err := decodeStrict(data, &file); err != nil {
		return nil, fileError(data, err)
	}
	if len(file.Skills) > MaxSkills {
		return nil, fmt.Errorf("%d skills, at most %d are allowed", len(file.Skills), MaxSkills)
	}
	out := make([]Skill, 0, len(file.Skills))
	index := make(map[string]int, len(file.Skills))
	for i, raw := range file.Skills {
		s, err := l.parseSkill(raw, baseDir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", skillLabel(raw, i), err)
		}
		name := s.Descriptor.Name
		if j, ok := index[name]; ok {
			return nil, fmt.Errorf("skill %q: name: %w %q (skills #%d and #%d)", name, skills.ErrDuplicate, name, j+1, i+1)
		}
		index[name] = i
		out = append(out, s)
	}
	if l.runAs == nil && os.Geteuid() == 0 && slices.ContainsFunc(out, func(s Skill) bool { return s.Kind == "command" }) {
		l.cfg.log.Warn("command skills run as root: their programs can read and change everything the node can; name an unprivileged user to run them as (run-as)")
	}
	return out, nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

const (
	maxDescription = 4096
	maxTags        = 16
	maxTemplate    = 64 << 10
	maxArgv        = 256
	maxGuardFields = 32
)

type skillJSON struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Tags        []string        `json:"tags"`
	InputSchema json.RawMessage `json:"input_schema"`
	Guard       json.RawMessage `json:"guard"`
	Handler     json.RawMessage `json:"handler"`
	ReadOnly    bool            `json:"read_only"`
}

// guardPlan reads a custom skill's "guard": absent, null or true (the
// default plan), false (nil: not scanned) or a map of argument names to
// kinds ("*": every other argument).
func guardPlan(raw json.RawMessage, name string, tags []string, schema json.RawMessage) (*guard.Plan, error) {
	raw = bytes.TrimSpace(raw)
	p := guard.DefaultPlan(name, tags, schema)
	switch string(raw) {
	case "", "null", "true":
		return p, nil
	case "false":
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf(`want true, false or a map of argument names to "prompt", "path", "sql", "sql+prompt", "off" or "auto": %w`, jsonError(raw, err))
	}
	if len(m) > maxGuardFields {
		return nil, fmt.Errorf("%d fields, at most %d are allowed", len(m), maxGuardFields)
	}
	if p.Fields == nil {
		p.Fields = make(map[string]guard.Kind, len(m))
	}
	for field, kind := range m {
		if field == "" || len(field) > 128 {
			return nil, fmt.Errorf("field name %q: want 1 to 128 bytes", field)
		}
		k, err := guard.ParseKind(kind)
		if err != nil {
			return nil, fmt.Errorf("%q: %q is not prompt, path, sql, sql+prompt, off or auto", field, kind)
		}
		if field == "*" {
			p.Rest = k
			continue
		}
		p.Fields[field] = k
	}
	return p, nil
}

// skillLabel names the i-th skill of a file for an error message: by
// its name when it has a string one, else by its position.
func skillLabel(raw json.RawMessage, i int) string {
	var peek struct {
		Name any `json:"name"`
	}
	if json.Unmarshal(raw, &peek) == nil {
		if s, ok := peek.Name.(string); ok && s != "" {
			return fmt.Sprintf("skill %q", s)
		}
	}
	return fmt.Sprintf("skill #%d", i+1)
}

func (l *Loader) parseSkill(raw json.RawMessage, baseDir string) (Skill, error) {
	if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return Skill{}, errors.New("not a JSON object")
	}
	var sj skillJSON
	if err := decodeStrict(raw, &sj); err != nil {
		return Skill{}, jsonError(raw, err)
	}
	if !nameRE.MatchString(sj.Name) {
		return Skill{}, fmt.Errorf("name: %q must match %s", sj.Name, nameRE)
	}
	if len(sj.Description) > maxDescription {
		return Skill{}, fmt.Errorf("description: longer than %d bytes", maxDescription)
	}
	if len(sj.Tags) > maxTags {
		return Skill{}, fmt.Errorf("tags: %d tags, at most %d are allowed", len(sj.Tags), maxTags)
	}
	for i, t := range sj.Tags {
		if !nameRE.MatchString(t) {
			return Skill{}, fmt.Errorf("tags[%d]: %q must match %s", i, t, nameRE)
		}
	}
	schema, err := inputSchema(sj.InputSchema)
	if err != nil {
		return Skill{}, fmt.Errorf("input_schema: %w", err)
	}
	gplan, err := guardPlan(sj.Guard, sj.Name, sj.Tags, schema)
	if err != nil {
		return Skill{}, fmt.Errorf("guard: %w", err)
	}
	if len(bytes.TrimSpace(sj.Handler)) == 0 || bytes.Equal(bytes.TrimSpace(sj.Handler), []byte("null")) {
		return Skill{}, errors.New("handler: missing")
	}
	var peek struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(sj.Handler, &peek); err != nil {
		return Skill{}, fmt.Errorf("handler: %w", jsonError(sj.Handler, err))
	}
	var h skills.Handler
	var m *mcpHandler
	switch peek.Type {
	case "template":
		h, err = newTemplate(sj.Name, sj.Handler, l)
	case "command":
		var c *command
		if c, err = newCommand(sj.Name, sj.Handler, l, baseDir); err == nil {
			h = c.run
		}
	case "http":
		h, err = newHTTP(sj.Name, sj.Handler, l)
	case "mcp":
		m, err = newMCP(sj.Name, sj.Handler, l, baseDir)
	case "a2a":
		h, err = newA2A(sj.Name, sj.Handler, l)
	case "":
		err = fieldf("type", "missing (want template, command, http, mcp or a2a)")
	default:
		err = fieldf("type", "unknown handler type %q (want template, command, http, mcp or a2a)", peek.Type)
	}
	if err != nil {
		if fe, ok := err.(*fieldError); ok {
			return Skill{}, fmt.Errorf("handler.%s: %w", fe.Field, fe.Err)
		}
		return Skill{}, fmt.Errorf("handler: %w", err)
	}
	given := len(bytes.TrimSpace(sj.InputSchema)) > 0 && !bytes.Equal(bytes.TrimSpace(sj.InputSchema), []byte("null"))
	if m != nil && m.all && given {
		return Skill{}, errors.New(`input_schema: goes with one "tool"; with "tools": "*" each skill has its tool's schema`)
	}
	return Skill{
		Descriptor: protocol.SkillDescriptor{Name: sj.Name, Description: sj.Description, Tags: sj.Tags, InputSchema: schema, ReadOnly: sj.ReadOnly},
		Kind:       peek.Type,
		Handler:    h,
		Guard:      gplan,
		guardRaw:   sj.Guard,
		mcp:        m,
		fileSchema: given,
	}, nil
}

// inputSchema checks a skill's input_schema the way Registry.AddRaw
// will compile it, so that a bad schema fails the load before anything is
// registered. A missing schema means any object.
func inputSchema(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	if raw[0] != '{' {
		return nil, errors.New("must be a JSON Schema object")
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if err := checkTypeNames(doc, ""); err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	if s.Type != "object" {
		return nil, errors.New(`must have "type":"object" (arguments are always an object)`)
	}
	if _, err := s.Resolve(nil); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fieldError is a reason tied to a field of a skill's JSON; the
// handler builders return it so that their caller can prefix "handler.".
type fieldError struct {
	Field string
	Err   error
}

// Error is the field, a colon and the reason.
func (e *fieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *fieldError) Unwrap() error { return e.Err }

func fieldf(field, format string, a ...any) error {
	return &fieldError{Field: field, Err: fmt.Errorf(format, a...)}
}

// schemaTypes are the type names of JSON Schema.
var schemaTypes = map[string]bool{
	"object": true, "array": true, "string": true, "number": true,
	"integer": true, "boolean": true, "null": true,
}

// schemaData are keywords whose values are instance data, not schemas.
var schemaData = map[string]bool{"const": true, "enum": true, "default": true, "examples": true}

// checkTypeNames walks a schema document and refuses a "type" keyword
// that names no JSON Schema type. jsonschema-go does not yet check a schema
// against its meta-schema, and a misspelt type would otherwise make every
// call fail with -32602 instead of failing the load.
func checkTypeNames(v any, at string) error {
	switch v := v.(type) {
	case map[string]any:
		switch t := v["type"].(type) {
		case string:
			if !schemaTypes[t] {
				return fmt.Errorf("%s/type: %q is not a JSON Schema type", at, t)
			}
		case []any:
			for _, e := range t {
				if name, ok := e.(string); ok && !schemaTypes[name] {
					return fmt.Errorf("%s/type: %q is not a JSON Schema type", at, name)
				}
			}
		}
		for k, sub := range v {
			if schemaData[k] {
				continue
			}
			if err := checkTypeNames(sub, at+"/"+k); err != nil {
				return err
			}
		}
	case []any:
		for i, sub := range v {
			if err := checkTypeNames(sub, fmt.Sprintf("%s/%d", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeStrict decodes one JSON value into v, refusing unknown fields
// and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// jsonError words an encoding/json error about part, a part of the file
// (a skill, a handler), as protocol.JSONFileError does, without where:
// offsets within a part would mislead. A type error is a fieldError, so
// that a handler's is prefixed "handler.".
func jsonError(part []byte, err error) error {
	_ = part // valid JSON already: the whole file was decoded first
	return fileError(nil, err)
}

// fileError is jsonError for data, the whole file (nil for a part of
// it): with where.
func fileError(data []byte, err error) error {
	err = protocol.JSONFileError(data, err)
	var fe *protocol.JSONFieldError
	if errors.As(err, &fe) && fe.Field != "" {
		return fieldf(fe.Field, "%w", fe.Err)
	}
	return err
}

// parseTimeout checks a handler's timeout_s (seconds, fractions allowed).
func parseTimeout(v *float64) (time.Duration, error) {
	if v == nil {
		return DefaultTimeout, nil
	}
	if math.IsNaN(*v) || *v <= 0 || *v > MaxTimeout.Seconds() {
		return 0, fieldf("timeout_s", "%v is out of range (0, %d]", *v, int(MaxTimeout.Seconds()))
	}
	return time.Duration(*v * float64(time.Second)), nil
}

// envRef is the only form of substitution a handler's header or env
// value may hold: ${ENV:NAME}, replaced at load time by the node's
// environment variable NAME.
var envRef = regexp.MustCompile(`\$\{ENV:([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${ENV:NAME} references in v. Any other "${" is an
// error, as is a reference to an unset or empty variable: a secret silently
// missing would only surface later as a confusing remote failure.
func expandEnv(v string) (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(v, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		val, ok := os.LookupEnv(name)
		if !ok || val == "" {
			missing = append(missing, name)
		}
		return val
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set or empty", missing[0])
	}
	if strings.Contains(envRef.ReplaceAllString(v, ""), "${") {
		return "", errors.New(`only ${ENV:NAME} references are allowed`)
	}
	return out, nil
}

// envEntry checks a variable of a skill's "env" and returns it as
// NAME=value with its ${ENV:NAME} references expanded: the name must be a
// valid variable name, the value may not hold a NUL byte.
func envEntry(k, v string) (string, error) {
	if !envNameRE.MatchString(k) {
		return "", fieldf("env", "%q is not a valid variable name", k)
	}
	val, err := expandEnv(v)
	if err != nil {
		return "", fieldf("env."+k, "%w", err)
	}
	if strings.IndexByte(val, 0) >= 0 {
		return "", fieldf("env."+k, "contains a NUL byte")
	}
	return k + "=" + val, nil
}

// jsonObject checks that out is one JSON object and returns it
// compacted. The reason it gives for a refusal is fit for a remote caller.
func jsonObject(out []byte) (json.RawMessage, string) {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return nil, "empty output, want a JSON object"
	}
	if !json.Valid(out) {
		return nil, "output is not valid JSON"
	}
	if out[0] != '{' {
		var v any
		_ = json.Unmarshal(out, &v)
		kind := "a JSON value"
		switch v.(type) {
		case []any:
			kind = "a JSON array"
		case string:
			kind = "a JSON string"
		case float64:
			kind = "a JSON number"
		case bool:
			kind = "a JSON boolean"
		case nil:
			kind = "JSON null"
		}
		return nil, "output is " + kind + ", want a JSON object"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, out); err != nil {
		return nil, "output is not valid JSON"
	}
	return buf.Bytes(), ""
}

// cappedBuffer collects up to max bytes; a write beyond that fails,
// marks the buffer as overflowed and calls onOverflow once.
type cappedBuffer struct {
	buf        bytes.Buffer
	max        int64
	ctx        context.Context // optional: a write fails once it is done
	overflow   bool
	onOverflow func()
}

var errOverflow = errors.New("output limit exceeded")

// Write appends p, or fails once ctx is done or the cap would be passed.
func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.ctx != nil {
		if err := b.ctx.Err(); err != nil {
			return 0, err
		}
	}
	if b.overflow {
		return 0, errOverflow
	}
	if int64(b.buf.Len())+int64(len(p)) > b.max {
		b.overflow = true
		if b.onOverflow != nil {
			b.onOverflow()
		}
		return 0, errOverflow
	}
	return b.buf.Write(p)
}
