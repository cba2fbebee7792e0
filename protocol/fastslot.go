package protocol

import "encoding/json"

// The slot and response of an ordinary call have one shape: a few members
// with exact names, each once, string members without escapes. For those,
// quickSlot and quickResponse read the members in place and check every
// value with sureValue, instead of handing the text to the JSON v2 decoder,
// whose reflection, per-member bookkeeping and byte-at-a-time string checks
// were most of what ParseRequest cost (docs/benchmarks.md). Like sureJSON
// they are one-sided: anything else (a repeated or escaped member name, a
// case variant, a null, a member of an unexpected type, text that is not
// JSON) is left to the decoder, and FuzzQuickSlot and FuzzQuickResponse hold
// them to giving exactly what it gives.

// member bits of quickSlot and quickResponse, to find a repeated member.
const (
	memJSONRPC = 1 << iota
	memID
	memMethod
	memParams
	memContext
	memResult
	memError
)

// quickMembers walks the members of the object obj (trimmed, obj[0] ==
// '{') and calls f with each name (plain: no escapes) and the index of its
// value, which f checks and returns the end of (ok false: not sure). It
// reports false when it is not sure of obj: a name it cannot take in place,
// a value f is not sure of, anything but whitespace after the object.
func quickMembers(obj []byte, f func(name []byte, at int) (end int, ok bool)) bool {
	i := skipSpace(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return i == len(obj)-1
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return false
		}
		ne := plainName(obj, i+1)
		if ne < 0 {
			return false
		}
		name := obj[i+1 : ne]
		i = skipSpace(obj, ne+1)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		end, ok := f(name, skipSpace(obj, i+1))
		if !ok {
			return false
		}
		i = skipSpace(obj, end)
		if i >= len(obj) {
			return false
		}
		switch obj[i] {
		case '}':
			return i == len(obj)-1
		case ',':
			i = skipSpace(obj, i+1)
		default:
			return false
		}
	}
}

// plainName returns the index of the quote that closes the string whose
// content starts at b[i], when that content is printable ASCII without
// escapes; else -1.
func plainName(b []byte, i int) int {
	for ; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i
		case c < 0x20 || c >= 0x80 || c == '\\':
			return -1
		}
	}
	return -1
}

// plainString returns the end of the string value at b[i] and its content
// when the content is printable ASCII without escapes (as method names and
// versions are); ok false otherwise.
func plainString(b []byte, i int) (end int, content []byte, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return i, nil, false
	}
	n := plainRun(b[i+1:])
	q := plainName(b, i+1+n)
	if q < 0 {
		return i, nil, false
	}
	return q + 1, b[i+1 : q], true
}

// isFoldOf reports a name that differs from one of names only in case.
func isFoldOf(name []byte, names []string) bool {
	return foldedKey(name, names) != ""
}

// quickSlot decodes the slot object raw (trimmed) as Unmarshal would, when
// it is sure of it (see above); ok false leaves raw to parseSlot's decoder.
// The id and params are copied, in one allocation.
func quickSlot(raw []byte) (s Slot, ok bool) {
	var seen int
	var jsonrpc, method, id, params []byte
	var ctx *SlotContext
	ok = quickMembers(raw, func(name []byte, at int) (int, bool) {
		switch string(name) {
		case "jsonrpc":
			end, v, ok := plainString(raw, at)
			jsonrpc = v
			return end, ok && once(&seen, memJSONRPC)
		case "method":
			end, v, ok := plainString(raw, at)
			method = v
			return end, ok && once(&seen, memMethod)
		case "id":
			if at >= len(raw) || raw[at] != '"' && raw[at] != '-' && (raw[at] < '0' || raw[at] > '9') {
				return at, false // null and the wrong types: the decoder's
			}
			end, ok := sureValue(raw, at, 1)
			id = raw[at:end]
			return end, ok && once(&seen, memID)
		case "params":
			if at >= len(raw) || raw[at] == 'n' {
				return at, false
			}
			end, ok := sureValue(raw, at, 1)
			params = raw[at:end]
			return end, ok && once(&seen, memParams)
		case "context":
			if at >= len(raw) || raw[at] != '{' {
				return at, false
			}
			end, ok := sureValue(raw, at, 1)
			if !ok || !once(&seen, memContext) {
				return end, false
			}
			ctx, ok = quickContext(raw[at:end])
			return end, ok
		}
		if isFoldOf(name, slotMembers) {
			return at, false // a case variant: parseSlot words the refusal
		}
		return sureValue(raw, at, 1)
	})
	if !ok {
		return Slot{}, false
	}
	s.JSONRPC = internString(jsonrpc, "2.0")
	s.Method = internMethod(method)
	if id != nil || params != nil {
		buf := make([]byte, len(id)+len(params))
		copy(buf, id)
		copy(buf[len(id):], params)
		if id != nil {
			s.ID = buf[:len(id):len(id)]
		}
		if params != nil {
			s.Params = buf[len(id):]
		}
	}
	s.Context = ctx
	return s, true
}

// quickContext decodes a slot's context object obj, checked valid JSON:
// each member it knows once, as a plain string.
func quickContext(obj []byte) (*SlotContext, bool) {
	var c SlotContext
	seen := 0
	ok := quickMembers(obj, func(name []byte, at int) (int, bool) {
		var dst *string
		bit := 0
		switch string(name) {
		case "provider":
			dst, bit = &c.Provider, 1
		case "session":
			dst, bit = &c.Session, 2
		case "forwarded":
			dst, bit = &c.Forwarded, 4
		case "traceparent":
			dst, bit = &c.Traceparent, 8
		default:
			if isFoldOf(name, contextMembers) {
				return at, false
			}
			return sureValue(obj, at, 2)
		}
		end, v, ok := plainString(obj, at)
		if !ok || seen&bit != 0 {
			return end, false
		}
		seen |= bit
		*dst = string(v)
		return end, true
	})
	if !ok {
		return nil, false
	}
	return &c, true
}

// internString is string(b), without an allocation when b is known.
func internString(b []byte, known string) string {
	if string(b) == known {
		return known
	}
	return string(b)
}

// internMethod is string(b), without an allocation for the protocol's
// methods.
func internMethod(b []byte) string {
	switch string(b) {
	case MethodToolsCall:
		return MethodToolsCall
	case MethodToolsList:
		return MethodToolsList
	case MethodAgentCard:
		return MethodAgentCard
	case MethodA2ACard:
		return MethodA2ACard
	}
	return string(b)
}

// responseMembers are the member names of a response.
var responseMembers = []string{"jsonrpc", "id", "result", "error"}

// quickResponse decodes the response object data (trimmed) as Unmarshal
// would, when it is sure of it: a result (not null) and a string or number
// id, each member once. An error response, the rare one, is left to the
// decoder. The id and result are copied, in one allocation.
func quickResponse(data []byte) (r Response, ok bool) {
	if len(data) == 0 || data[0] != '{' {
		return Response{}, false
	}
	var seen int
	var jsonrpc, id, result []byte
	ok = quickMembers(data, func(name []byte, at int) (int, bool) {
		switch string(name) {
		case "jsonrpc":
			end, v, ok := plainString(data, at)
			jsonrpc = v
			return end, ok && once(&seen, memJSONRPC)
		case "id":
			if at >= len(data) || data[at] != '"' && data[at] != '-' && (data[at] < '0' || data[at] > '9') {
				return at, false
			}
			end, ok := sureValue(data, at, 1)
			id = data[at:end]
			return end, ok && once(&seen, memID)
		case "result":
			if at >= len(data) || data[at] == 'n' {
				return at, false
			}
			end, ok := sureValue(data, at, 1)
			result = data[at:end]
			return end, ok && once(&seen, memResult)
		}
		if isFoldOf(name, responseMembers) {
			return at, false
		}
		return sureValue(data, at, 1)
	})
	if !ok || result == nil {
		return Response{}, false
	}
	r.JSONRPC = internString(jsonrpc, "2.0")
	buf := make([]byte, len(id)+len(result))
	copy(buf, id)
	copy(buf[len(id):], result)
	if id != nil {
		r.ID = json.RawMessage(buf[:len(id):len(id)])
	}
	r.Result = buf[len(id):]
	return r, true
}

// once sets bit in seen and reports that it was not set.
func once(seen *int, bit int) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}
