package translate

import (
	"encoding/json"
	"fmt"
	"slices"
)

// openaiCodec reads and writes Chat Completions messages, in one of two
// dialects:
//
//   - openai: roles system, developer, user, assistant and tool; content as a
//     string or parts (text, refusal, image_url, input_audio; file is kept
//     whole); assistant tool_calls with arguments as a JSON string; tool
//     results as role "tool" messages with tool_call_id.
//   - deepseek: the same without developer, refusal, media and the parts
//     kept whole, and with the assistant's reasoning_content.
//
// One internal message may span several Chat Completions messages: the tool
// results of a user turn are "tool" messages, followed by a "user" message
// for the rest of the turn when there is any. A run of tool messages and the
// user message right after it make one group; the side field of a group is
// on its first message.
type openaiCodec struct{ dialect string } // provOpenAI or provDeepSeek

func (c openaiCodec) deepseek() bool { return c.dialect == provDeepSeek }

var (
	openaiToolMsgKeys  = keys("role", "tool_call_id", "content", sideKey)
	openaiTextKeys     = keys("type", "text")
	openaiImageKeys    = keys("type", "image_url")
	openaiImageURLKeys = keys("url", "detail")
	openaiToolCallKeys = keys("id", "type", "function")
	openaiFunctionKeys = keys("name", "arguments")
	openaiRefusalKeys  = keys("type", "refusal")
	openaiAudioKeys    = keys("type", "input_audio")
	openaiAudioDataKey = keys("data", "format")
	// openaiOpaque are the content part types openai has and the others do
	// not, kept whole, with the role they may appear in.
	openaiOpaque = map[string]string{"file": roleUser}
	// openaiAudio are the media types of input_audio, by format.
	openaiAudio = map[string]string{"wav": "audio/wav", "mp3": "audio/mp3"}
)

// messageKeys are the fields the decoder knows on a message of role.
func (c openaiCodec) messageKeys(role string) keySet {
	if role != roleAssistant {
		return keys("role", "content", "name", sideKey)
	}
	if c.deepseek() {
		return keys("role", "content", "name", "tool_calls", "reasoning_content", sideKey)
	}
	return keys("role", "content", "name", "tool_calls", sideKey)
}

// Categories of parts, in the order a message writes them.
const (
	catFirst   = 0 // tool results of a user turn; reasoning of an assistant turn
	catContent = 1 // content parts
	catCalls   = 2 // tool calls
)

// ogroup is the internal message being read from a group of messages.
type ogroup struct {
	at     int
	where  string
	side   *sideField
	m      *message
	native []*part // in the order the messages hold them
	open   bool    // a user turn of tool results only, so far
}

func (c openaiCodec) decode(items []json.RawMessage) ([]*message, error) {
	var msgs []*message
	var g *ogroup
	finish := func() error {
		if g == nil {
			return nil
		}
		if err := g.side.apply(g.m, g.native, c.dialect, g.where); err != nil {
			return err
		}
		msgs = append(msgs, g.m)
		g = nil
		return nil
	}
	for i, raw := range items {
		where, o, role, err := messageHead(raw, i)
		if err != nil {
			return nil, err
		}
		side, err := parseSide(o, where)
		if err != nil {
			return nil, err
		}
		if g != nil && g.open && (role == "tool" || role == "user") && (side == nil || !side.Split) {
			if side != nil {
				return nil, bad(where+": "+sideKey, "only the first message of a group (here message %d) carries a side field", g.at)
			}
		} else {
			if err := finish(); err != nil {
				return nil, err
			}
			g = &ogroup{at: i, where: where, side: side, m: &message{}}
		}
		add := func(ps ...*part) error {
			if len(g.native)+len(ps) > MaxParts {
				return bad(where, "more than %d parts in the group of messages from message %d", MaxParts, g.at)
			}
			g.native = append(g.native, ps...)
			return nil
		}
		switch role {
		case "system", "developer", "user":
			if role == "developer" && c.deepseek() {
				return nil, bad(where, "unknown role %q (deepseek has system, user, assistant and tool)", role)
			}
			switch role {
			case "user":
				g.m.role, g.open = roleUser, false
			case "developer":
				g.m.role, g.m.alias = roleSystem, role
			default:
				g.m.role = roleSystem
			}
			content, shape, err := c.content(o, g.m.role, where)
			if err != nil {
				return nil, err
			}
			if err := add(content...); err != nil {
				return nil, err
			}
			g.m.form = formOf(shape, naturalShape(content, c.dialect, ""))
			if err := c.common(g.m, o, where); err != nil {
				return nil, err
			}
		case "assistant":
			g.m.role = roleAssistant
			if c.deepseek() {
				if r, ok := o["reasoning_content"]; ok && jsonType(r) != "null" {
					s, _, err := str(o, "reasoning_content", where)
					if err != nil {
						return nil, err
					}
					if err := add(&part{kind: kindThinking, text: s, where: where}); err != nil {
						return nil, err
					}
				}
			}
			content, shape, err := c.content(o, roleAssistant, where)
			if err != nil {
				return nil, err
			}
			if err := add(content...); err != nil {
				return nil, err
			}
			g.m.form = formOf(shape, naturalShape(content, c.dialect, shapeNull))
			if tc, ok := o["tool_calls"]; ok && jsonType(tc) != "null" {
				calls, err := array(tc, "tool calls", MaxParts, where)
				if err != nil {
					return nil, err
				}
				for j, call := range calls {
					p, err := c.toolCall(call, fmt.Sprintf("%s: tool_calls[%d]", where, j))
					if err != nil {
						return nil, err
					}
					if err := add(p); err != nil {
						return nil, err
					}
				}
			}
			if err := c.common(g.m, o, where); err != nil {
				return nil, err
			}
		case "tool":
			g.m.role = roleUser
			if len(g.native) == 0 {
				g.open = true
			}
			p, err := c.toolMessage(o, where)
			if err != nil {
				return nil, err
			}
			if err := add(p); err != nil {
				return nil, err
			}
		default:
			return nil, bad(where, "unknown role %q", role)
		}
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return msgs, link(msgs)
}

// common reads a message's name and unknown fields.
func (c openaiCodec) common(m *message, o jobj, where string) error {
	if r, ok := o["name"]; ok && jsonType(r) != "null" {
		name, _, err := str(o, "name", where)
		if err != nil {
			return err
		}
		m.name = name
	}
	m.extra = m.extra.with(c.dialect, unknownFields(o, c.messageKeys(m.role)))
	return nil
}

// content reads the content of a system, user or assistant message and the
// shape it came in.
func (c openaiCodec) content(o jobj, role, where string) ([]*part, string, error) {
	raw, ok := o["content"]
	if !ok {
		if role == roleAssistant {
			return nil, shapeAbsent, nil
		}
		return nil, "", bad(where, "missing \"content\"")
	}
	switch jsonType(raw) {
	case "null":
		if role == roleAssistant {
			return nil, shapeNull, nil
		}
	case "string":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, "", bad(where, "content: %v", err)
		}
		return []*part{{kind: kindText, text: s, where: where}}, shapeString, nil
	case "array":
		items, err := array(raw, "content parts", MaxParts, where)
		if err != nil {
			return nil, "", err
		}
		parts := make([]*part, 0, len(items))
		for j, it := range items {
			p, err := c.contentPart(it, role, fmt.Sprintf("%s: content part %d", where, j))
			if err != nil {
				return nil, "", err
			}
			parts = append(parts, p)
		}
		return parts, shapeArray, nil
	}
	return nil, "", bad(where, "\"content\" must be a string or an array of parts, not %s", jsonType(raw))
}

// contentPart decodes one content part of a message of role ("tool" for a
// tool message).
func (c openaiCodec) contentPart(raw json.RawMessage, role, where string) (*part, error) {
	o, err := object(raw, where)
	if err != nil {
		return nil, err
	}
	typ, err := needStr(o, "type", where)
	if err != nil {
		return nil, err
	}
	p := &part{where: where}
	switch typ {
	case "text":
		p.kind = kindText
		if p.text, err = needStr(o, "text", where); err != nil {
			return nil, err
		}
		p.extra = p.extra.with(c.dialect, unknownFields(o, openaiTextKeys))
	case "image_url":
		if c.deepseek() {
			return nil, bad(where, "deepseek takes no image input (type %q)", typ)
		}
		if role != roleUser {
			return nil, bad(where, "an image_url part can only be in a user message")
		}
		iu, err := needObj(o, "image_url", where)
		if err != nil {
			return nil, err
		}
		w := where + ": image_url"
		u, err := needStr(iu, "url", w)
		if err != nil {
			return nil, err
		}
		if p.detail, _, err = str(iu, "detail", w); err != nil {
			return nil, err
		}
		p.kind, p.src, p.url = kindMedia, srcURL, u
		if mt, data, ok := parseDataURL(u); ok {
			p.src, p.url, p.mediaType, p.data = srcBase64, "", mt, data
		}
		ex := unknownFields(o, openaiImageKeys)
		if f := unknownFields(iu, openaiImageURLKeys); f != nil {
			if ex == nil {
				ex = map[string]json.RawMessage{}
			}
			ex["image_url"] = mustMarshal(f)
		}
		p.extra = p.extra.with(c.dialect, ex)
	case "refusal":
		if c.deepseek() {
			return nil, bad(where, "unknown type %q", typ)
		}
		if role != roleAssistant {
			return nil, bad(where, "a refusal part can only be in an assistant message")
		}
		p.kind, p.refusal = kindText, true
		if p.text, err = needStr(o, "refusal", where); err != nil {
			return nil, err
		}
		p.extra = p.extra.with(c.dialect, unknownFields(o, openaiRefusalKeys))
	case "input_audio":
		if c.deepseek() {
			return nil, bad(where, "deepseek takes no audio input (type %q)", typ)
		}
		if role != roleUser {
			return nil, bad(where, "an input_audio part can only be in a user message")
		}
		a, err := needObj(o, "input_audio", where)
		if err != nil {
			return nil, err
		}
		w := where + ": input_audio"
		format, err := needStr(a, "format", w)
		if err != nil {
			return nil, err
		}
		if p.mediaType = openaiAudio[format]; p.mediaType == "" {
			return nil, bad(w, "unknown format %q (want wav or mp3)", format)
		}
		p.kind, p.src = kindMedia, srcBase64
		if p.data, err = needStr(a, "data", w); err != nil {
			return nil, err
		}
		ex := unknownFields(o, openaiAudioKeys)
		if f := unknownFields(a, openaiAudioDataKey); f != nil {
			if ex == nil {
				ex = map[string]json.RawMessage{}
			}
			ex["input_audio"] = mustMarshal(f)
		}
		p.extra = p.extra.with(c.dialect, ex)
	default:
		r, ok := openaiOpaque[typ]
		if !ok || c.deepseek() {
			return nil, bad(where, "unknown type %q", typ)
		}
		if r != role {
			return nil, bad(where, "a %s part can only be in a %s message", typ, r)
		}
		p.kind, p.provider, p.raw = kindOpaque, c.dialect, compact(raw)
	}
	return p, nil
}

// toolCall decodes one entry of an assistant's tool_calls.
func (c openaiCodec) toolCall(raw json.RawMessage, where string) (*part, error) {
	o, err := object(raw, where)
	if err != nil {
		return nil, err
	}
	p := &part{kind: kindToolCall, where: where}
	if p.id, err = needID(o, "id", where); err != nil {
		return nil, err
	}
	if t, ok, err := str(o, "type", where); err != nil {
		return nil, err
	} else if ok && t != "function" {
		return nil, bad(where, "unknown tool call type %q (want function)", t)
	}
	fn, err := needObj(o, "function", where)
	if err != nil {
		return nil, err
	}
	w := where + ": function"
	if p.name, err = needID(fn, "name", w); err != nil {
		return nil, err
	}
	if p.args, err = c.arguments(fn, w); err != nil {
		return nil, err
	}
	ex := unknownFields(o, openaiToolCallKeys)
	if f := unknownFields(fn, openaiFunctionKeys); f != nil {
		if ex == nil {
			ex = map[string]json.RawMessage{}
		}
		ex["function"] = mustMarshal(f)
	}
	p.extra = p.extra.with(c.dialect, ex)
	return p, nil
}

// arguments reads a tool call's arguments: the API's JSON string, kept as it
// is, or a JSON object, as the seed and some clients send them, read as its
// compacted text. An object is the normal form's string on the way out, so
// every format round-trips to what Translate(h, openai, openai) writes.
func (c openaiCodec) arguments(fn jobj, where string) (string, error) {
	raw, ok := fn["arguments"]
	if !ok {
		return "", bad(where, "missing %q", "arguments")
	}
	switch t := jsonType(raw); t {
	case "string":
		return needStr(fn, "arguments", where)
	case "object":
		return string(compact(raw)), nil
	default:
		return "", bad(where, "%q must be a JSON string or object, not %s", "arguments", t)
	}
}

// toolMessage decodes a role "tool" message into a tool result.
func (c openaiCodec) toolMessage(o jobj, where string) (*part, error) {
	p := &part{kind: kindToolResult, where: where}
	var err error
	if p.id, err = needID(o, "tool_call_id", where); err != nil {
		return nil, err
	}
	content, shape, err := c.content(o, "tool", where)
	if err != nil {
		return nil, err
	}
	p.content = content
	p.form = formOf(shape, naturalShape(content, c.dialect, ""))
	p.extra = p.extra.with(c.dialect, unknownFields(o, openaiToolMsgKeys))
	return p, nil
}

// oheld is a part the dialect holds, written out.
type oheld struct {
	i   int // index in the message's parts
	p   *part
	cat int
	js  []byte
}

func (c openaiCodec) encode(msgs []*message) ([]json.RawMessage, error) {
	var out []json.RawMessage
	open := false
	for _, m := range msgs {
		items, nowOpen, err := c.encodeMessage(m, open)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		open = nowOpen
	}
	return out, nil
}

// encodeMessage writes m as one or more messages; open says that the
// messages before end in a user turn of tool results only, which a tool or
// user message would continue. nowOpen says the same of m's messages.
func (c openaiCodec) encodeMessage(m *message, open bool) (items []json.RawMessage, nowOpen bool, err error) {
	var sb sideBuilder
	var held []oheld
	reasoning := false
	for i, p := range m.parts {
		if cat, js, ok := c.emit(p, m.role, &reasoning); ok {
			if got, err := c.reread(js, cat, m.role); err == nil {
				if ps, ok := diffPart(p, got); ok {
					sb.lost(i, ps)
					held = append(held, oheld{i, p, cat, js})
					continue
				}
			}
			if cat == catFirst && m.role == roleAssistant {
				reasoning = false
			}
		}
		sb.drop(i, p)
	}
	// The messages hold the parts by category; keep the order when it is
	// not that one.
	sorted := slices.Clone(held)
	slices.SortStableFunc(sorted, func(a, b oheld) int { return a.cat - b.cat })
	pos := map[int]int{}
	for k, h := range sorted {
		pos[h.i] = k
	}
	for j, h := range held {
		if pos[h.i] != j {
			sb.s.Order = make([]int, len(held))
			for j, h := range held {
				sb.s.Order[j] = pos[h.i]
			}
			break
		}
	}
	of := func(cat int) (ps []*part, js [][]byte) {
		for _, h := range sorted {
			if h.cat == cat {
				ps, js = append(ps, h.p), append(js, h.js)
			}
		}
		return ps, js
	}
	content, contentJS := of(catContent)
	var main *objBuf // the message that holds the content
	switch m.role {
	case roleSystem:
		role := "system"
		if m.alias == "developer" && !c.deepseek() {
			role = "developer"
		}
		sb.message(m, c.dialect, role == "developer", true)
		main = newObj().str("role", role)
		c.writeContent(main, m, content, contentJS, "", &sb)
	case roleUser:
		_, tools := of(catFirst)
		items = make([]json.RawMessage, 0, len(tools)+1)
		for _, t := range tools {
			items = append(items, t)
		}
		if len(content) > 0 || len(tools) == 0 {
			main = newObj().str("role", "user")
			c.writeContent(main, m, content, contentJS, "", &sb)
			sb.message(m, c.dialect, false, true)
		} else {
			// No user message: what it would hold goes to the side field.
			if m.form != "" {
				sb.s.Form = m.form
			}
			sb.message(m, c.dialect, false, false)
			sb.s.Extra = m.extra
			nowOpen = true
		}
		sb.s.Split = open
	case roleAssistant:
		sb.message(m, c.dialect, false, true)
		main = newObj().str("role", "assistant")
		c.writeContent(main, m, content, contentJS, shapeNull, &sb, shapeNull, shapeAbsent)
		if _, calls := of(catCalls); len(calls) > 0 {
			main.raw("tool_calls", arrayOf(calls))
		}
		if _, r := of(catFirst); len(r) > 0 {
			main.raw("reasoning_content", r[0])
		}
	}
	if main != nil {
		if m.name != "" {
			main.str("name", m.name)
		}
		main.fields(m.extra[c.dialect], c.messageKeys(m.role))
		items = append(items, main.done())
	}
	side, err := sb.bytes()
	if err != nil {
		return nil, false, err
	}
	if side != nil {
		items[0] = withField(items[0], sideKey, side)
	}
	return items, nowOpen, nil
}

// writeContent adds the content field to o in the shape m's form asks for
// when it can, and records the form in the side field when it cannot.
func (c openaiCodec) writeContent(o *objBuf, m *message, parts []*part, js [][]byte, zero string, sb *sideBuilder, empties ...string) {
	natural := naturalShape(parts, c.dialect, zero)
	shape := pickShape(m.form, natural, parts, c.dialect, empties...)
	if formOf(shape, natural) != m.form {
		sb.s.Form = m.form
	}
	switch shape {
	case shapeString:
		o.str("content", parts[0].text)
	case shapeArray:
		o.raw("content", arrayOf(js))
	case shapeNull:
		o.raw("content", []byte("null"))
	}
}

// withField adds a field at the end of the JSON object obj.
func withField(obj []byte, k string, v []byte) []byte {
	b := newObj()
	b.b = append([]byte(nil), obj[:len(obj)-1]...)
	if len(b.b) == 1 {
		return b.raw(k, v).done()
	}
	b.b = append(b.b, ',')
	b.b = append(b.b, quote(k)...)
	b.b = append(b.b, ':')
	b.b = append(b.b, v...)
	return append(b.b, '}')
}

// emit writes p for a message of role: its category and JSON (a content
// part, a tool call, a whole tool message, or the reasoning string); ok is
// false when the dialect cannot hold p there. reasoning tells whether the
// message's reasoning_content is taken.
func (c openaiCodec) emit(p *part, role string, reasoning *bool) (cat int, js []byte, ok bool) {
	ex := p.extra[c.dialect]
	switch {
	case p.kind == kindText && p.refusal && role == roleAssistant && !c.deepseek():
		return catContent, newObj().str("type", "refusal").str("refusal", p.text).fields(ex, openaiRefusalKeys).done(), true
	case p.kind == kindText:
		return catContent, newObj().str("type", "text").str("text", p.text).fields(ex, openaiTextKeys).done(), true
	case p.kind == kindMedia && role == roleUser && !c.deepseek() && p.src == srcBase64 && audioFormat(p.mediaType) != "":
		a := newObj().str("data", p.data).str("format", audioFormat(p.mediaType)).nested(ex, "input_audio", openaiAudioDataKey)
		return catContent, newObj().str("type", "input_audio").raw("input_audio", a.done()).fields(ex, openaiAudioKeys).done(), true
	case p.kind == kindMedia && role == roleUser && !c.deepseek() && isImage(p.mediaType, p.src):
		u := p.url
		if p.src == srcBase64 {
			if _, _, ok := parseDataURL(dataURL(p.mediaType, p.data)); !ok {
				return 0, nil, false
			}
			u = dataURL(p.mediaType, p.data)
		}
		iu := newObj().str("url", u)
		if p.detail != "" {
			iu.str("detail", p.detail)
		}
		iu.nested(ex, "image_url", openaiImageURLKeys)
		return catContent, newObj().str("type", "image_url").raw("image_url", iu.done()).fields(ex, openaiImageKeys).done(), true
	case p.kind == kindOpaque && p.provider == c.dialect:
		return catContent, p.raw, true
	case p.kind == kindToolCall && role == roleAssistant:
		fn := newObj().str("name", p.name).str("arguments", p.args).nested(ex, "function", openaiFunctionKeys)
		return catCalls, newObj().str("id", p.id).str("type", "function").raw("function", fn.done()).fields(ex, openaiToolCallKeys).done(), true
	case p.kind == kindToolResult && role == roleUser:
		return catFirst, c.toolMessageJSON(p), true
	case p.kind == kindThinking && role == roleAssistant && c.deepseek() && !*reasoning:
		*reasoning = true
		return catFirst, quote(p.text), true
	}
	return 0, nil, false
}

// audioFormat is the input_audio format of mediaType, or "".
func audioFormat(mediaType string) string {
	for f, mt := range openaiAudio {
		if mt == mediaType {
			return f
		}
	}
	return ""
}

// toolMessageJSON writes a tool result as a role "tool" message; its content
// holds text only, the side field keeps the rest.
func (c openaiCodec) toolMessageJSON(p *part) []byte {
	var texts []*part
	var js [][]byte
	for _, t := range p.content {
		if t.kind == kindText {
			texts = append(texts, t)
			js = append(js, newObj().str("type", "text").str("text", t.text).fields(t.extra[c.dialect], openaiTextKeys).done())
		}
	}
	o := newObj().str("role", "tool").str("tool_call_id", p.id)
	natural := naturalShape(texts, c.dialect, "")
	if pickShape(p.form, natural, texts, c.dialect) == shapeString {
		o.str("content", texts[0].text)
	} else {
		o.raw("content", arrayOf(js))
	}
	return o.fields(p.extra[c.dialect], openaiToolMsgKeys).done()
}

// reread decodes what emit wrote.
func (c openaiCodec) reread(js []byte, cat int, role string) (*part, error) {
	switch {
	case cat == catFirst && role == roleUser:
		o, err := object(js, "")
		if err != nil {
			return nil, err
		}
		return c.toolMessage(o, "")
	case cat == catFirst:
		var s string
		err := json.Unmarshal(js, &s)
		return &part{kind: kindThinking, text: s}, err
	case cat == catCalls:
		return c.toolCall(js, "")
	}
	return c.contentPart(js, role, "")
}
