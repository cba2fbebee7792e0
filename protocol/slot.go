package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Method names of the slot protocol (SPEC §2).
const (
	MethodToolsList = "tools/list"
	MethodToolsCall = "tools/call"
	MethodAgentCard = "agent/card"
)

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
}

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

// ParseRequest decodes one message into slots and applies the batch rules of
// SPEC §2. A non-nil *Error refuses the message as a whole (bad JSON, an
// empty array, more than MaxBatchSize slots, neither object nor array); the
// caller answers it with one error response and runs nothing. A malformed
// slot inside a valid batch only sets that slot's Err.
func ParseRequest(data []byte) (Request, *Error) {
	data = trimJSONSpace(data)
	if !json.Valid(data) || !utf8.Valid(data) {
		return Request{}, Errorf(CodeParseError, "parse error: the message is not valid JSON")
	}
	switch data[0] {
	case '{':
		return Request{Slots: []Slot{parseSlot(data)}}, nil
	case '[':
		var raws []json.RawMessage
		if err := json.Unmarshal(data, &raws); err != nil {
			return Request{}, Errorf(CodeParseError, "parse error: %v", err)
		}
		if len(raws) == 0 {
			return Request{}, Errorf(CodeInvalidRequest, "invalid request: empty batch")
		}
		if len(raws) > MaxBatchSize {
			return Request{}, Errorf(CodeInvalidRequest, "invalid request: batch of %d slots exceeds the limit of %d", len(raws), MaxBatchSize)
		}
		slots := make([]Slot, len(raws))
		for i, raw := range raws {
			slots[i] = parseSlot(raw)
		}
		return Request{Slots: slots, IsBatch: true}, nil
	default:
		return Request{}, Errorf(CodeInvalidRequest, "invalid request: expected a slot object or an array of slots")
	}
}

// parseSlot decodes and checks one slot; problems go to Slot.Err.
func parseSlot(raw json.RawMessage) Slot {
	var s Slot
	if len(raw) == 0 || raw[0] != '{' {
		return Slot{ID: nullID, Err: Errorf(CodeInvalidRequest, "invalid request: a slot must be a JSON object")}
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		// Keep the id when it can be read, so the caller can match the error.
		return Slot{ID: exactID(raw), Err: Errorf(CodeInvalidRequest, "invalid request: %s", jsonErrorText(err))}
	}
	variant := caseVariant(raw)
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
	if s.Err != nil && s.Err.Code == CodeInvalidRequest && s.ID == nil {
		// An invalid request is answered with a null id (JSON-RPC 2.0 §5);
		// only a valid slot without id is a notification.
		s.ID = nullID
	}
	return s
}

// caseVariant returns a member name of the slot object raw (or of its
// context) that differs from a known member only in case, or "". JSON-RPC
// member names are case-sensitive, but encoding/json matches them
// case-insensitively: without this check "ID" would be taken as the id.
func caseVariant(raw json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	if k := foldedKey(m, "jsonrpc", "id", "method", "params", "context"); k != "" {
		return k
	}
	var ctx map[string]json.RawMessage
	if json.Unmarshal(m["context"], &ctx) != nil {
		return ""
	}
	return foldedKey(ctx, "provider", "session")
}

// exactID returns the member named exactly "id" of the object raw when it is
// a valid id, else null.
func exactID(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	if id := m["id"]; validID(id) {
		return id
	}
	return nullID
}

func foldedKey(m map[string]json.RawMessage, names ...string) string {
	for k := range m {
		for _, n := range names {
			if k != n && strings.EqualFold(k, n) {
				return k
			}
		}
	}
	return ""
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

// jsonErrorText turns a decoding error into a short text that names the field
// without Go type names.
func jsonErrorText(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return fmt.Sprintf("field %q has the wrong type (%s)", te.Field, te.Value)
	}
	return err.Error()
}

// EncodeResponses encodes the responses of a request: an object for a single
// slot, an array for a batch. It returns nil (send nothing) when there is no
// response, as for a notification or a batch of notifications.
func EncodeResponses(isBatch bool, resps []Response) ([]byte, error) {
	if len(resps) == 0 {
		return nil, nil
	}
	if !isBatch {
		return json.Marshal(resps[0])
	}
	return json.Marshal(resps)
}

// ParseResponses decodes a response message (object or array) into responses.
func ParseResponses(data []byte) ([]Response, error) {
	data = trimJSONSpace(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("protocol: empty response")
	}
	if data[0] == '[' {
		var rs []Response
		if err := json.Unmarshal(data, &rs); err != nil {
			return nil, fmt.Errorf("protocol: decode response batch: %w", err)
		}
		return rs, nil
	}
	var r Response
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("protocol: decode response: %w", err)
	}
	return []Response{r}, nil
}
