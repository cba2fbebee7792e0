// Package skills holds the typed skill registry and the standard skills of
// SPEC §3 (the custom skills of a skills file are package custom's). A
// skill is written once and every face of a node (mesh, HTTP edge, MCP,
// A2A) calls it through the same Registry.Call.
package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"reflect"
	"slices"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpv2/mcpv2/internal/suggest"
	"github.com/mcpv2/mcpv2/node/guard"
	"github.com/mcpv2/mcpv2/protocol"
)

// Handler runs a skill on raw JSON arguments that have already been validated
// against the skill's input schema. A *protocol.Error return reaches the
// caller as is; any other error becomes CodeSkillExecution with a generic
// message (the detail is logged, never sent: it may hold host paths).
type Handler func(ctx context.Context, args json.RawMessage) (any, error)

type entry struct {
	desc   protocol.SkillDescriptor
	schema *jsonschema.Resolved
	// quick, when set, accepts most valid arguments without schema.
	quick   *quickSchema
	handler Handler
	// guard says which arguments the prompt-injection guard scans, and
	// how (nil: none). Every skill starts with guard.DefaultPlan.
	guard *guard.Plan
}

// Registry maps skill names to handlers. It is safe for concurrent use; mu
// guards byName, order, closers and closed. Skills are listed in
// registration order.
type Registry struct {
	log     *slog.Logger
	mu      sync.RWMutex
	byName  map[string]*entry
	order   []string
	closers []io.Closer // what the skills hold open (a custom.Loader), closed by Close
	closed  bool
}

// NewRegistry returns an empty registry. A nil logger discards.
func NewRegistry(log *slog.Logger) *Registry {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Registry{log: log, byName: map[string]*entry{}}
}

// AddCloser makes Close close c: what registered skills hold open, such as
// the custom.Loader that owns the MCP servers of custom skills. Closers
// are closed in the order they were added. After Close, c is closed at
// once (its error is dropped: there is no Close left to return it).
func (r *Registry) AddCloser(c io.Closer) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		_ = c.Close()
		return
	}
	defer r.mu.Unlock()
	r.closers = append(r.closers, c)
}

// Close stops what the registered skills hold open (see AddCloser), such
// as the MCP servers of custom skills, and returns their errors joined. The
// node calls it when it stops; a call after it fails as its skill says. A
// second Close returns net.ErrClosed.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return net.ErrClosed
	}
	r.closed = true
	cs := r.closers
	r.closers = nil
	r.mu.Unlock()
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// AddOption adjusts a skill that Add registers: a SchemaOption, or
// ReadOnly.
type AddOption interface {
	apply(*jsonschema.Schema, *protocol.SkillDescriptor)
}

// SchemaOption adjusts an inferred input schema (enums, bounds, descriptions
// that struct tags cannot express).
type SchemaOption func(*jsonschema.Schema)

func (o SchemaOption) apply(s *jsonschema.Schema, _ *protocol.SkillDescriptor) { o(s) }

type readOnly struct{}

func (readOnly) apply(_ *jsonschema.Schema, d *protocol.SkillDescriptor) { d.ReadOnly = true }

// ReadOnly declares the skill free of side effects (SkillDescriptor.ReadOnly,
// the MCP face's readOnlyHint).
func ReadOnly() AddOption { return readOnly{} }

// schemaOptions maps types whose Go shape says nothing of their JSON shape.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {},
}}

// Add registers a typed skill: the input schema is inferred from In's struct
// fields and `jsonschema` tags, arguments are validated against it and
// decoded into In before fn runs. It panics when the name is taken or the
// schema cannot be built: both are programming errors found at start-up.
func Add[In, Out any](r *Registry, name, description string, tags []string, fn func(context.Context, In) (Out, error), opts ...AddOption) {
	s, err := jsonschema.For[In](schemaOptions)
	if err != nil {
		panic(fmt.Sprintf("skills: schema of %q: %v", name, err))
	}
	d := protocol.SkillDescriptor{Name: name, Description: description, Tags: tags}
	for _, o := range opts {
		o.apply(s, &d)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("skills: schema of %q: %v", name, err))
	}
	h := func(ctx context.Context, args json.RawMessage) (any, error) {
		var in In
		if err := protocol.Unmarshal(args, &in); err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: %v", name, err)
		}
		return fn(ctx, in)
	}
	d.InputSchema = raw
	if err := r.AddRaw(d, h); err != nil {
		panic(err.Error())
	}
}

// ErrDuplicate is returned by AddRaw when a skill of that name exists.
var ErrDuplicate = errors.New("skills: duplicate skill name")

// AddRaw registers a skill from a descriptor whose InputSchema is a JSON
// Schema document (nil means any object). It fails when the name is empty or
// taken, or the schema does not compile.
func (r *Registry) AddRaw(d protocol.SkillDescriptor, h Handler) error {
	if d.Name == "" {
		return errors.New("skills: a skill needs a name")
	}
	if len(d.InputSchema) == 0 {
		d.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	if d.Tags == nil {
		d.Tags = []string{}
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(d.InputSchema, &s); err != nil {
		return fmt.Errorf("skills: schema of %q: %w", d.Name, err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return fmt.Errorf("skills: schema of %q: %w", d.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byName[d.Name]; ok {
		return fmt.Errorf("%w %q", ErrDuplicate, d.Name)
	}
	r.byName[d.Name] = &entry{desc: d, schema: rs, quick: newQuickSchema(d.InputSchema), handler: h,
		guard: guard.DefaultPlan(d.Name, d.Tags, d.InputSchema)}
	r.order = append(r.order, d.Name)
	return nil
}

// Remove unregisters the named skill and reports whether it was there: a
// bridged agent's skill when the operator stops bridging it. A call that
// already looked the skill up finishes.
func (r *Registry) Remove(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byName[name]; !ok {
		return false
	}
	delete(r.byName, name)
	r.order = slices.DeleteFunc(r.order, func(n string) bool { return n == name })
	return true
}

// List returns the descriptors of all skills in registration order.
func (r *Registry) List() []protocol.SkillDescriptor {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]protocol.SkillDescriptor, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.byName[n].desc)
	}
	return out
}

// SetGuard gives arguments of skill their kinds for the node's
// prompt-injection guard (docs/guard.md): text that reaches an LLM, a file
// path, an SQL query, or guard.Off to skip one. They win over what the
// skill's plan chose before (the default: every string argument scanned,
// its kind from its schema's format or its name); the other arguments keep
// it. It fails for an unknown skill.
func (r *Registry) SetGuard(skill string, fields map[string]guard.Kind) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byName[skill]
	if !ok {
		return fmt.Errorf("skills: guard: no skill %q", skill)
	}
	p := &guard.Plan{Rest: guard.Auto}
	if e.guard != nil {
		cp := *e.guard
		p = &cp
	}
	p.Fields = maps.Clone(p.Fields)
	if p.Fields == nil {
		p.Fields = make(map[string]guard.Kind, len(fields))
	}
	maps.Copy(p.Fields, fields)
	e.guard = p
	return nil
}

// SetGuardPlan replaces the guard's plan for skill: nil opts the skill
// out of the guard altogether (its arguments are never scanned). It fails
// for an unknown skill. The plan must not be modified afterwards.
func (r *Registry) SetGuardPlan(skill string, p *guard.Plan) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byName[skill]
	if !ok {
		return fmt.Errorf("skills: guard: no skill %q", skill)
	}
	e.guard = p
	return nil
}

// GuardPlan returns the guard's plan for skill (nil: its arguments are not
// scanned, or there is no such skill). It must not be modified.
func (r *Registry) GuardPlan(skill string) *guard.Plan {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if e, ok := r.byName[skill]; ok {
		return e.guard
	}
	return nil
}

// Lookup returns the descriptor of the named skill.
func (r *Registry) Lookup(name string) (protocol.SkillDescriptor, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.byName[name]
	if !ok {
		return protocol.SkillDescriptor{}, false
	}
	return e.desc, true
}

// Names returns the skill names in registration order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.order)
}

// NotFound is the one "no such skill" error of every face (mesh, HTTP
// edge, MCP, A2A): CodeSkillNotFound naming the skill, with a did-you-mean
// over this registry's skills when one is a slip away (`skill "pnig" not
// found (did you mean "ping"?)`), else where to look. The faces pass the
// message through, so each inherits the suggestion.
func (r *Registry) NotFound(name string) *protocol.Error {
	if hint := suggest.Hint(name, r.Names()); hint != "" {
		return protocol.Errorf(protocol.CodeSkillNotFound, "skill %q not found%s", name, hint)
	}
	return protocol.Errorf(protocol.CodeSkillNotFound, "skill %q not found: tools/list names this node's skills", name)
}

// Call validates args against the named skill's schema and runs it. args
// must be one valid JSON value, as a slot's arguments are once ParseRequest
// has decoded the slot (the node's dispatch is the caller); missing or null
// args are an empty object. Errors are always *protocol.Error:
// CodeSkillNotFound, CodeInvalidParams, the handler's own, or
// CodeSkillExecution. args need only be valid during the call.
func (r *Registry) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	out, raw, err := r.run(ctx, name, args)
	if err != nil || raw != nil {
		return raw, err
	}
	return r.encode(nil, name, out)
}

// AppendCall is Call appending the result to dst, for a caller that
// writes results into a buffer of its own (the node's dispatch, into a
// pooled one): a result that writes itself (ping's) is then written
// once, where it is used, with no allocation. On error dst is returned
// as it was.
func (r *Registry) AppendCall(ctx context.Context, dst []byte, name string, args json.RawMessage) ([]byte, error) {
	out, raw, err := r.run(ctx, name, args)
	switch {
	case err != nil:
		return dst, err
	case raw != nil:
		return append(dst, raw...), nil
	}
	b, err := r.encode(dst, name, out)
	if err != nil {
		return dst, err
	}
	return b, nil
}

// run checks args and runs the skill: its result is out, or raw when the
// handler returned JSON text (valid, checked here).
func (r *Registry) run(ctx context.Context, name string, args json.RawMessage) (out any, raw json.RawMessage, err error) {
	r.mu.RLock()
	e, ok := r.byName[name]
	r.mu.RUnlock()
	if !ok {
		return nil, nil, r.NotFound(name)
	}
	args = bytes.TrimSpace(args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = json.RawMessage("{}")
	}
	if e.quick == nil || !e.quick.acceptsRaw(args) {
		var inst any
		if err := protocol.Unmarshal(args, &inst); err != nil {
			return nil, nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: arguments are not JSON", name)
		}
		if e.quick == nil || !e.quick.accepts(inst) {
			if err := e.schema.Validate(inst); err != nil {
				return nil, nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: %v", name, err)
			}
		}
	}
	out, err = e.handler(ctx, args)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, nil, pe
		}
		r.log.Warn("skill failed", "skill", name, "err", err)
		return nil, nil, protocol.Errorf(protocol.CodeSkillExecution, "skill %s failed", name)
	}
	if raw, ok := out.(json.RawMessage); ok {
		// Responses carry results as they are (protocol.AppendResponses):
		// a raw result must be valid JSON here.
		if !protocol.ValidJSON(raw) {
			r.log.Warn("skill result is not valid JSON", "skill", name)
			return nil, nil, protocol.Errorf(protocol.CodeInternal, "skill %s returned an unencodable result", name)
		}
		return nil, raw, nil // not nil: ValidJSON refuses empty text
	}
	return out, nil, nil
}

// encode appends the JSON of the result out to dst (nil: a buffer of its
// own), as json.Marshal writes it.
func (r *Registry) encode(dst []byte, name string, out any) ([]byte, error) {
	raw, err := json.Marshal(out)
	if err != nil {
		r.log.Warn("skill result not encodable", "skill", name, "err", err)
		return nil, protocol.Errorf(protocol.CodeInternal, "skill %s returned an unencodable result", name)
	}
	if dst == nil {
		return raw, nil
	}
	return append(dst, raw...), nil
}

// CallInfo describes who is calling a skill and how; the dispatcher puts it in
// the context before Call.
type CallInfo struct {
	// Caller is the caller's identity: a PeerID on the mesh, "ip:ADDR" on the edge.
	Caller string
	// Via is "mesh", "http", "mcp" or "local".
	Via string
	// Provider is the slot's context.provider, if any.
	Provider string
	// Kind is how the caller was authenticated; a mesh peer that presented
	// a valid mesh session counts as a secret holder.
	Kind protocol.CallerKind
}

type callInfoKey struct{}

// WithCallInfo returns ctx carrying ci.
func WithCallInfo(ctx context.Context, ci CallInfo) context.Context {
	// One allocation, the context and ci together; context.WithValue would
	// box ci in a second.
	return &callInfoCtx{Context: ctx, ci: ci}
}

// callInfoCtx is a context carrying a CallInfo (WithCallInfo).
type callInfoCtx struct {
	context.Context
	ci CallInfo
}

// Value returns the CallInfo for callInfoKey, else the parent's value.
func (c *callInfoCtx) Value(key any) any {
	if _, ok := key.(callInfoKey); ok {
		return c.ci
	}
	return c.Context.Value(key)
}

// String names the context as context.WithValue's do.
func (c *callInfoCtx) String() string {
	return fmt.Sprintf("%v.WithValue(skills.CallInfo)", c.Context)
}

// CallInfoFrom returns the CallInfo in ctx, or a zero CallInfo.
func CallInfoFrom(ctx context.Context) CallInfo {
	ci, _ := ctx.Value(callInfoKey{}).(CallInfo)
	return ci
}
