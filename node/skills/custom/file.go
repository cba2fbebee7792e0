package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"golang.org/x/net/http/httpguts"

	"github.com/mcpv2/mcpv2/node/guard"
	"github.com/mcpv2/mcpv2/node/llm"
	"github.com/mcpv2/mcpv2/protocol"
)

// Limits of a custom skills file (SPEC §3).
const (
	// MaxCustomFileSize is the largest custom skills file LoadCustomFile reads.
	MaxCustomFileSize = 1 << 20
	// MaxCustomSkills is the most skills one custom skills file may hold.
	MaxCustomSkills = 256
	// DefaultCustomMaxOutput is the default cap on what one custom skill call
	// may produce: template output, command stdout, HTTP answer body.
	DefaultCustomMaxOutput = 1 << 20
	// DefaultCustomTimeout is the default timeout_s of command and http handlers.
	DefaultCustomTimeout = 30 * time.Second
	// MaxCustomTimeout is the largest timeout_s a command or http handler may ask for.
	MaxCustomTimeout = 600 * time.Second
	// DefaultCustomMemoryMB is the default memory_mb (RLIMIT_AS) of a command handler.
	DefaultCustomMemoryMB = 1024
	// MaxCustomMemoryMB is the largest memory_mb a command handler may ask for.
	MaxCustomMemoryMB = 1 << 20
)

// CustomOptions configure how custom skills are built. The zero value is
// usable: each command call gets a fresh scratch directory under
// os.TempDir, at most DefaultMaxCommandRuns command calls run at once, they
// run as the node's own user, http handlers use a client with timeouts of
// its own that follows redirects only within the same host, nothing is
// logged and outputs are capped at DefaultCustomMaxOutput.
type CustomOptions struct {
	// ScratchDir is the root under which each command call gets a fresh
	// working directory (mode 0700, removed when the call ends). It is
	// created with mode 0700 at load time when a command skill needs it
	// (0711 with RunAs, so that the user can enter its own directory; the
	// directories above it must then be searchable by that user, which
	// the load checks). Empty means os.TempDir, which keeps the calls out
	// of the node's data dir: a program must not find identity.key through
	// a relative path. Do not point it into the data dir.
	ScratchDir string
	// HTTPClient sends the requests of http handlers; nil means a client
	// built for them (dial and TLS handshake timeouts of 10 s, a response
	// header timeout of the skill's timeout_s). Whatever the client, each
	// handler uses a copy whose CheckRedirect follows at most 5 redirects
	// and only to the same scheme and host (port included),
	// so the skill's headers never reach another host, and every call is
	// bounded by the skill's timeout_s.
	HTTPClient *http.Client
	// Logger receives load notes and per-call failure details (at Debug;
	// local failures such as an unremovable scratch directory at Warn).
	// Nil discards.
	Logger *slog.Logger
	// MaxOutput caps a call's output in bytes (template text, command stdout,
	// HTTP answer body); 0 means DefaultCustomMaxOutput.
	MaxOutput int64
	// BaseDir is the directory against which relative program paths in
	// command handlers (those that contain a slash, such as "./tool.sh")
	// are resolved. LoadCustomFile sets it to the directory of the file when
	// it is empty; ParseCustom leaves an empty BaseDir to mean the current
	// directory.
	BaseDir string
	// MaxCommandRuns caps how many command calls run at once, across all
	// the command skills of one ParseCustom or LoadCustomFile call (a
	// node loads one file, so the cap is per node). A call beyond it is
	// refused at once with CodeRateLimited; nothing queues. 0 means
	// DefaultMaxCommandRuns; negative is an error.
	MaxCommandRuns int
	// RunAs names a user (or a numeric uid) that command programs run as,
	// with its primary group and supplementary groups; it is resolved with
	// os/user at load time and an unknown user fails the load. It needs
	// the node to run as root, unless it names the node's own user. Empty
	// means the node's own user; when that is root, the load logs a
	// warning once.
	RunAs string

	// Set by prepare.
	runs       chan struct{}         // the command-run semaphore, MaxCommandRuns slots
	runAs      *customRunAs          // nil: the node's own user
	mcpServers map[string]*mcpServer // the file's MCP servers, by command or URL
}

// DefaultMaxCommandRuns is the default of CustomOptions.MaxCommandRuns. It
// is a constant rather than a multiple of the CPU count because what it
// bounds is mostly memory and processes, not CPU: each run may hold its
// memory_mb (1 GiB by default) and a process group, whatever the core
// count, and the bound should not grow on a larger machine that an
// operator sized for a few tools.
const DefaultMaxCommandRuns = 4

func (o CustomOptions) withDefaults() CustomOptions {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultCustomMaxOutput
	}
	return o
}

// prepare applies the defaults and builds what the handlers of one file
// share: the command-run semaphore and the resolved RunAs user.
func (o CustomOptions) prepare() (CustomOptions, error) {
	o = o.withDefaults()
	switch {
	case o.MaxCommandRuns < 0:
		return o, fmt.Errorf("max command runs: %d is negative", o.MaxCommandRuns)
	case o.MaxCommandRuns == 0:
		o.MaxCommandRuns = DefaultMaxCommandRuns
	}
	o.runs = make(chan struct{}, o.MaxCommandRuns)
	o.mcpServers = map[string]*mcpServer{}
	if o.RunAs != "" {
		ra, err := customLookupRunAs(o.RunAs)
		if err != nil {
			return o, err
		}
		o.runAs = ra
	}
	return o, nil
}

// CustomSkill is one validated custom skill, ready to be registered. Its
// Handler is safe for concurrent use.
type CustomSkill struct {
	// Descriptor is what tools/list and the agent card publish.
	Descriptor protocol.SkillDescriptor
	// Kind is the handler type: "template", "command" or "http".
	Kind string
	// Handler runs the skill; it expects arguments already validated
	// against Descriptor.InputSchema (Registry.Call does that).
	Handler Handler
	// Guard names the arguments the node's prompt-injection guard scans
	// before the skill runs (the file's "guard": {"text": "prompt"}).
	Guard map[string]guard.Kind

	// mcp is an "mcp" handler that ResolveCustomMCP has not made concrete
	// yet (Handler is nil until then); fileSchema says the file gave the
	// skill's input_schema.
	mcp        *customMCP
	fileSchema bool
	// server is the MCP server a resolved "mcp" skill calls.
	server *mcpServer
}

// LoadCustomFile reads the custom skills file at path (SPEC §3) and registers
// every skill in it into r, returning their names in file order. A bad file
// fails as a whole and registers nothing: every skill is parsed and checked
// (including name clashes with skills already in r) before the first one is
// registered. The error names the file, the skill and the reason, as in
//
//	custom skills file /x/skills.json: skill "greet": handler.template: template: greet:1: unexpected "}" in operand
//
// A missing file is an error that wraps fs.ErrNotExist, so a caller may treat
// an absent default file as "no custom skills". LoadCustomFile must not run
// concurrently with other registrations on r: the clash check and the
// registration are separate steps.
func LoadCustomFile(path string, r *Registry, opts CustomOptions) ([]string, error) {
	names, err := loadCustomFile(path, r, opts)
	if err != nil {
		return nil, fmt.Errorf("custom skills file %s: %w", path, err)
	}
	return names, nil
}

func loadCustomFile(path string, r *Registry, opts CustomOptions) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxCustomFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxCustomFileSize {
		return nil, fmt.Errorf("file is larger than %d bytes", MaxCustomFileSize)
	}
	if opts.BaseDir == "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		opts.BaseDir = filepath.Dir(abs)
	}
	skills, err := ParseCustom(data, opts)
	if err != nil {
		return nil, err
	}
	if skills, err = ResolveCustomMCP(context.Background(), skills); err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o022 != 0 {
		for _, s := range skills {
			if s.Kind == "command" {
				opts.withDefaults().Logger.Warn("custom skills file is writable by group or others; whoever can edit it can run programs as this node",
					"file", path, "mode", fi.Mode().Perm().String())
				break
			}
		}
	}
	return RegisterCustom(r, skills)
}

// RegisterCustom registers skills into r, returning their names. It first
// checks that no name is taken (in r or twice in skills) and registers
// nothing when one is. It must not run concurrently with other registrations
// on r; should one slip in between the check and the registration, the error
// says which skills were registered before it.
func RegisterCustom(r *Registry, skills []CustomSkill) ([]string, error) {
	seen := make(map[string]bool, len(skills))
	for _, s := range skills {
		name := s.Descriptor.Name
		if s.mcp != nil {
			return nil, fmt.Errorf("skill %q: an mcp handler must be resolved first (ResolveCustomMCP)", name)
		}
		if _, ok := r.Lookup(name); ok {
			return nil, fmt.Errorf("skill %q: name: %w %q (already registered)", name, ErrDuplicate, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("skill %q: name: %w %q", name, ErrDuplicate, name)
		}
		seen[name] = true
	}
	names := make([]string, 0, len(skills))
	for _, s := range skills {
		if err := r.AddRaw(s.Descriptor, s.Handler); err != nil {
			return names, fmt.Errorf("skill %q: %w (registered before the failure: %q)", s.Descriptor.Name, err, names)
		}
		if len(s.Guard) > 0 {
			if err := r.SetGuard(s.Descriptor.Name, s.Guard); err != nil {
				return names, fmt.Errorf("skill %q: %w", s.Descriptor.Name, err)
			}
		}
		names = append(names, s.Descriptor.Name)
	}
	// The MCP servers behind the skills stop with the registry.
	servers := map[*mcpServer]bool{}
	for _, s := range skills {
		if srv := s.server; srv != nil && !servers[srv] {
			servers[srv] = true
			r.addCloser(srv)
		}
	}
	return names, nil
}

// ParseCustom parses and checks the contents of a custom skills file and
// builds each skill's handler, without registering anything. The file is
//
//	{"skills": [{"name", "description"?, "tags"?, "input_schema"?, "guard"?, "handler"}]}
//
// "guard" opts the skill into the node's prompt-injection guard: it maps
// argument names to how each is scanned, "prompt" (text that reaches an
// LLM), "path" (a file path) or "sql" (a query), e.g.
// {"question": "prompt", "query": "sql"}.
//
// and a handler is one of
//
//	{"type": "template", "template": "Hello, {{.name}}!"}
//	{"type": "command", "command": ["prog", "arg"], "timeout_s"?: 30, "memory_mb"?: 1024, "env"?: {"K": "v"}}
//	{"type": "http", "url": "https://...", "timeout_s"?: 30, "headers"?: {"Authorization": "Bearer ${ENV:API_KEY}"}}
//
// Header and env values may hold ${ENV:NAME}, replaced at load time by the
// node's environment variable NAME (so that keys stay out of the file); no
// other substitution exists. A missing input_schema means any object.
//
// ParseCustom enforces the file size and skill count limits, and refuses
// unknown fields, bad or duplicate names, input schemas that do not compile
// or are not of type object, unknown handler types, templates that do not parse, programs that cannot be found, and URLs
// that are not http or https, as well as a negative opts.MaxCommandRuns and
// an opts.RunAs user that does not exist or cannot be switched to. Errors
// name the skill ("skill \"greet\": ..." or "skill #3: ..." when it has no
// usable name) and the field; they do not name the file (LoadCustomFile adds
// it). When a command skill is present, opts.ScratchDir is created.
//
// The command skills of one ParseCustom call share one cap on concurrent
// runs (opts.MaxCommandRuns). When they would run as root (the node is root
// and opts.RunAs is empty), ParseCustom logs a warning.
func ParseCustom(data []byte, opts CustomOptions) ([]CustomSkill, error) {
	opts, err := opts.prepare()
	if err != nil {
		return nil, err
	}
	if len(data) > MaxCustomFileSize {
		return nil, fmt.Errorf("file is larger than %d bytes", MaxCustomFileSize)
	}
	var file struct {
		Skills []json.RawMessage `json:"skills"`
	}
	if err := customDecodeStrict(data, &file); err != nil {
		return nil, customJSONError(data, err)
	}
	if len(file.Skills) > MaxCustomSkills {
		return nil, fmt.Errorf("%d skills, at most %d are allowed", len(file.Skills), MaxCustomSkills)
	}
	out := make([]CustomSkill, 0, len(file.Skills))
	index := make(map[string]int, len(file.Skills))
	for i, raw := range file.Skills {
		s, err := parseCustomSkill(raw, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", customSkillLabel(raw, i), err)
		}
		name := s.Descriptor.Name
		if j, ok := index[name]; ok {
			return nil, fmt.Errorf("skill %q: name: %w %q (skills #%d and #%d)", name, ErrDuplicate, name, j+1, i+1)
		}
		index[name] = i
		out = append(out, s)
	}
	if opts.runAs == nil && os.Geteuid() == 0 && slices.ContainsFunc(out, func(s CustomSkill) bool { return s.Kind == "command" }) {
		opts.Logger.Warn("command skills run as root: their programs can read and change everything the node can; name an unprivileged user to run them as (run-as)")
	}
	return out, nil
}

// customNameRE is what skill names and tags must match.
var customNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

const (
	customMaxDescription = 4096
	customMaxTags        = 16
	customMaxTemplate    = 64 << 10
	customMaxArgv        = 256
	customMaxGuardFields = 32
)

type customSkillJSON struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Tags        []string          `json:"tags"`
	InputSchema json.RawMessage   `json:"input_schema"`
	Guard       map[string]string `json:"guard"`
	Handler     json.RawMessage   `json:"handler"`
}

// customGuardKinds are the values of a custom skill's "guard" map.
var customGuardKinds = map[string]guard.Kind{"prompt": guard.Prompt, "path": guard.Path, "sql": guard.SQL}

// customGuard checks a custom skill's "guard" map.
func customGuard(m map[string]string) (map[string]guard.Kind, error) {
	if len(m) == 0 {
		return nil, nil
	}
	if len(m) > customMaxGuardFields {
		return nil, fmt.Errorf("%d fields, at most %d are allowed", len(m), customMaxGuardFields)
	}
	out := make(map[string]guard.Kind, len(m))
	for field, kind := range m {
		if field == "" || len(field) > 128 {
			return nil, fmt.Errorf("field name %q: want 1 to 128 bytes", field)
		}
		k, ok := customGuardKinds[kind]
		if !ok {
			return nil, fmt.Errorf("%q: %q is not prompt, path or sql", field, kind)
		}
		out[field] = k
	}
	return out, nil
}

// customSkillLabel names the i-th skill of a file for an error message: by
// its name when it has a string one, else by its position.
func customSkillLabel(raw json.RawMessage, i int) string {
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

func parseCustomSkill(raw json.RawMessage, opts CustomOptions) (CustomSkill, error) {
	if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return CustomSkill{}, errors.New("not a JSON object")
	}
	var sj customSkillJSON
	if err := customDecodeStrict(raw, &sj); err != nil {
		return CustomSkill{}, customJSONError(raw, err)
	}
	if !customNameRE.MatchString(sj.Name) {
		return CustomSkill{}, fmt.Errorf("name: %q must match %s", sj.Name, customNameRE)
	}
	if len(sj.Description) > customMaxDescription {
		return CustomSkill{}, fmt.Errorf("description: longer than %d bytes", customMaxDescription)
	}
	if len(sj.Tags) > customMaxTags {
		return CustomSkill{}, fmt.Errorf("tags: %d tags, at most %d are allowed", len(sj.Tags), customMaxTags)
	}
	for i, t := range sj.Tags {
		if !customNameRE.MatchString(t) {
			return CustomSkill{}, fmt.Errorf("tags[%d]: %q must match %s", i, t, customNameRE)
		}
	}
	schema, err := customInputSchema(sj.InputSchema)
	if err != nil {
		return CustomSkill{}, fmt.Errorf("input_schema: %w", err)
	}
	gfields, err := customGuard(sj.Guard)
	if err != nil {
		return CustomSkill{}, fmt.Errorf("guard: %w", err)
	}
	if len(bytes.TrimSpace(sj.Handler)) == 0 || bytes.Equal(bytes.TrimSpace(sj.Handler), []byte("null")) {
		return CustomSkill{}, errors.New("handler: missing")
	}
	var peek struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(sj.Handler, &peek); err != nil {
		return CustomSkill{}, fmt.Errorf("handler: %w", customJSONError(sj.Handler, err))
	}
	var h Handler
	var m *customMCP
	switch peek.Type {
	case "template":
		h, err = newCustomTemplate(sj.Name, sj.Handler, opts)
	case "command":
		var c *customCommand
		if c, err = newCustomCommand(sj.Name, sj.Handler, opts); err == nil {
			h = c.run
		}
	case "http":
		h, err = newCustomHTTP(sj.Name, sj.Handler, opts)
	case "mcp":
		m, err = newCustomMCP(sj.Name, sj.Handler, opts)
	case "":
		err = customFieldf("type", "missing (want template, command, http or mcp)")
	default:
		err = customFieldf("type", "unknown handler type %q (want template, command, http or mcp)", peek.Type)
	}
	if err != nil {
		if fe, ok := err.(*customFieldError); ok {
			return CustomSkill{}, fmt.Errorf("handler.%s: %w", fe.Field, fe.Err)
		}
		return CustomSkill{}, fmt.Errorf("handler: %w", err)
	}
	given := len(bytes.TrimSpace(sj.InputSchema)) > 0 && !bytes.Equal(bytes.TrimSpace(sj.InputSchema), []byte("null"))
	if m != nil && m.all && given {
		return CustomSkill{}, errors.New(`input_schema: goes with one "tool"; with "tools": "*" each skill has its tool's schema`)
	}
	return CustomSkill{
		Descriptor: protocol.SkillDescriptor{Name: sj.Name, Description: sj.Description, Tags: sj.Tags, InputSchema: schema},
		Kind:       peek.Type,
		Handler:    h,
		Guard:      gfields,
		mcp:        m,
		fileSchema: given,
	}, nil
}

// customInputSchema checks a skill's input_schema the way Registry.AddRaw
// will compile it, so that a bad schema fails the load before anything is
// registered. A missing schema means any object.
func customInputSchema(raw json.RawMessage) (json.RawMessage, error) {
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
	if err := customCheckTypeNames(doc, ""); err != nil {
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

// customFieldError is a reason tied to a field of a skill's JSON; the
// handler builders return it so that their caller can prefix "handler.".
type customFieldError struct {
	Field string
	Err   error
}

func (e *customFieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *customFieldError) Unwrap() error { return e.Err }

func customFieldf(field, format string, a ...any) error {
	return &customFieldError{Field: field, Err: fmt.Errorf(format, a...)}
}

// customSchemaTypes are the type names of JSON Schema.
var customSchemaTypes = map[string]bool{
	"object": true, "array": true, "string": true, "number": true,
	"integer": true, "boolean": true, "null": true,
}

// customSchemaData are keywords whose values are instance data, not schemas.
var customSchemaData = map[string]bool{"const": true, "enum": true, "default": true, "examples": true}

// customCheckTypeNames walks a schema document and refuses a "type" keyword
// that names no JSON Schema type. jsonschema-go does not yet check a schema
// against its meta-schema, and a misspelt type would otherwise make every
// call fail with -32602 instead of failing the load.
func customCheckTypeNames(v any, at string) error {
	switch v := v.(type) {
	case map[string]any:
		switch t := v["type"].(type) {
		case string:
			if !customSchemaTypes[t] {
				return fmt.Errorf("%s/type: %q is not a JSON Schema type", at, t)
			}
		case []any:
			for _, e := range t {
				if name, ok := e.(string); ok && !customSchemaTypes[name] {
					return fmt.Errorf("%s/type: %q is not a JSON Schema type", at, name)
				}
			}
		}
		for k, sub := range v {
			if customSchemaData[k] {
				continue
			}
			if err := customCheckTypeNames(sub, at+"/"+k); err != nil {
				return err
			}
		}
	case []any:
		for i, sub := range v {
			if err := customCheckTypeNames(sub, fmt.Sprintf("%s/%d", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// customDecodeStrict decodes one JSON value into v, refusing unknown fields
// and trailing data.
func customDecodeStrict(data []byte, v any) error {
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

// customJSONError rewrites encoding/json errors into messages that speak of
// JSON fields and types (not Go struct names) and give line and column.
func customJSONError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := customLineCol(data, se.Offset)
		return fmt.Errorf("invalid JSON at line %d, column %d: %s", line, col, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("invalid JSON: unexpected end of input")
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Errorf("got a JSON %s, want %s", te.Value, customJSONTypeName(te.Type))
		}
		return customFieldf(te.Field, "got a JSON %s, want %s", te.Value, customJSONTypeName(te.Type))
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

func customLineCol(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	prefix := data[:off]
	line = bytes.Count(prefix, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(prefix, '\n') + 1)
	return line, max(col, 1)
}

func customJSONTypeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return "an object of strings"
		}
		return "an object"
	case reflect.Struct:
		return "an object"
	}
	return t.String()
}

// customTimeout checks a handler's timeout_s (seconds, fractions allowed).
func customTimeout(v *float64) (time.Duration, error) {
	if v == nil {
		return DefaultCustomTimeout, nil
	}
	if math.IsNaN(*v) || *v <= 0 || *v > MaxCustomTimeout.Seconds() {
		return 0, customFieldf("timeout_s", "%v is out of range (0, %d]", *v, int(MaxCustomTimeout.Seconds()))
	}
	return time.Duration(*v * float64(time.Second)), nil
}

// customEnvRef is the only form of substitution a handler's header or env
// value may hold: ${ENV:NAME}, replaced at load time by the node's
// environment variable NAME.
var customEnvRef = regexp.MustCompile(`\$\{ENV:([A-Za-z_][A-Za-z0-9_]*)\}`)

// customExpandEnv replaces ${ENV:NAME} references in v. Any other "${" is an
// error, as is a reference to an unset or empty variable: a secret silently
// missing would only surface later as a confusing remote failure.
func customExpandEnv(v string) (string, error) {
	var missing []string
	out := customEnvRef.ReplaceAllStringFunc(v, func(ref string) string {
		name := customEnvRef.FindStringSubmatch(ref)[1]
		val, ok := os.LookupEnv(name)
		if !ok || val == "" {
			missing = append(missing, name)
		}
		return val
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set or empty", missing[0])
	}
	if strings.Contains(customEnvRef.ReplaceAllString(v, ""), "${") {
		return "", errors.New(`only ${ENV:NAME} references are allowed`)
	}
	return out, nil
}

// customJSONObject checks that out is one JSON object and returns it
// compacted. The reason it gives for a refusal is fit for a remote caller.
func customJSONObject(out []byte) (json.RawMessage, string) {
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

// customCappedBuffer collects up to max bytes; a write beyond that fails,
// marks the buffer as overflowed and calls onOverflow once.
type customCappedBuffer struct {
	buf        bytes.Buffer
	max        int64
	ctx        context.Context // optional: a write fails once it is done
	overflow   bool
	onOverflow func()
}

var errCustomOverflow = errors.New("output limit exceeded")

func (b *customCappedBuffer) Write(p []byte) (int, error) {
	if b.ctx != nil {
		if err := b.ctx.Err(); err != nil {
			return 0, err
		}
	}
	if b.overflow {
		return 0, errCustomOverflow
	}
	if int64(b.buf.Len())+int64(len(p)) > b.max {
		b.overflow = true
		if b.onOverflow != nil {
			b.onOverflow()
		}
		return 0, errCustomOverflow
	}
	return b.buf.Write(p)
}

// ---- template handler ----

type customTemplateJSON struct {
	Type     string `json:"type"`
	Template string `json:"template"`
}

// customTemplateFuncs are the functions a template may use besides
// text/template's built-ins.
var customTemplateFuncs = template.FuncMap{
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

// newCustomTemplate builds a template handler: Go text/template executed
// over the decoded arguments (a map[string]any with numbers kept as
// json.Number, so that integers print exactly). A missing key prints
// "<no value>" as text/template does; the input schema is where required
// arguments are enforced. Besides the built-ins, templates may use json,
// upper, lower, trim and join.
func newCustomTemplate(name string, raw json.RawMessage, opts CustomOptions) (Handler, error) {
	var tj customTemplateJSON
	if err := customDecodeStrict(raw, &tj); err != nil {
		return nil, customJSONError(raw, err)
	}
	if tj.Template == "" {
		return nil, customFieldf("template", "missing")
	}
	if len(tj.Template) > customMaxTemplate {
		return nil, customFieldf("template", "longer than %d bytes", customMaxTemplate)
	}
	tmpl, err := template.New(name).Funcs(customTemplateFuncs).Parse(tj.Template)
	if err != nil {
		return nil, customFieldf("template", "%w", err)
	}
	log, maxOut := opts.Logger, opts.MaxOutput
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
		out := &customCappedBuffer{max: maxOut, ctx: ctx}
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

// ---- http handler ----

type customHTTPJSON struct {
	Type     string            `json:"type"`
	URL      string            `json:"url"`
	TimeoutS *float64          `json:"timeout_s"`
	Headers  map[string]string `json:"headers"`
}

// customReservedHeaders may not be set by a skills file: the handler or
// net/http owns them.
var customReservedHeaders = map[string]bool{
	"Host": true, "Content-Type": true, "Content-Length": true,
	"Transfer-Encoding": true, "Connection": true,
}

// newCustomHTTP builds an http handler: the arguments are POSTed as
// application/json to url and the JSON object answer is the result. Header
// values may reference the node's environment only as ${ENV:NAME}, resolved
// here at load time, so that keys stay out of the file. The client (see
// customHTTPClient) follows redirects only within the url's scheme and
// host, so those headers reach no other host; each call, answer body
// included, ends after the skill's timeout and reads at most
// opts.MaxOutput bytes of answer.
func newCustomHTTP(name string, raw json.RawMessage, opts CustomOptions) (Handler, error) {
	var hj customHTTPJSON
	if err := customDecodeStrict(raw, &hj); err != nil {
		return nil, customJSONError(raw, err)
	}
	if hj.URL == "" {
		return nil, customFieldf("url", "missing")
	}
	u, err := url.Parse(hj.URL)
	if err != nil {
		return nil, customFieldf("url", "%w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, customFieldf("url", "scheme %q is not allowed (want http or https)", u.Scheme)
	case u.Host == "":
		return nil, customFieldf("url", "no host")
	case u.User != nil:
		return nil, customFieldf("url", "credentials in the URL are not allowed (use headers with ${ENV:NAME})")
	}
	timeout, err := customTimeout(hj.TimeoutS)
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	for k, v := range hj.Headers {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, customFieldf("headers", "%q is not a valid header name", k)
		}
		if customReservedHeaders[http.CanonicalHeaderKey(k)] {
			return nil, customFieldf("headers."+k, "may not be set")
		}
		val, err := customExpandEnv(v)
		if err != nil {
			return nil, customFieldf("headers."+k, "%w", err)
		}
		if !httpguts.ValidHeaderFieldValue(val) {
			return nil, customFieldf("headers."+k, "not a valid header value")
		}
		header.Set(k, val)
	}
	target, client, log, maxOut := u.String(), customHTTPClient(opts.HTTPClient, timeout), opts.Logger, opts.MaxOutput
	fail := func(format string, a ...any) error {
		return protocol.Errorf(protocol.CodeToolExecution, "http skill %q: "+format, append([]any{name}, a...)...)
	}
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodPost, target, bytes.NewReader(args))
		if err != nil {
			log.Warn("custom http request not built", "skill", name, "err", err)
			return nil, fail("request failed")
		}
		req.Header = header.Clone()
		req.Header.Set("Content-Type", "application/json")
		if req.Header.Get("Accept") == "" {
			req.Header.Set("Accept", "application/json")
		}
		// failed words a transport failure: canceled, timed out, or what
		// (the detail names the service's address: logged, never sent).
		failed := func(what string, err error) error {
			switch {
			case ctx.Err() != nil:
				return fail("canceled")
			case errors.Is(rctx.Err(), context.DeadlineExceeded):
				return fail("timed out after %v", timeout)
			}
			log.Debug("custom http "+what, "skill", name, "err", err)
			return fail("%s", what)
		}
		resp, err := client.Do(req)
		if err != nil {
			var re *customRedirectError
			if errors.As(err, &re) {
				log.Debug("custom http redirect refused", "skill", name, "err", err)
				return nil, fail("%s", re.reason)
			}
			return nil, failed("request failed", err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxOut+1))
		if err != nil {
			return nil, failed("reading the answer failed", err)
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			log.Debug("custom http status", "skill", name, "status", resp.Status)
			return nil, fail("status %s", resp.Status)
		}
		if int64(len(body)) > maxOut {
			return nil, fail("answer exceeds %d bytes", maxOut)
		}
		obj, why := customJSONObject(body)
		if why != "" {
			return nil, fail("%s", strings.Replace(why, "output", "answer", 1))
		}
		return obj, nil
	}, nil
}

// Bounds of the http handlers' client.
const (
	// customMaxRedirects is how many redirects one call follows.
	customMaxRedirects = 5
	// customDialTimeout bounds connecting to the service.
	customDialTimeout = 10 * time.Second
	// customTLSTimeout bounds the TLS handshake with the service.
	customTLSTimeout = 10 * time.Second
	// customMaxHeaderBytes caps the service's response header.
	customMaxHeaderBytes = 64 << 10
)

// customRedirectError is a redirect the http handlers' client refused. Its
// reason is fit for a remote caller (it names no host); Error adds the
// target, for the log.
type customRedirectError struct {
	reason string
	to     string
}

func (e *customRedirectError) Error() string { return e.reason + " (to " + e.to + ")" }

// customHTTPClient returns the client of one http handler whose calls last
// at most timeout. With base nil it is a client of its own: a transport
// cloned from http.DefaultTransport (proxy from the environment, HTTP/2)
// with dial and TLS handshake timeouts, a response header timeout of
// timeout and a capped header size. With base given, a copy of base with
// its transport. Either way its CheckRedirect is customCheckRedirect. The
// overall per-call bound is the call's context deadline, set by the
// handler, which also covers reading the body; Client.Timeout is left
// alone so that an expiry is always reported as the skill's timeout.
func customHTTPClient(base *http.Client, timeout time.Duration) *http.Client {
	var c http.Client
	if base != nil {
		c = *base
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = (&net.Dialer{Timeout: customDialTimeout, KeepAlive: 30 * time.Second}).DialContext
		tr.TLSHandshakeTimeout = customTLSTimeout
		tr.ResponseHeaderTimeout = timeout
		tr.MaxResponseHeaderBytes = customMaxHeaderBytes
		c.Transport = tr
	}
	c.CheckRedirect = customCheckRedirect
	return &c
}

// customCheckRedirect follows at most customMaxRedirects redirects, and
// only to the scheme and host (port included, default ports made explicit)
// of the first request: net/http copies every header of the first request
// into a redirect except a few sensitive ones, so a custom header such as
// X-Api-Key would otherwise reach whatever host the service names.
func customCheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > customMaxRedirects {
		return &customRedirectError{reason: fmt.Sprintf("stopped after %d redirects", customMaxRedirects), to: req.URL.Redacted()}
	}
	if !llm.SameOrigin(via[0].URL, req.URL) {
		return &customRedirectError{reason: "redirect to another host refused (redirects are followed only within the same scheme and host)", to: req.URL.Redacted()}
	}
	return nil
}
