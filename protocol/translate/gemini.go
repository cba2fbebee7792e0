package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// geminiCodec reads and writes Gemini generateContent contents:
//
//	{"role":"user"|"model","parts":[{"text":...} | {"inlineData":...} |
//	  {"fileData":...} | {"functionCall":...} | {"functionResponse":...}]}
//
// with a leading {"role":"system","parts":[...]} pseudo-message for the
// request's systemInstruction (itself a Content). Parts marked "thought" are
// thinking; "thoughtSignature" is kept as the part's signature. The
// executableCode and codeExecutionResult parts are kept whole. The decoder
// also takes the REST API's snake_case spellings (inline_data, mime_type,
// ...) and writes camelCase.
type geminiCodec struct{}

var (
	geminiMsgKeys = keys("role", "parts", sideKey)
	// geminiData are the fields of which a part holds exactly one.
	geminiData     = []string{"text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode", "codeExecutionResult"}
	geminiPartKeys = keys(append([]string{"thought", "thoughtSignature"}, geminiData...)...)
	// geminiEmitSkip are the part fields never written from extras: all
	// known ones but "thought", which extras hold when it is false.
	geminiEmitSkip = keys(append([]string{"thoughtSignature"}, geminiData...)...)
	geminiInline   = keys("mimeType", "data")
	geminiFile     = keys("mimeType", "fileUri")
	geminiCall     = keys("id", "name", "args")
	geminiResp     = keys("id", "name", "response")
	// geminiSnake maps the snake_case spellings to camelCase, per level.
	geminiSnakePart = map[string]string{"inline_data": "inlineData", "file_data": "fileData",
		"function_call": "functionCall", "function_response": "functionResponse",
		"executable_code": "executableCode", "code_execution_result": "codeExecutionResult",
		"thought_signature": "thoughtSignature"}
	geminiSnakeData = map[string]string{"mime_type": "mimeType", "file_uri": "fileUri"}
)

// camelize renames the snake_case keys of o to camelCase.
func camelize(o jobj, names map[string]string, where string) error {
	for snake, camel := range names {
		v, ok := o[snake]
		if !ok {
			continue
		}
		if _, dup := o[camel]; dup {
			return bad(where, "both %q and %q", snake, camel)
		}
		delete(o, snake)
		o[camel] = v
	}
	return nil
}

func (geminiCodec) decode(items []json.RawMessage) ([]*message, error) {
	msgs := make([]*message, 0, len(items))
	for i, raw := range items {
		where, o, role, err := messageHead(raw, i)
		if err != nil {
			return nil, err
		}
		m := &message{}
		switch role {
		case "user":
			m.role = roleUser
		case "model":
			m.role = roleAssistant
		case "system":
			m.role = roleSystem
		case "function":
			m.role, m.alias = roleUser, "function"
		default:
			return nil, bad(where, "unknown role %q (gemini has user, model, and system for the system instruction)", role)
		}
		praw, ok := o["parts"]
		if !ok {
			return nil, bad(where, "missing \"parts\"")
		}
		items, err := array(praw, "parts", MaxParts, where)
		if err != nil {
			return nil, err
		}
		native := make([]*part, 0, len(items))
		for j, it := range items {
			p, err := geminiPart(it, m.role, fmt.Sprintf("%s: part %d", where, j))
			if err != nil {
				return nil, err
			}
			p.pos = fmt.Sprintf("mcpv2_%d_%d", i, j)
			native = append(native, p)
		}
		m.extra = m.extra.with(provGemini, unknownFields(o, geminiMsgKeys))
		side, err := parseSide(o, where)
		if err != nil {
			return nil, err
		}
		if err := side.apply(m, native, provGemini, where); err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	if err := geminiIDs(msgs); err != nil {
		return nil, err
	}
	return msgs, link(msgs)
}

// geminiPart decodes one part of a message of the given role.
func geminiPart(raw json.RawMessage, role, where string) (*part, error) {
	o, err := object(raw, where)
	if err != nil {
		return nil, err
	}
	if err := camelize(o, geminiSnakePart, where); err != nil {
		return nil, err
	}
	var found []string
	for _, k := range geminiData {
		if _, ok := o[k]; ok {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		has := "none"
		if len(found) > 0 {
			has = strings.Join(found, " and ")
		}
		return nil, bad(where, "a part holds exactly one of %s; this one has %s", strings.Join(geminiData, ", "), has)
	}
	kind := found[0]
	p := &part{where: where}
	if kind == "executableCode" || kind == "codeExecutionResult" {
		if role == roleSystem {
			return nil, bad(where, "a system instruction holds text parts only")
		}
		p.kind, p.provider, p.raw = kindOpaque, provGemini, compact(raw)
		return p, nil
	}
	thought, err := optBool(o, "thought", where)
	if err != nil {
		return nil, err
	}
	if sig, ok, err := str(o, "thoughtSignature", where); err != nil {
		return nil, err
	} else if ok {
		p.sig, p.sigFrom = sig, provGemini
	}
	ex := unknownFields(o, geminiPartKeys)
	if thought != nil && !*thought {
		// "thought": false says nothing; keep it as the unknown field it is.
		if ex == nil {
			ex = map[string]json.RawMessage{}
		}
		ex["thought"] = json.RawMessage("false")
	}
	if thought != nil && *thought && kind != "text" {
		return nil, bad(where, "\"thought\" is set on a part without text")
	}
	if role == roleSystem && kind != "text" {
		return nil, bad(where, "a system instruction holds text parts only")
	}
	// inner decodes the part's data object and keeps its unknown fields.
	inner := func(known keySet) (jobj, string, error) {
		w := where + ": " + kind
		d, err := needObj(o, kind, where)
		if err == nil {
			err = camelize(d, geminiSnakeData, w)
		}
		if err != nil {
			return nil, w, err
		}
		if f := unknownFields(d, known); f != nil {
			if ex == nil {
				ex = map[string]json.RawMessage{}
			}
			ex[kind] = mustMarshal(f)
		}
		return d, w, nil
	}
	switch kind {
	case "text":
		if p.text, err = needStr(o, "text", where); err != nil {
			return nil, err
		}
		p.kind = kindText
		if thought != nil && *thought {
			if role != roleAssistant {
				return nil, bad(where, "a thought can only be in a model message")
			}
			p.kind = kindThinking
		}
	case "inlineData":
		d, w, err := inner(geminiInline)
		if err != nil {
			return nil, err
		}
		p.kind, p.src = kindMedia, srcBase64
		if p.mediaType, err = needStr(d, "mimeType", w); err != nil {
			return nil, err
		}
		if !validMediaType(p.mediaType) {
			return nil, bad(w, "mimeType %q is not a media type", p.mediaType)
		}
		if p.data, err = needStr(d, "data", w); err != nil {
			return nil, err
		}
	case "fileData":
		d, w, err := inner(geminiFile)
		if err != nil {
			return nil, err
		}
		p.kind, p.src = kindMedia, srcURL
		if p.mediaType, _, err = str(d, "mimeType", w); err != nil {
			return nil, err
		}
		if p.url, err = needStr(d, "fileUri", w); err != nil {
			return nil, err
		}
	case "functionCall":
		if role != roleAssistant {
			return nil, bad(where, "a functionCall can only be in a model message")
		}
		d, w, err := inner(geminiCall)
		if err != nil {
			return nil, err
		}
		p.kind = kindToolCall
		if err := geminiID(d, p, w); err != nil {
			return nil, err
		}
		if p.name, err = needID(d, "name", w); err != nil {
			return nil, err
		}
		if args, ok := d["args"]; ok {
			if t := jsonType(args); t != "object" {
				return nil, bad(w, "\"args\" must be an object, not %s", t)
			}
			p.args = string(compact(args))
		}
	case "functionResponse":
		if role != roleUser {
			return nil, bad(where, "a functionResponse can only be in a user message")
		}
		d, w, err := inner(geminiResp)
		if err != nil {
			return nil, err
		}
		p.kind = kindToolResult
		if err := geminiID(d, p, w); err != nil {
			return nil, err
		}
		if p.name, err = needID(d, "name", w); err != nil {
			return nil, err
		}
		resp, err := needRawObj(d, "response", w)
		if err != nil {
			return nil, err
		}
		p.content, p.isError = geminiResponseContent(resp)
	}
	p.extra = p.extra.with(provGemini, ex)
	return p, nil
}

// geminiID reads the optional id of a functionCall or functionResponse.
func geminiID(d jobj, p *part, where string) error {
	id, ok, err := str(d, "id", where)
	switch {
	case err != nil:
		return err
	case !ok:
		p.noID = true
	case id == "":
		return bad(where, "\"id\" must not be empty")
	}
	p.id = id
	return nil
}

// geminiResponseContent reads a functionResponse's response object as a tool
// result's content. Gemini documents {"output": ...} for the output and
// {"error": ...} for an error: a lone string under either is the content (an
// error for "error"); any other object is the content as JSON text.
func geminiResponseContent(resp json.RawMessage) ([]*part, *bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(resp, &m) == nil && len(m) == 1 {
		for k, v := range m {
			var s string
			if (k == "output" || k == "error") && jsonType(v) == "string" && json.Unmarshal(v, &s) == nil {
				var isErr *bool
				if k == "error" {
					isErr = ptr(true)
				}
				return []*part{{kind: kindText, text: s}}, isErr
			}
		}
	}
	return []*part{{kind: kindText, text: string(compact(resp))}}, nil
}

// geminiResponse writes a tool result's content as a functionResponse's
// response object, the inverse of geminiResponseContent where it can be.
func geminiResponse(p *part) []byte {
	isErr := p.isError != nil && *p.isError
	if len(p.content) == 1 && p.content[0].kind == kindText && !isErr {
		// Content that is itself a response object is written as it is.
		t := []byte(p.content[0].text)
		if jsonType(t) == "object" && json.Valid(t) {
			if c, e := geminiResponseContent(t); e == nil && c[0].text == string(t) {
				return t
			}
		}
	}
	var texts []string
	for _, c := range p.content {
		if c.kind == kindText {
			texts = append(texts, c.text)
		}
	}
	key := "output"
	if isErr {
		key = "error"
	}
	return newObj().str(key, strings.Join(texts, "\n")).done()
}

// idRef is a tool call or result as geminiResolve sees it.
type idRef struct {
	call     bool
	id, name string
	noID     bool   // the call or response came without an id
	pos      string // the base of a made-up id: mcpv2_<message>_<part>
	callName string // set for a result: the name of the call it answers
	failed   bool   // set for a result that answers no call
}

// geminiResolve gives each call without an id one made from its position and
// unique in the history, and matches each result: by id, or when it has none,
// to the earliest earlier call of its name that no result has answered yet.
func geminiResolve(refs []*idRef) {
	used := map[string]bool{}
	for _, r := range refs {
		if r.call && !r.noID {
			used[r.id] = true
		}
	}
	for _, r := range refs {
		if r.call && r.noID {
			id := r.pos
			for n := 1; used[id]; n++ {
				id = fmt.Sprintf("%s_%d", r.pos, n)
			}
			used[id] = true
			r.id = id
		}
	}
	byID := map[string]*idRef{}
	queue := map[string][]*idRef{} // unanswered calls by name, earliest first
	answered := map[*idRef]bool{}
	for _, r := range refs {
		if r.call {
			byID[r.id] = r
			queue[r.name] = append(queue[r.name], r)
			continue
		}
		var c *idRef
		if !r.noID {
			c = byID[r.id]
		} else {
			q := queue[r.name]
			for len(q) > 0 && answered[q[0]] {
				q = q[1:]
			}
			if len(q) > 0 {
				c = q[0]
			}
			queue[r.name] = q
		}
		if c == nil {
			r.failed = true
			continue
		}
		answered[c] = true
		r.id, r.callName = c.id, c.name
	}
}

// geminiIDs resolves the ids of decoded messages (see geminiResolve).
func geminiIDs(msgs []*message) error {
	var refs []*idRef
	var parts []*part
	for _, m := range msgs {
		for _, p := range m.parts {
			if p.kind == kindToolCall || p.kind == kindToolResult {
				refs = append(refs, &idRef{call: p.kind == kindToolCall, id: p.id, name: p.name, noID: p.noID, pos: p.pos})
				parts = append(parts, p)
			}
		}
	}
	geminiResolve(refs)
	for i, r := range refs {
		p := parts[i]
		if r.failed {
			if p.noID {
				return bad(p.where, "functionResponse %q answers no earlier functionCall of that name", p.name)
			}
			return bad(p.where, "functionResponse id %q matches no earlier functionCall", p.id)
		}
		p.id = r.id
		if p.noID {
			p.synthetic = true
		}
		if !r.call && p.name == r.callName {
			p.name = "" // the same as its call's: not worth keeping
		}
	}
	return nil
}

func (geminiCodec) encode(msgs []*message) ([]json.RawMessage, error) {
	type held struct {
		i  int // index in the message's parts
		p  *part
		ps *partSide
	}
	type enc struct {
		held []held
		sb   sideBuilder
	}
	encs := make([]enc, len(msgs))
	callName := map[string]string{} // id → name of the latest call so far
	respName := map[*part]string{}  // the name a result is written with
	expName := map[*part]string{}   // the name of the call a result answers
	// First pass: which parts Gemini holds, and what they lose, with every
	// id written.
	for mi, m := range msgs {
		e := &encs[mi]
		for i, p := range m.parts {
			switch p.kind {
			case kindToolCall:
				callName[p.id] = p.name
			case kindToolResult:
				expName[p] = callName[p.id]
				respName[p] = p.name
				if p.name == "" {
					respName[p] = callName[p.id]
				}
			}
			if js, ok := geminiEmit(p, m.role, false, respName[p]); ok {
				if got, err := geminiPart(js, m.role, ""); err == nil {
					// The ids come out as the second pass decides.
					got.synthetic = p.synthetic
					if got.kind == kindToolResult && got.name == expName[p] {
						got.name = ""
					}
					if ps, ok := diffPart(p, got); ok {
						e.held = append(e.held, held{i, p, ps})
						continue
					}
				}
			}
			e.sb.drop(i, p)
		}
	}
	// Second pass: leave out the made-up ids that the decoder will make up
	// again the same, or match the same.
	omit := map[*part]bool{}
	for _, e := range encs {
		for _, h := range e.held {
			if h.p.synthetic && (h.p.kind == kindToolCall || h.p.kind == kindToolResult) {
				omit[h.p] = true
			}
		}
	}
	for round := 0; len(omit) > 0; round++ {
		if round == 4 { // does not settle: write every id
			omit = map[*part]bool{}
			break
		}
		var refs []*idRef
		var parts []*part
		for mi, m := range msgs {
			k, heldIdx := 0, map[*part]int{}
			for _, h := range encs[mi].held {
				heldIdx[h.p] = k
				k++
			}
			for _, p := range m.parts {
				if p.kind != kindToolCall && p.kind != kindToolResult {
					continue
				}
				r := &idRef{call: p.kind == kindToolCall, id: p.id, name: p.name}
				if j, ok := heldIdx[p]; ok {
					r.noID, r.pos = omit[p], fmt.Sprintf("mcpv2_%d_%d", mi, j)
					if !r.call {
						r.name = respName[p]
					}
				}
				if r.noID {
					r.id = ""
				}
				refs, parts = append(refs, r), append(parts, p)
			}
		}
		geminiResolve(refs)
		changed := false
		for i, r := range refs {
			p := parts[i]
			if omit[p] && (r.failed || r.id != p.id || !r.call && r.callName != expName[p]) {
				delete(omit, p)
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	out := make([]json.RawMessage, 0, len(msgs))
	for mi, m := range msgs {
		e := &encs[mi]
		parts := make([][]byte, 0, len(e.held))
		for _, h := range e.held {
			js, _ := geminiEmit(h.p, m.role, omit[h.p], respName[h.p])
			ps := h.ps
			if h.p.synthetic && !omit[h.p] {
				if ps == nil {
					ps = &partSide{}
				}
				ps.SyntheticID = true
			}
			e.sb.lost(h.i, ps)
			parts = append(parts, js)
		}
		if m.form != "" {
			e.sb.s.Form = m.form
		}
		e.sb.message(m, provGemini, m.alias == "function", false)
		role := map[string]string{roleSystem: "system", roleUser: "user", roleAssistant: "model"}[m.role]
		if m.alias == "function" {
			role = "function"
		}
		o := newObj().str("role", role).raw("parts", arrayOf(parts)).fields(m.extra[provGemini], geminiMsgKeys)
		side, err := e.sb.bytes()
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

// geminiEmit writes p as a part of a message of the given role; ok is false
// when Gemini cannot hold p there. omitID leaves a call's or result's id out;
// name is the name a result is written with.
func geminiEmit(p *part, role string, omitID bool, name string) (js []byte, ok bool) {
	ex := p.extra[provGemini]
	o := newObj()
	if (p.kind == kindText || p.kind == kindThinking) && p.text == "" {
		return nil, false // the API refuses empty text parts
	}
	switch p.kind {
	case kindText:
		o.str("text", p.text)
	case kindThinking:
		if role != roleAssistant {
			return nil, false
		}
		o.str("text", p.text).raw("thought", []byte("true"))
	case kindMedia:
		if role == roleSystem {
			return nil, false
		}
		d := newObj()
		if p.src == srcBase64 {
			d.str("mimeType", p.mediaType).str("data", p.data).nested(ex, "inlineData", geminiInline)
			o.raw("inlineData", d.done())
		} else {
			if p.mediaType != "" {
				d.str("mimeType", p.mediaType)
			}
			d.str("fileUri", p.url).nested(ex, "fileData", geminiFile)
			o.raw("fileData", d.done())
		}
	case kindToolCall:
		if role != roleAssistant {
			return nil, false
		}
		d := newObj()
		if !omitID {
			d.str("id", p.id)
		}
		d.str("name", p.name)
		if p.args != "" {
			d.raw("args", argsObject(p.args))
		}
		o.raw("functionCall", d.nested(ex, "functionCall", geminiCall).done())
	case kindToolResult:
		if role != roleUser {
			return nil, false
		}
		d := newObj()
		if !omitID {
			d.str("id", p.id)
		}
		d.str("name", name).raw("response", geminiResponse(p))
		o.raw("functionResponse", d.nested(ex, "functionResponse", geminiResp).done())
	case kindOpaque:
		if p.provider != provGemini || role == roleSystem {
			return nil, false
		}
		return p.raw, true
	default:
		return nil, false
	}
	if p.sigFrom == provGemini {
		o.str("thoughtSignature", p.sig)
	}
	return o.fields(ex, geminiEmitSkip).done(), true
}
