package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// claudeCodec reads and writes Anthropic Messages API messages:
//
//	{"role":"user"|"assistant","content":"text" | [blocks]}
//
// with a leading {"role":"system","content":...} pseudo-message for the
// request's system prompt (string or text blocks). Blocks are text, image
// (base64 or url source), thinking, tool_use and tool_result; the block types
// in claudeOpaque are kept whole.
type claudeCodec struct{}

// ctxResult is the context of the blocks inside a tool_result's content.
const ctxResult = "tool_result"

var (
	claudeMsgKeys        = keys("role", "content", sideKey)
	claudeTextKeys       = keys("type", "text")
	claudeImageKeys      = keys("type", "source")
	claudeBase64Keys     = keys("type", "media_type", "data")
	claudeURLKeys        = keys("type", "url")
	claudeThinkingKeys   = keys("type", "thinking", "signature")
	claudeToolUseKeys    = keys("type", "id", "name", "input")
	claudeToolResultKeys = keys("type", "tool_use_id", "content", "is_error")
)

// claudeOpaque are the block types that only Claude knows, kept whole, with
// the contexts they may appear in.
var claudeOpaque = map[string]keySet{
	"redacted_thinking":      keys(roleAssistant),
	"server_tool_use":        keys(roleAssistant),
	"web_search_tool_result": keys(roleAssistant),
	"document":               keys(roleUser, ctxResult),
	"search_result":          keys(roleUser, ctxResult),
}

func (claudeCodec) decode(items []json.RawMessage) ([]*message, error) {
	msgs := make([]*message, 0, len(items))
	for i, raw := range items {
		where, o, role, err := messageHead(raw, i)
		if err != nil {
			return nil, err
		}
		if role != roleSystem && role != roleUser && role != roleAssistant {
			return nil, bad(where, "unknown role %q (claude has system, user and assistant)", role)
		}
		m := &message{role: role}
		craw, ok := o["content"]
		if !ok {
			return nil, bad(where, "missing \"content\"")
		}
		var native []*part
		var shape string
		switch jsonType(craw) {
		case "string":
			var s string
			if err := json.Unmarshal(craw, &s); err != nil {
				return nil, bad(where, "content: %v", err)
			}
			native, shape = []*part{{kind: kindText, text: s, where: where}}, shapeString
		case "array":
			blocks, err := array(craw, "content blocks", MaxParts, where)
			if err != nil {
				return nil, err
			}
			for j, b := range blocks {
				p, err := claudeBlock(b, role, fmt.Sprintf("%s: content block %d", where, j))
				if err != nil {
					return nil, err
				}
				native = append(native, p)
			}
			shape = shapeArray
		default:
			return nil, bad(where, "\"content\" must be a string or an array of blocks, not %s", jsonType(craw))
		}
		m.form = formOf(shape, naturalShape(native, provClaude, ""))
		m.extra = m.extra.with(provClaude, unknownFields(o, claudeMsgKeys))
		side, err := parseSide(o, where)
		if err != nil {
			return nil, err
		}
		if err := side.apply(m, native, provClaude, where); err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, link(msgs)
}

// claudeBlock decodes one content block; ctx is the message's role, or
// ctxResult inside a tool_result.
func claudeBlock(raw json.RawMessage, ctx, where string) (*part, error) {
	o, err := object(raw, where)
	if err != nil {
		return nil, err
	}
	typ, err := needStr(o, "type", where)
	if err != nil {
		return nil, err
	}
	allowed := func(ctxs ...string) error {
		for _, c := range ctxs {
			if c == ctx {
				return nil
			}
		}
		return bad(where, "a %s block cannot be in %s", typ, ctxName(ctx))
	}
	p := &part{where: where}
	var known keySet
	switch typ {
	case "text":
		known = claudeTextKeys
		p.kind = kindText
		if p.text, err = needStr(o, "text", where); err != nil {
			return nil, err
		}
	case "image":
		known = claudeImageKeys
		if err := allowed(roleUser, ctxResult); err != nil {
			return nil, err
		}
		p.kind = kindMedia
		src, err := needObj(o, "source", where)
		if err != nil {
			return nil, err
		}
		sw := where + ": source"
		st, err := needStr(src, "type", sw)
		if err != nil {
			return nil, err
		}
		var srcKnown keySet
		switch st {
		case "base64":
			srcKnown = claudeBase64Keys
			p.src = srcBase64
			if p.mediaType, err = needStr(src, "media_type", sw); err != nil {
				return nil, err
			}
			if !validMediaType(p.mediaType) || !strings.HasPrefix(p.mediaType, "image/") {
				return nil, bad(sw, "media_type %q is not an image type", p.mediaType)
			}
			if p.data, err = needStr(src, "data", sw); err != nil {
				return nil, err
			}
		case "url":
			srcKnown = claudeURLKeys
			p.src = srcURL
			if p.url, err = needStr(src, "url", sw); err != nil {
				return nil, err
			}
		default:
			return nil, bad(sw, "unknown image source type %q (want base64 or url)", st)
		}
		if f := unknownFields(src, srcKnown); f != nil {
			p.extra = p.extra.with(provClaude, map[string]json.RawMessage{"source": mustMarshal(f)})
		}
	case "thinking":
		known = claudeThinkingKeys
		if err := allowed(roleAssistant); err != nil {
			return nil, err
		}
		p.kind, p.sigFrom = kindThinking, provClaude
		if p.text, err = needStr(o, "thinking", where); err != nil {
			return nil, err
		}
		if p.sig, err = needStr(o, "signature", where); err != nil {
			return nil, err
		}
	case "tool_use":
		known = claudeToolUseKeys
		if err := allowed(roleAssistant); err != nil {
			return nil, err
		}
		p.kind = kindToolCall
		if p.id, err = needID(o, "id", where); err != nil {
			return nil, err
		}
		if p.name, err = needID(o, "name", where); err != nil {
			return nil, err
		}
		input, err := needRawObj(o, "input", where)
		if err != nil {
			return nil, err
		}
		p.args = string(compact(input))
	case "tool_result":
		known = claudeToolResultKeys
		if err := allowed(roleUser); err != nil {
			return nil, err
		}
		p.kind = kindToolResult
		if p.id, err = needID(o, "tool_use_id", where); err != nil {
			return nil, err
		}
		if p.isError, err = optBool(o, "is_error", where); err != nil {
			return nil, err
		}
		shape := shapeAbsent
		if c, ok := o["content"]; ok {
			switch jsonType(c) {
			case "string":
				var s string
				if err := json.Unmarshal(c, &s); err != nil {
					return nil, bad(where, "content: %v", err)
				}
				p.content, shape = []*part{{kind: kindText, text: s, where: where}}, shapeString
			case "array":
				blocks, err := array(c, "content blocks", MaxParts, where)
				if err != nil {
					return nil, err
				}
				for j, b := range blocks {
					cp, err := claudeBlock(b, ctxResult, fmt.Sprintf("%s: content block %d", where, j))
					if err != nil {
						return nil, err
					}
					p.content = append(p.content, cp)
				}
				shape = shapeArray
			default:
				return nil, bad(where, "\"content\" must be a string or an array of blocks, not %s", jsonType(c))
			}
		}
		p.form = formOf(shape, naturalShape(p.content, provClaude, shapeAbsent))
	default:
		ctxs, ok := claudeOpaque[typ]
		if !ok {
			return nil, bad(where, "unknown type %q", typ)
		}
		if !ctxs[ctx] {
			return nil, bad(where, "a %s block cannot be in %s", typ, ctxName(ctx))
		}
		p.kind, p.provider, p.raw = kindOpaque, provClaude, compact(raw)
		return p, nil
	}
	if ctx == roleSystem && p.kind != kindText {
		return nil, bad(where, "a system prompt holds text blocks only")
	}
	if f := unknownFields(o, known); f != nil {
		if p.extra[provClaude] == nil {
			p.extra = p.extra.with(provClaude, f)
		} else {
			for k, v := range f {
				p.extra[provClaude][k] = v
			}
		}
	}
	return p, nil
}

func ctxName(ctx string) string {
	if ctx == ctxResult {
		return "a tool result"
	}
	return "a " + ctx + " message"
}

// mustMarshal encodes a map of raw JSON values, which cannot fail.
func mustMarshal(m map[string]json.RawMessage) json.RawMessage {
	b, err := marshal(m)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

func (claudeCodec) encode(msgs []*message) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(msgs))
	for _, m := range msgs {
		var sb sideBuilder
		var blocks [][]byte
		var held []*part
		for i, p := range m.parts {
			if js, ok := claudeEmit(p, m.role); ok {
				if got, err := claudeBlock(js, m.role, ""); err == nil {
					if ps, ok := diffPart(p, got); ok {
						sb.lost(i, ps)
						blocks, held = append(blocks, js), append(held, p)
						continue
					}
				}
			}
			sb.drop(i, p)
		}
		natural := naturalShape(held, provClaude, "")
		shape := pickShape(m.form, natural, held, provClaude)
		if formOf(shape, natural) != m.form {
			sb.s.Form = m.form
		}
		sb.message(m, provClaude, false, false)
		o := newObj().str("role", m.role)
		if shape == shapeString {
			o.str("content", held[0].text)
		} else {
			o.raw("content", arrayOf(blocks))
		}
		o.fields(m.extra[provClaude], claudeMsgKeys)
		side, err := sb.bytes()
		if err != nil {
			return nil, err
		}
		if side != nil {
			o.raw(sideKey, side)
		}
		out = append(out, o.done())
	}
	return out, nil
}

// claudeEmit writes p as a block for ctx (a role or ctxResult); ok is false
// when Claude cannot hold p there.
func claudeEmit(p *part, ctx string) (js []byte, ok bool) {
	ex := p.extra[provClaude]
	o := newObj()
	switch p.kind {
	case kindText:
		if p.text == "" { // the API refuses empty text blocks
			return nil, false
		}
		o.str("type", "text").str("text", p.text).fields(ex, claudeTextKeys)
	case kindMedia:
		if ctx != roleUser && ctx != ctxResult {
			return nil, false
		}
		if !isImage(p.mediaType, p.src) {
			return nil, false
		}
		src := newObj()
		if p.src == srcURL {
			src.str("type", "url").str("url", p.url).nested(ex, "source", claudeURLKeys)
		} else {
			src.str("type", "base64").str("media_type", p.mediaType).str("data", p.data).nested(ex, "source", claudeBase64Keys)
		}
		o.str("type", "image").raw("source", src.done()).fields(ex, claudeImageKeys)
	case kindThinking:
		// The API checks the signature of a thinking block: one from
		// elsewhere cannot be sent as a thinking block.
		if ctx != roleAssistant || p.sigFrom != provClaude {
			return nil, false
		}
		o.str("type", "thinking").str("thinking", p.text).str("signature", p.sig).fields(ex, claudeThinkingKeys)
	case kindToolCall:
		if ctx != roleAssistant {
			return nil, false
		}
		o.str("type", "tool_use").str("id", p.id).str("name", p.name).raw("input", argsObject(p.args)).fields(ex, claudeToolUseKeys)
	case kindToolResult:
		if ctx != roleUser {
			return nil, false
		}
		var blocks [][]byte
		var held []*part
		for _, c := range p.content {
			if js, ok := claudeEmit(c, ctxResult); ok {
				blocks, held = append(blocks, js), append(held, c)
			}
		}
		natural := naturalShape(held, provClaude, shapeAbsent)
		o.str("type", "tool_result").str("tool_use_id", p.id)
		switch pickShape(p.form, natural, held, provClaude, shapeAbsent) {
		case shapeString:
			o.str("content", held[0].text)
		case shapeArray:
			o.raw("content", arrayOf(blocks))
		}
		if p.isError != nil {
			o.raw("is_error", boolJSON(*p.isError))
		}
		o.fields(ex, claudeToolResultKeys)
	case kindOpaque:
		if p.provider != provClaude {
			return nil, false
		}
		return p.raw, true
	default:
		return nil, false
	}
	return o.done(), true
}

// isImage reports whether media of mediaType is an image for the formats that
// take images only: a base64 image needs an image/ type, an image by URL may
// have no type.
func isImage(mediaType, src string) bool {
	return strings.HasPrefix(mediaType, "image/") || mediaType == "" && src == srcURL
}

func boolJSON(b bool) []byte {
	if b {
		return []byte("true")
	}
	return []byte("false")
}

// argsObject returns arguments as the JSON object a format that wants an
// object (Claude's input, Gemini's args) holds: the arguments themselves,
// compacted, when they are one, else an empty object (the side field then
// keeps the exact text).
func argsObject(args string) []byte {
	if jsonType([]byte(args)) == "object" && json.Valid([]byte(args)) {
		return compact([]byte(args))
	}
	return []byte("{}")
}
