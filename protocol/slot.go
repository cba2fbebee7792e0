package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Method names of the slot protocol (SPEC §2).
const (
	MethodToolsList = "tools/list"
	MethodToolsCall = "tools/call"
	MethodAgentCard = "agent/card"
	// MethodA2ACard asks a node for its A2A card, signed, with the JSON-RPC
	// URL of the edge that serves it for the node: params {"base":
	// "http(s)://host:port/peers/PEERID", "version": "1.0"|"0.3"}. Open to
	// every caller, as agent/card (docs/a2a.md).
	MethodA2ACard = "agent/a2a-card"
)

// A2ACardParams are the params of MethodA2ACard.
type A2ACardParams struct {
	Base    string `json:"base"`
	Version string `json:"version"`
	// Credentials are what the asking edge accepts at base, for the card's
	// securitySchemes (nil: not said; an older edge).
	Credentials *EdgeCredentials `json:"credentials,omitempty"`
}

// EdgeCredentials says which credentials an edge accepts on its faces
// (docs/spec.md §0), for the A2A cards it serves.
type EdgeCredentials struct {
	// Keys: API keys as Authorization: Bearer.
	Keys bool `json:"keys,omitempty"`
	// OIDCIssuers are the OpenID Connect issuers whose access tokens it
	// accepts.
	OIDCIssuers []string `json:"oidc_issuers,omitempty"`
	// Anonymous: a request without a credential is served (as the policy's
	// "http" caller).
	Anonymous bool `json:"anonymous,omitempty"`
}

// Slot is one JSON-RPC request of a batch. A slot without an id member is a
// notification and gets no response.
type Slot struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	Context *SlotContext    `json:"context,omitempty"`

	// Err is set by ParseRequest when this slot alone is malformed; the
	// server answers it with Err and runs nothing for it.
	Err *Error `json:"-"`
}

// SlotContext carries per-slot options: the provider shape of results and a
// mesh session token (SPEC §6).
type SlotContext struct {
	Provider string `json:"provider,omitempty"`
	Session  string `json:"session,omitempty"`
	// Forwarded is set by a node that forwards the slot for a caller of its
	// own who is not a secret holder (its gateway, a face, an orchestrate
	// subtask): the kind of that caller ("anonymous", "peer"). The receiver
	// then runs the slot as a forwarded caller, "via:<forwarder PeerID>",
	// with what its policy grants that key or "http", never with the
	// forwarder's own grants; a session in such a slot is not honoured.
	Forwarded string `json:"forwarded,omitempty"`
	// Traceparent is the W3C trace context (https://www.w3.org/TR/trace-context/)
	// of the span the slot was sent from: the caller's span on the sending
	// node, so that the receiver's span of the call is its child and the
	// whole request, across hops, has one trace id. It is taken as a
	// traceparent HTTP header is: one that is not valid (or longer than
	// MaxTraceparent, when ParseRequest drops it) is ignored, and the
	// receiver starts a new trace; it is never an error.
	Traceparent string `json:"traceparent,omitempty"`
}

// MaxTraceparent is the longest context.traceparent ParseRequest keeps (a
// version 00 traceparent has 55 characters; a later version may add
// fields). A longer one is dropped, as an invalid one is ignored.
const MaxTraceparent = 256

// IsNotification reports whether the slot has no id and so gets no response.
func (s *Slot) IsNotification() bool { return s.ID == nil }

// CallParams are the params of a tools/call slot.
type CallParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Response is one JSON-RPC response. Exactly one of Result and Error is set.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// ErrorResponse returns a response carrying err for the request id (null when
// id is nil).
func ErrorResponse(id json.RawMessage, err *Error) Response {
	if id == nil {
		id = nullID
	}
	return Response{JSONRPC: "2.0", ID: id, Error: err}
}

// Request is a parsed request: its slots and whether it came as an array.
type Request struct {
	Slots   []Slot
	IsBatch bool
}

// MaxNestingDepth is how deeply arrays and objects may nest in one message,
// the outer array of a batch included. A message nested deeper is refused
// as a whole with -32600 before it is decoded: no slot needs it, and a
// decoder's stack grows with depth (SPEC §2).
const MaxNestingDepth = 64

// ParseRequest decodes one message into slots and applies the batch rules of
// SPEC §2. A non-nil *Error refuses the message as a whole (nesting deeper
// than MaxNestingDepth, bad JSON, an empty array, more than MaxBatchSize
// slots, neither object nor array); the caller answers it with one error
// response and runs nothing. A malformed slot inside a valid batch only sets
// that slot's Err.
//
// Its memory is bounded by the message, not by what the message holds: the
// depth and the slots of a batch are counted by an allocation-free scan
// before anything is decoded, so an 8 MB array of 4 million elements costs
// no allocation beyond the refusal, and an accepted message allocates a small
// multiple of its size.
func ParseRequest(data []byte) (Request, *Error) {
	data = trimJSONSpace(data)
	if len(data) > 0 && data[0] == '{' {
		// The ordinary lone slot: quickSlot follows no deeper than
		// MaxNestingDepth, so what it reads needs no scan first.
		if s, ok := quickSlot(data); ok {
			return Request{Slots: []Slot{finishSlot(s, data, "")}}, nil
		}
	}
	var sh shape
	sh.scan(data)
	if sh.tooDeep {
		return Request{}, Errorf(CodeInvalidRequest, "invalid request: the message nests deeper than %d levels of arrays and objects", MaxNestingDepth)
	}
	// A lone slot is validated by its own decoding (parseSlot), not by a
	// separate pass over it first.
	if len(data) == 0 || data[0] != '{' && !ValidJSON(data) {
		return Request{}, errNotJSON()
	}
	switch data[0] {
	case '{':
		s := parseSlot(data)
		if s.Err != nil && s.Err.Code == CodeParseError {
			return Request{}, s.Err
		}
		return Request{Slots: []Slot{s}}, nil
	case '[':
		n := sh.slots()
		if n == 0 {
			return Request{}, Errorf(CodeInvalidRequest, "invalid request: empty batch")
		}
		if n > MaxBatchSize {
			return Request{}, Errorf(CodeInvalidRequest, "invalid request: batch of %d slots exceeds the limit of %d", n, MaxBatchSize)
		}
		slots := make([]Slot, n)
		start := 1
		for i := range slots {
			end := len(data) - 1 // the closing ']'
			if i < n-1 {
				end = sh.seps[i]
			}
			slots[i] = parseSlot(trimJSONSpace(data[start:end]))
			start = end + 1
		}
		return Request{Slots: slots, IsBatch: true}, nil
	default:
		return Request{}, Errorf(CodeInvalidRequest, "invalid request: expected a slot object or an array of slots")
	}
}

// shape is what one scan of a message learns before it is decoded: whether
// it nests too deeply and, for an array, how many elements it has and where
// the commas between the first MaxBatchSize of them are. It allocates
// nothing.
type shape struct {
	tooDeep bool
	// commas counts the commas directly inside the outer array; value
	// reports whether anything but whitespace is directly inside it.
	commas int
	value  bool
	seps   [MaxBatchSize - 1]int
}

// scan fills sh from data, the trimmed message. It tracks strings (so that
// brackets and commas inside them do not count) and nothing else; it does
// not validate, and stops as soon as the depth passes MaxNestingDepth.
func (sh *shape) scan(data []byte) {
	depth := 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case ']', '}':
			depth--
			continue
		case ',':
			if depth == 1 {
				if sh.commas < len(sh.seps) {
					sh.seps[sh.commas] = i
				}
				sh.commas++
			}
			continue
		}
		if depth == 1 {
			sh.value = true
		}
		switch c {
		case '"':
			i = skipString(data, i) - 1
		case '[', '{':
			depth++
			if depth > MaxNestingDepth {
				sh.tooDeep = true
				return
			}
		}
	}
}

// slots is the number of elements of the scanned array, valid JSON.
func (sh *shape) slots() int {
	if !sh.value {
		return 0
	}
	return sh.commas + 1
}

// parseSlot decodes and checks one slot; problems go to Slot.Err. raw is
// trimmed and is not retained. It is valid JSON unless it is the whole
// message, a lone slot: then invalid JSON sets Err to a -32700 parse error
// for the message as a whole.
func parseSlot(raw []byte) Slot {
	if len(raw) == 0 || raw[0] != '{' {
		return Slot{ID: nullID, Err: Errorf(CodeInvalidRequest, "invalid request: a slot must be a JSON object")}
	}
	// The ordinary slot is read in place (quickSlot); anything else by the
	// decoder, with the case check of its member names.
	s, quick := quickSlot(raw)
	variant := ""
	if !quick {
		// Text that is not JSON is refused before the decoder sees it:
		// the decoder's error would name the JSON pointer where it
		// stopped, built a member name at a time (a 100 KB message with
		// one long name cost 950 KB), and it may find a member of the
		// wrong type before the text ends short. For a lone slot that is
		// a parse error of the message as a whole; a batch's slots are
		// valid JSON already.
		if !ValidJSON(raw) {
			return Slot{Err: errNotJSON()}
		}
		d := new(Slot) // the decoder's, so that s stays off the heap on the quick path
		if err := Unmarshal(raw, d); err != nil {
			if isSyntaxError(err) {
				return Slot{Err: errNotJSON()}
			}
			// Keep the id when it can be read, so the caller can match the error.
			return Slot{ID: exactID(raw), Err: Errorf(CodeInvalidRequest, "invalid request: %s", JSONErrorText(err))}
		}
		s, variant = *d, caseVariant(raw)
	}
	return finishSlot(s, raw, variant)
}

// finishSlot applies the rules of a slot to s, decoded from raw (variant is
// a member name of raw in the wrong case, or ""): what breaks one sets
// s.Err.
func finishSlot(s Slot, raw []byte, variant string) Slot {
	switch {
	case s.ID != nil && !validID(s.ID):
		s.ID, s.Err = nullID, Errorf(CodeInvalidRequest, "invalid request: id must be a string, a number or null")
	case variant != "":
		s.ID, s.Err = exactID(raw), Errorf(CodeInvalidRequest, "invalid request: member names are case-sensitive: %q", variant)
	case s.JSONRPC != "2.0":
		s.Err = Errorf(CodeInvalidRequest, `invalid request: jsonrpc must be "2.0", got %q`, s.JSONRPC)
	case s.Method == "":
		s.Err = Errorf(CodeInvalidRequest, "invalid request: method is missing")
	case s.Context != nil && s.Context.Provider != "" && !ValidProvider(s.Context.Provider):
		s.Err = Errorf(CodeUnsupportedProvider, "unsupported provider %q (want one of claude, openai, gemini, deepseek)", s.Context.Provider)
	}
	if s.Context != nil && len(s.Context.Traceparent) > MaxTraceparent {
		s.Context.Traceparent = ""
	}
	if s.Err != nil && s.Err.Code == CodeInvalidRequest && s.ID == nil {
		// An invalid request is answered with a null id (JSON-RPC 2.0 §5);
		// only a valid slot without id is a notification.
		s.ID = nullID
	}
	return s
}

// slotMembers and contextMembers are the member names of a slot and of its
// context.
var (
	slotMembers    = []string{"jsonrpc", "id", "method", "params", "context"}
	contextMembers = []string{"provider", "session", "forwarded", "traceparent"}
)

// caseVariant returns a member name of the slot object raw (or of its
// context) that differs from a known member only in case, or "". JSON-RPC
// member names are case-sensitive, but encoding/json matches them
// case-insensitively: without this check "ID" would be taken as the id.
// raw is valid JSON; the members are walked in place rather than decoded
// into a map, so an object of a million members costs no more than its
// escaped names.
func caseVariant(raw []byte) string {
	var ctx []byte
	variant := ""
	EachMember(raw, func(key, val []byte) bool {
		if variant = foldedKey(key, slotMembers); variant != "" {
			return false
		}
		if string(key) == "context" {
			ctx = val // the last one, as the decoder takes
		}
		return true
	})
	if variant != "" || len(ctx) == 0 || ctx[0] != '{' {
		return variant
	}
	EachMember(ctx, func(key, _ []byte) bool {
		variant = foldedKey(key, contextMembers)
		return variant == ""
	})
	return variant
}

// exactID returns the member named exactly "id" of the object raw when it is
// a valid id, else null. raw is valid JSON.
func exactID(raw []byte) json.RawMessage {
	var id []byte
	if len(raw) > 0 && raw[0] == '{' {
		EachMember(raw, func(key, val []byte) bool {
			if string(key) == "id" {
				id = val // the last one, as the decoder takes
			}
			return true
		})
	}
	if validID(id) {
		return bytes.Clone(id)
	}
	return nullID
}

// foldedKey returns key as text when it differs from one of names only in
// case, else "".
func foldedKey(key []byte, names []string) string {
	for _, n := range names {
		if string(key) != n && bytes.EqualFold(key, []byte(n)) {
			return string(key)
		}
	}
	return ""
}

// EachMember calls f with the name (unescaped) and the raw value of each
// member of the JSON object obj, in order, until f returns false. obj must
// be valid JSON (a slot's params or arguments are); on anything else it
// stops early and never panics. A name without escapes is passed in place;
// only an escaped one is decoded. It reports whether it walked obj to its
// closing brace with f saying true to every member.
func EachMember(obj []byte, f func(key, val []byte) bool) (complete bool) {
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		end := skipString(obj, i)
		key := obj[i+1 : max(i+1, end-1)]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if json.Unmarshal(obj[i:end], &k) != nil {
				return false
			}
			key = []byte(k)
		}
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		vs := skipSpace(obj, i+1)
		ve := skipValue(obj, vs)
		if ve == vs || !f(key, obj[vs:ve]) {
			return false
		}
		i = skipSpace(obj, ve)
		if i >= len(obj) || obj[i] != ',' {
			break
		}
		i = skipSpace(obj, i+1)
	}
	return i == len(obj)-1 && obj[i] == '}'
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i] == '"'.
// It jumps to the next quote with bytes.IndexByte (vectorised) and looks
// for backslashes only before it: a payload string is passed over at
// memory speed, not byte by byte. Every byte is searched once for a quote
// and at most once for a backslash, so escapes cannot make it quadratic.
func skipString(b []byte, i int) int {
	for i++; i < len(b); {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		end := i + q
		j := i
		for {
			e := bytes.IndexByte(b[j:end], '\\')
			if e < 0 {
				return end + 1
			}
			if j += e + 2; j > end { // the backslash escaped the quote at end
				break
			}
		}
		i = j
	}
	return len(b)
}

// skipValue returns the index after the JSON value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return i
}

// trimJSONSpace trims the four whitespace characters of JSON (RFC 8259),
// and no others: a message wrapped in, say, U+00A0 is not JSON.
func trimJSONSpace(data []byte) []byte {
	return bytes.Trim(data, " \t\r\n")
}

func validID(id json.RawMessage) bool {
	if id == nil {
		return false
	}
	switch id[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// errNotJSON refuses a message that is not valid JSON (or not UTF-8).
func errNotJSON() *Error {
	return Errorf(CodeParseError, "parse error: the message is not valid JSON")
}

// EncodeResponses encodes the responses of a request: an object for a single
// slot, an array for a batch. It returns nil (send nothing) when there is no
// response, as for a notification or a batch of notifications. It is
// AppendResponses to a new slice.
func EncodeResponses(isBatch bool, resps []Response) ([]byte, error) {
	if len(resps) == 0 {
		return nil, nil
	}
	return AppendResponses(make([]byte, 0, responsesSize(resps)), isBatch, resps)
}

// AppendResponses appends the encoding of resps to dst, as EncodeResponses
// does, and returns the extended slice (dst unchanged when resps is empty).
//
// Ids and results are written as they are, not re-scanned: each ID must be a
// JSON id (a slot's from ParseRequest, or nil for null) and each Result one
// valid JSON value (nil for null). Every result a node sends is made valid
// where it is made: encoding/json output, a custom skill's checked output,
// or a peer's answer decoded by ParseResponses. Only the rare Error is
// encoded here.
func AppendResponses(dst []byte, isBatch bool, resps []Response) ([]byte, error) {
	if len(resps) == 0 {
		return dst, nil
	}
	if !isBatch {
		return appendResponse(dst, &resps[0])
	}
	dst = append(dst, '[')
	for i := range resps {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendResponse(dst, &resps[i]); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// responsesSize is the encoded size of resps without their errors, for one
// allocation in the common case.
func responsesSize(resps []Response) int {
	n := 2
	for i := range resps {
		n += len(`{"jsonrpc":"2.0","id":,"result":},`) + len(resps[i].ID) + len(resps[i].Result)
	}
	return n
}

func appendResponse(dst []byte, r *Response) ([]byte, error) {
	id := r.ID
	if len(id) == 0 {
		id = nullID
	}
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	switch {
	case r.Error != nil:
		b, err := json.Marshal(r.Error)
		if err != nil {
			return nil, fmt.Errorf("protocol: encode error response: %w", err)
		}
		dst = append(dst, `,"error":`...)
		dst = append(dst, b...)
	case len(r.Result) == 0:
		dst = append(dst, `,"result":null`...)
	default:
		dst = append(dst, `,"result":`...)
		dst = append(dst, r.Result...)
	}
	return append(dst, '}'), nil
}

// ParseCallParams reads the params of a tools/call slot: an object with a
// string "name" and an optional "arguments". params must be valid JSON, as
// the params of every slot from ParseRequest are (absent params read as
// {}); they are walked in place, not decoded again. Member names match
// exactly (JSON-RPC and MCP names are case-sensitive), the last of a
// repeated member wins, and Arguments is a sub-slice of params. A name that
// is missing, empty or not a string is an error.
func ParseCallParams(params json.RawMessage) (CallParams, *Error) {
	var p CallParams
	bad := func() (CallParams, *Error) {
		return CallParams{}, Errorf(CodeInvalidParams, `invalid params: tools/call needs {"name","arguments"}`)
	}
	params = trimJSONSpace(params)
	if len(params) == 0 {
		return bad()
	}
	if params[0] != '{' {
		return bad()
	}
	var name []byte
	EachMember(params, func(key, val []byte) bool {
		switch string(key) {
		case "name":
			name = val
		case "arguments":
			p.Arguments = val
		}
		return true
	})
	if len(name) < 2 || name[0] != '"' {
		return bad()
	}
	if bytes.IndexByte(name, '\\') < 0 {
		p.Name = string(name[1 : len(name)-1])
	} else if json.Unmarshal(name, &p.Name) != nil {
		return bad()
	}
	if p.Name == "" {
		return bad()
	}
	return p, nil
}

// ParseResponses decodes a response message (object or array) into responses.
func ParseResponses(data []byte) ([]Response, error) {
	return ParseResponsesTo(nil, data)
}

// ParseResponsesTo is ParseResponses appending the responses to dst: a
// caller that has room for them (one response on its stack) allocates no
// slice. On error it returns nil.
func ParseResponsesTo(dst []Response, data []byte) ([]Response, error) {
	data = trimJSONSpace(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("protocol: empty response")
	}
	if data[0] == '[' {
		var rs []Response
		if err := Unmarshal(data, &rs); err != nil {
			return nil, fmt.Errorf("protocol: decode response batch: %w", err)
		}
		if dst == nil {
			return rs, nil
		}
		return append(dst, rs...), nil
	}
	r, ok := quickResponse(data)
	if !ok {
		d := new(Response) // the decoder's, so that r stays off the heap on the quick path
		if err := Unmarshal(data, d); err != nil {
			return nil, fmt.Errorf("protocol: decode response: %w", err)
		}
		r = *d
	}
	return append(dst, r), nil
}
