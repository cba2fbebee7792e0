package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
)

// The internal, provider-neutral representation of a history. Every decoder
// produces it and every encoder consumes it. It holds the union of what the
// four formats can say; an encoder writes what its format holds and puts the
// rest in the side field (see sideField), which its decoder reads back, so
// that decode(encode(h)) == h for every format.
//
// To keep encoders and decoders from drifting apart, an encoder does not
// predict what its decoder will make of a part: it writes the part, decodes
// what it wrote, and records the difference in the side field (diffPart); a
// part whose difference a side field cannot tell is put there whole.

// Roles of a message.
const (
	roleSystem    = "system"
	roleUser      = "user" // also carries tool results
	roleAssistant = "assistant"
)

// Kinds of a part.
const (
	kindText       = "text"
	kindMedia      = "media" // an image, or other media Gemini and openai's input_audio carry
	kindThinking   = "thinking"
	kindToolCall   = "tool_call"
	kindToolResult = "tool_result"
	kindOpaque     = "opaque" // a block only its own provider knows, kept whole
)

// Sources of media.
const (
	srcBase64 = "base64"
	srcURL    = "url"
)

// Shapes of a content container. A format writes content in its natural shape
// (a bare string for one plain text, an array otherwise, null or nothing for
// no content where the format allows it); a message or tool result whose
// content came in another shape records it as its form.
const (
	shapeString = "string"
	shapeArray  = "array"
	shapeAbsent = "absent"
	shapeNull   = "null"
)

// message is one turn of a history.
type message struct {
	role  string // roleSystem, roleUser or roleAssistant
	alias string // the original spelling of the role: "developer" (openai) or "function" (gemini)
	name  string // the author's name (openai and deepseek "name")
	form  string // the shape the content came in when it is not the natural one
	parts []*part
	extra extras // fields no decoder knew
}

// part is one block of a message's content.
type part struct {
	kind    string
	text    string // text and thinking
	refusal bool   // text that is openai's refusal

	// media
	src       string // srcBase64 or srcURL
	mediaType string
	data      string // base64
	url       string
	detail    string // openai's image detail

	// an opaque signature over the part, and the provider that issued it
	sig, sigFrom string

	// tool call and tool result
	id        string
	synthetic bool   // the id was made up for a Gemini call or response that had none
	name      string // the tool's name; for a result only when it differs from its call's
	args      string // the call's arguments, exactly as the source wrote them
	isError   *bool
	content   []*part // the result's content: text, media and opaque parts
	form      string  // the shape the result's content came in, as message.form

	// opaque
	provider string
	raw      json.RawMessage // the whole block, compacted

	extra extras

	// Transient, never compared nor written: where the part came from (for
	// errors), and for a Gemini call or response without an id, its position.
	where string
	noID  bool
	pos   string
}

// extras holds the fields that a decoder did not know, by provider and then
// by field name, values compacted. A field of a known nested object (an image
// source, a function) is held under the nested object's name, as an object of
// the unknown fields; a name never clashes with an unknown field because it is
// a known one.
type extras map[string]map[string]json.RawMessage

// with returns e with fields added for provider, when there are any.
func (e extras) with(provider string, fields map[string]json.RawMessage) extras {
	if len(fields) == 0 {
		return e
	}
	if e == nil {
		e = extras{}
	}
	e[provider] = fields
	return e
}

// except returns the entries of e for providers other than provider, or nil.
func (e extras) except(provider string) extras {
	var out extras
	for p, f := range e {
		if p != provider {
			out = out.with(p, f)
		}
	}
	return out
}

func knownProvider(p string) bool {
	return p == provClaude || p == provOpenAI || p == provGemini || p == provDeepSeek
}

func isOpenAIFamily(p string) bool { return p == provOpenAI || p == provDeepSeek }

// isPlain reports whether p can be written as a bare string by provider: a
// text part without fields of that provider's own (and for openai, not a
// refusal).
func isPlain(p *part, provider string) bool {
	return p.kind == kindText && len(p.extra[provider]) == 0 && !(p.refusal && provider == provOpenAI)
}

// naturalShape is the shape a format writes parts in: zero for no parts where
// the format allows it ("" when it does not), a string for one plain text
// part, an array otherwise.
func naturalShape(parts []*part, provider, zero string) string {
	if len(parts) == 0 && zero != "" {
		return zero
	}
	if len(parts) == 1 && isPlain(parts[0], provider) {
		return shapeString
	}
	return shapeArray
}

// formOf is the form to record for content that came in shape.
func formOf(shape, natural string) string {
	if shape == natural {
		return ""
	}
	return shape
}

// pickShape chooses the shape to write parts in: the recorded form when the
// parts and the position allow it (empties are the shapes of no content the
// position accepts), else the natural shape.
func pickShape(form, natural string, parts []*part, provider string, empties ...string) string {
	switch form {
	case shapeString:
		if len(parts) == 1 && isPlain(parts[0], provider) {
			return shapeString
		}
	case shapeArray:
		return shapeArray
	case shapeAbsent, shapeNull:
		if len(parts) == 0 && slices.Contains(empties, form) {
			return form
		}
	}
	return natural
}

func validForm(f string) bool {
	return f == "" || f == shapeString || f == shapeArray || f == shapeAbsent || f == shapeNull
}

// --- The side field

// sideField is the "mcpv2" object on a message: what the message's format
// could not hold. docs/translate.md documents it; every field is optional.
type sideField struct {
	Role    string               `json:"role,omitempty"`    // the role's original spelling
	Name    *string              `json:"name,omitempty"`    // the author's name
	Form    string               `json:"form,omitempty"`    // the content's original shape
	Split   bool                 `json:"split,omitempty"`   // openai/deepseek: this message starts a new group
	Order   []int                `json:"order,omitempty"`   // openai/deepseek: the parts' original order
	Extra   extras               `json:"extra,omitempty"`   // unknown message fields of other formats
	Parts   map[string]*partSide `json:"parts,omitempty"`   // what kept parts lost, by part index
	Dropped []dropped            `json:"dropped,omitempty"` // parts the format cannot hold at all
}

// partSide is what one kept part lost in the target format.
type partSide struct {
	Refusal       bool        `json:"refusal,omitempty"`
	IsError       *bool       `json:"is_error,omitempty"`
	Detail        *string     `json:"detail,omitempty"`
	MediaType     *string     `json:"media_type,omitempty"`
	Signature     *string     `json:"signature,omitempty"`
	SignatureFrom string      `json:"signature_from,omitempty"`
	SyntheticID   bool        `json:"synthetic_id,omitempty"`
	Arguments     *string     `json:"arguments,omitempty"`
	Name          *string     `json:"name,omitempty"`
	Content       *[]wirePart `json:"content,omitempty"`
	Form          string      `json:"form,omitempty"`
	Extra         extras      `json:"extra,omitempty"`
}

// dropped is a part the target format cannot hold, with its index in the
// message's parts.
type dropped struct {
	At   int      `json:"at"`
	Part wirePart `json:"part"`
}

// wirePart is a part written out in the side field.
type wirePart struct {
	Type          string          `json:"type"`
	Text          *string         `json:"text,omitempty"`
	Refusal       bool            `json:"refusal,omitempty"`
	MediaType     string          `json:"media_type,omitempty"`
	Data          *string         `json:"data,omitempty"`
	URL           *string         `json:"url,omitempty"`
	Detail        string          `json:"detail,omitempty"`
	Signature     *string         `json:"signature,omitempty"`
	SignatureFrom string          `json:"signature_from,omitempty"`
	ID            string          `json:"id,omitempty"`
	SyntheticID   bool            `json:"synthetic_id,omitempty"`
	Name          string          `json:"name,omitempty"`
	Arguments     *string         `json:"arguments,omitempty"`
	IsError       *bool           `json:"is_error,omitempty"`
	Content       []wirePart      `json:"content,omitempty"`
	Form          string          `json:"form,omitempty"`
	Provider      string          `json:"provider,omitempty"`
	Block         json.RawMessage `json:"block,omitempty"`
	Extra         extras          `json:"extra,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// toWire writes p out for the side field.
func toWire(p *part) wirePart {
	w := wirePart{Type: p.kind, Extra: p.extra}
	switch p.kind {
	case kindText, kindThinking:
		w.Text, w.Refusal = ptr(p.text), p.refusal
	case kindMedia:
		w.MediaType, w.Detail = p.mediaType, p.detail
		if p.src == srcURL {
			w.URL = ptr(p.url)
		} else {
			w.Data = ptr(p.data)
		}
	case kindToolCall:
		w.ID, w.SyntheticID, w.Name, w.Arguments = p.id, p.synthetic, p.name, ptr(p.args)
	case kindToolResult:
		w.ID, w.SyntheticID, w.Name, w.IsError, w.Form = p.id, p.synthetic, p.name, p.isError, p.form
		w.Content = toWires(p.content)
	case kindOpaque:
		w.Provider, w.Block = p.provider, p.raw
	}
	if p.sigFrom != "" {
		w.Signature, w.SignatureFrom = ptr(p.sig), p.sigFrom
	}
	return w
}

func toWires(ps []*part) []wirePart {
	if len(ps) == 0 {
		return nil
	}
	out := make([]wirePart, len(ps))
	for i, p := range ps {
		out[i] = toWire(p)
	}
	return out
}

// fromWire reads a part from the side field; inResult is set for the content
// of a tool result, which holds text, media and opaque parts only.
func fromWire(w *wirePart, where string, inResult bool) (*part, error) {
	p := &part{kind: w.Type, where: where}
	switch w.Type {
	case kindText, kindThinking:
		if w.Text == nil {
			return nil, bad(where, "%s part without \"text\"", w.Type)
		}
		p.text, p.refusal = *w.Text, w.Refusal && w.Type == kindText
	case kindMedia:
		p.mediaType, p.detail = w.MediaType, w.Detail
		switch {
		case w.Data != nil && w.URL == nil:
			if !validMediaType(w.MediaType) {
				return nil, bad(where, "base64 media with media_type %q", w.MediaType)
			}
			p.src, p.data = srcBase64, *w.Data
		case w.URL != nil && w.Data == nil:
			p.src, p.url = srcURL, *w.URL
		default:
			return nil, bad(where, "a media part needs exactly one of \"data\" and \"url\"")
		}
	case kindToolCall:
		if w.ID == "" || w.Name == "" || w.Arguments == nil {
			return nil, bad(where, "a tool_call part needs \"id\", \"name\" and \"arguments\"")
		}
		p.id, p.synthetic, p.name, p.args = w.ID, w.SyntheticID, w.Name, *w.Arguments
	case kindToolResult:
		if w.ID == "" {
			return nil, bad(where, "a tool_result part needs \"id\"")
		}
		if !validForm(w.Form) {
			return nil, bad(where, "unknown form %q", w.Form)
		}
		p.id, p.synthetic, p.name, p.isError, p.form = w.ID, w.SyntheticID, w.Name, w.IsError, w.Form
		content, err := fromWires(w.Content, where)
		if err != nil {
			return nil, err
		}
		p.content = content
	case kindOpaque:
		if !validOpaque(w.Provider, w.Block) {
			return nil, bad(where, "opaque part with provider %q and a block that provider does not keep opaque", w.Provider)
		}
		p.provider, p.raw = w.Provider, compact(w.Block)
	default:
		return nil, bad(where, "unknown part type %q", w.Type)
	}
	if inResult && p.kind != kindText && p.kind != kindMedia && p.kind != kindOpaque {
		return nil, bad(where, "a tool result cannot contain a %s part", p.kind)
	}
	if w.Signature != nil {
		if w.SignatureFrom == "" && *w.Signature != "" || w.SignatureFrom != "" && !knownProvider(w.SignatureFrom) {
			return nil, bad(where, "signature_from %q", w.SignatureFrom)
		}
		p.sig, p.sigFrom = *w.Signature, w.SignatureFrom
	}
	ex, err := checkExtras(w.Extra, where)
	if err != nil {
		return nil, err
	}
	p.extra = ex
	// Whatever the part's type does not use must be empty.
	w2 := *w
	w2.Block, w2.Extra = compact(w.Block), ex
	if len(w.Block) == 0 {
		w2.Block = nil
	}
	if len(w.Content) == 0 {
		w2.Content = nil
	}
	if got := toWire(p); !reflect.DeepEqual(got, w2) {
		return nil, bad(where, "fields that a %s part does not have", p.kind)
	}
	return p, nil
}

func fromWires(ws []wirePart, where string) ([]*part, error) {
	if len(ws) > MaxParts {
		return nil, bad(where, "%d content parts, more than the limit of %d", len(ws), MaxParts)
	}
	var out []*part
	for i := range ws {
		p, err := fromWire(&ws[i], fmt.Sprintf("%s: content[%d]", where, i), true)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// checkExtras validates extras read from a side field and compacts them.
func checkExtras(e extras, where string) (extras, error) {
	var out extras
	for p, fields := range e {
		if !knownProvider(p) {
			return nil, bad(where, "extra fields of unknown provider %q", p)
		}
		m := map[string]json.RawMessage{}
		for k, v := range fields {
			m[k] = compact(v)
		}
		out = out.with(p, m)
	}
	return out, nil
}

// validOpaque reports whether block is a block that provider keeps opaque.
func validOpaque(provider string, block json.RawMessage) bool {
	if jsonType(block) != "object" {
		return false
	}
	var p *part
	var err error
	switch provider {
	case provClaude:
		p, err = claudeBlock(block, roleUser, "")
		if err != nil {
			p, err = claudeBlock(block, roleAssistant, "")
		}
	case provOpenAI:
		p, err = openaiCodec{dialect: provOpenAI}.contentPart(block, roleUser, "")
		if err != nil {
			p, err = openaiCodec{dialect: provOpenAI}.contentPart(block, roleAssistant, "")
		}
	case provGemini:
		p, err = geminiPart(block, roleAssistant, "")
	default:
		return false
	}
	return err == nil && p.kind == kindOpaque
}

// parseSide reads the side field of a message, nil when there is none.
func parseSide(o jobj, where string) (*sideField, error) {
	raw, ok := o[sideKey]
	if !ok {
		return nil, nil
	}
	where += ": " + sideKey
	if t := jsonType(raw); t != "object" {
		return nil, bad(where, "must be an object, not %s", t)
	}
	var s sideField
	if err := strictUnmarshal(raw, &s); err != nil {
		return nil, bad(where, "%v", err)
	}
	return &s, nil
}

func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// apply sets m's parts to native, the parts the format held, and applies the
// side field s (which may be nil) to m: it restores the order, inserts the
// dropped parts, and sets what the parts and the message lost. provider is
// the format being decoded.
func (s *sideField) apply(m *message, native []*part, provider, where string) error {
	m.parts = native
	if s == nil {
		return checkCount(m, where)
	}
	w := where + ": " + sideKey
	if (s.Order != nil || s.Split) && !isOpenAIFamily(provider) {
		return bad(w, "\"order\" and \"split\" are only used in openai and deepseek histories")
	}
	if s.Order != nil {
		if len(s.Order) != len(native) {
			return bad(w, "\"order\" has %d entries for %d parts", len(s.Order), len(native))
		}
		seen := make([]bool, len(native))
		parts := make([]*part, len(native))
		for j, k := range s.Order {
			if k < 0 || k >= len(native) || seen[k] {
				return bad(w, "\"order\" is not a permutation of the %d parts", len(native))
			}
			seen[k] = true
			parts[j] = native[k]
		}
		m.parts = parts
	}
	prev := -1
	for k := range s.Dropped {
		d := &s.Dropped[k]
		dw := fmt.Sprintf("%s: dropped[%d]", w, k)
		if d.At <= prev || d.At > len(m.parts) {
			return bad(dw, "\"at\" %d is out of order or beyond the message's parts", d.At)
		}
		if len(m.parts) >= MaxParts {
			return bad(dw, "more than %d parts in the message", MaxParts)
		}
		p, err := fromWire(&d.Part, dw, false)
		if err != nil {
			return err
		}
		m.parts = slices.Insert(m.parts, d.At, p)
		prev = d.At
	}
	idx := make([]string, 0, len(s.Parts))
	for k := range s.Parts {
		idx = append(idx, k)
	}
	sort.Strings(idx)
	for _, k := range idx {
		pw := fmt.Sprintf("%s: parts[%q]", w, k)
		i, err := strconv.Atoi(k)
		if err != nil || strconv.Itoa(i) != k || i < 0 || i >= len(m.parts) {
			return bad(pw, "not the index of one of the message's %d parts", len(m.parts))
		}
		if s.Parts[k] == nil {
			continue
		}
		if err := s.Parts[k].applyTo(m.parts[i], pw); err != nil {
			return err
		}
	}
	switch {
	case s.Role == "":
	case s.Role == "developer" && m.role == roleSystem, s.Role == "function" && m.role == roleUser:
		m.alias = s.Role
	default:
		return bad(w, "role %q does not fit a %s message", s.Role, m.role)
	}
	if s.Name != nil {
		m.name = *s.Name
	}
	if !validForm(s.Form) {
		return bad(w, "unknown form %q", s.Form)
	}
	if s.Form != "" {
		m.form = s.Form
	}
	for p, fields := range s.Extra {
		if !knownProvider(p) {
			return bad(w, "extra fields of unknown provider %q", p)
		}
		known := messageKeys(p, m)
		for k, v := range fields {
			if known[k] {
				return bad(w, "extra field %q is a field that %s knows", k, p)
			}
			if _, dup := m.extra[p][k]; dup {
				return bad(w, "extra field %q is also on the message", k)
			}
			if m.extra[p] == nil {
				m.extra = m.extra.with(p, map[string]json.RawMessage{k: compact(v)})
			} else {
				m.extra[p][k] = compact(v)
			}
		}
	}
	return checkCount(m, where)
}

func checkCount(m *message, where string) error {
	if len(m.parts) > MaxParts {
		return bad(where, "%d parts, more than the limit of %d", len(m.parts), MaxParts)
	}
	return nil
}

// messageKeys are the message fields that provider's decoder knows for m.
func messageKeys(provider string, m *message) keySet {
	switch provider {
	case provClaude:
		return claudeMsgKeys
	case provGemini:
		return geminiMsgKeys
	}
	return openaiCodec{dialect: provider}.messageKeys(m.role)
}

// applyTo sets what p lost.
func (ps *partSide) applyTo(p *part, where string) error {
	only := func(field string, kinds ...string) error {
		if !slices.Contains(kinds, p.kind) {
			return bad(where, "%q does not apply to a %s part", field, p.kind)
		}
		return nil
	}
	if ps.Refusal {
		if err := only("refusal", kindText); err != nil {
			return err
		}
		p.refusal = true
	}
	if ps.IsError != nil {
		if err := only("is_error", kindToolResult); err != nil {
			return err
		}
		p.isError = ptr(*ps.IsError)
	}
	if ps.Detail != nil {
		if err := only("detail", kindMedia); err != nil {
			return err
		}
		p.detail = *ps.Detail
	}
	if ps.MediaType != nil {
		if p.kind != kindMedia || p.src != srcURL {
			return bad(where, "\"media_type\" applies to media by URL only")
		}
		p.mediaType = *ps.MediaType
	}
	if ps.Signature != nil {
		if err := only("signature", kindText, kindThinking, kindMedia, kindToolCall, kindToolResult); err != nil {
			return err
		}
		if ps.SignatureFrom == "" && *ps.Signature != "" || ps.SignatureFrom != "" && !knownProvider(ps.SignatureFrom) {
			return bad(where, "signature_from %q", ps.SignatureFrom)
		}
		p.sig, p.sigFrom = *ps.Signature, ps.SignatureFrom
	}
	if ps.SyntheticID {
		if err := only("synthetic_id", kindToolCall, kindToolResult); err != nil {
			return err
		}
		p.synthetic = true
	}
	if ps.Arguments != nil {
		if err := only("arguments", kindToolCall); err != nil {
			return err
		}
		p.args = *ps.Arguments
	}
	if ps.Name != nil {
		if err := only("name", kindToolResult); err != nil {
			return err
		}
		p.name = *ps.Name
	}
	if ps.Content != nil {
		if err := only("content", kindToolResult); err != nil {
			return err
		}
		if !validForm(ps.Form) {
			return bad(where, "unknown form %q", ps.Form)
		}
		content, err := fromWires(*ps.Content, where)
		if err != nil {
			return err
		}
		p.content, p.form = content, ps.Form
	} else if ps.Form != "" {
		return bad(where, "\"form\" without \"content\"")
	}
	ex, err := checkExtras(ps.Extra, where)
	if err != nil {
		return err
	}
	for prov, fields := range ex {
		p.extra = p.extra.with(prov, fields)
	}
	return nil
}

// diffPart returns what got, the part a format's decoder reads back from what
// its encoder wrote for want, lost: nil when nothing. ok is false when the
// loss cannot be told in a partSide; the part is then dropped whole.
func diffPart(want, got *part) (ps *partSide, ok bool) {
	if want.kind != got.kind || want.text != got.text || want.src != got.src ||
		want.data != got.data || want.url != got.url || want.id != got.id ||
		want.provider != got.provider || string(want.raw) != string(got.raw) ||
		want.kind == kindToolCall && want.name != got.name {
		return nil, false
	}
	if want.kind == kindMedia && want.src == srcBase64 && want.mediaType != got.mediaType {
		return nil, false
	}
	ps = &partSide{}
	switch {
	case want.refusal && !got.refusal:
		ps.Refusal = true
	case !want.refusal && got.refusal:
		return nil, false
	}
	if want.mediaType != got.mediaType {
		ps.MediaType = ptr(want.mediaType)
	}
	if want.detail != got.detail {
		ps.Detail = ptr(want.detail)
	}
	if want.sig != got.sig || want.sigFrom != got.sigFrom {
		ps.Signature, ps.SignatureFrom = ptr(want.sig), want.sigFrom
	}
	switch {
	case want.synthetic && !got.synthetic:
		ps.SyntheticID = true
	case !want.synthetic && got.synthetic:
		return nil, false
	}
	if want.args != got.args {
		ps.Arguments = ptr(want.args)
	}
	if want.name != got.name {
		ps.Name = ptr(want.name)
	}
	if !reflect.DeepEqual(want.isError, got.isError) {
		if want.isError == nil {
			return nil, false
		}
		ps.IsError = ptr(*want.isError)
	}
	if want.form != got.form || !reflect.DeepEqual(toWires(want.content), toWires(got.content)) {
		c := toWires(want.content)
		if c == nil {
			c = []wirePart{}
		}
		ps.Content, ps.Form = &c, want.form
	}
	for p := range got.extra {
		if _, ok := want.extra[p]; !ok {
			return nil, false
		}
	}
	for p, fields := range want.extra {
		if !reflect.DeepEqual(fields, got.extra[p]) {
			if got.extra[p] != nil {
				return nil, false
			}
			ps.Extra = ps.Extra.with(p, fields)
		}
	}
	if reflect.DeepEqual(*ps, partSide{}) {
		return nil, true
	}
	return ps, true
}

// sideBuilder collects the side field of one message while it is encoded.
type sideBuilder struct{ s sideField }

func (b *sideBuilder) drop(i int, p *part) {
	b.s.Dropped = append(b.s.Dropped, dropped{At: i, Part: toWire(p)})
}

func (b *sideBuilder) lost(i int, ps *partSide) {
	if ps == nil {
		return
	}
	if b.s.Parts == nil {
		b.s.Parts = map[string]*partSide{}
	}
	b.s.Parts[strconv.Itoa(i)] = ps
}

// message records what the target format cannot hold of m itself: provider
// is the target, role and name tell whether the format held them.
func (b *sideBuilder) message(m *message, provider string, aliasHeld, nameHeld bool) {
	if m.alias != "" && !aliasHeld {
		b.s.Role = m.alias
	}
	if m.name != "" && !nameHeld {
		b.s.Name = ptr(m.name)
	}
	b.s.Extra = m.extra.except(provider)
}

// bytes returns the side field as JSON, nil when it is empty.
func (b *sideBuilder) bytes() ([]byte, error) {
	if reflect.DeepEqual(b.s, sideField{}) {
		return nil, nil
	}
	return marshal(&b.s)
}

// link checks that every tool result answers an earlier tool call.
func link(msgs []*message) error {
	calls := map[string]bool{}
	for _, m := range msgs {
		for _, p := range m.parts {
			switch p.kind {
			case kindToolCall:
				calls[p.id] = true
			case kindToolResult:
				if !calls[p.id] {
					return bad(p.where, "tool result for %q, which no earlier tool call has as id", p.id)
				}
			}
		}
	}
	return nil
}
