package skills

import (
	"bytes"
	"encoding/json"
	"math"

	"github.com/mcpv2/mcpv2/protocol"
)

// quickSchema is a shortcut past jsonschema-go for the plain object
// schemas that most skills have: typed properties, required members, and
// additionalProperties false. jsonschema-go walks any instance by
// reflection and allocates about two dozen objects for even a one-member
// object, a quarter of a ping's time in Registry.Call (docs/benchmarks.md).
//
// It is one-sided: when accepts says yes, the library would too (the fuzz
// target FuzzQuickSchema holds that); when it says no, Call asks the
// library, whose answer and error message stand. A schema with any keyword
// outside the few it knows gets no quickSchema at all.
type quickSchema struct {
	props    map[string]jsonTypes
	required []string
	// closed is additionalProperties: false.
	closed bool
}

// jsonTypes is a set of JSON Schema type names; 0 allows any value.
type jsonTypes uint8

const (
	typeNull jsonTypes = 1 << iota
	typeBoolean
	typeObject
	typeArray
	typeNumber
	typeInteger
	typeString
)

var typeNames = map[string]jsonTypes{
	"null": typeNull, "boolean": typeBoolean, "object": typeObject, "array": typeArray,
	"number": typeNumber, "integer": typeInteger, "string": typeString,
}

// newQuickSchema returns the shortcut for the schema document raw, or nil
// when raw uses anything it does not know.
func newQuickSchema(raw []byte) *quickSchema {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return nil
	}
	q := &quickSchema{props: map[string]jsonTypes{}}
	for k, v := range top {
		switch k {
		case "description", "title":
		case "type":
			if t, ok := parseTypes(v); !ok || t != typeObject {
				return nil
			}
		case "required":
			if json.Unmarshal(v, &q.required) != nil {
				return nil
			}
		case "additionalProperties":
			if string(v) != "false" {
				return nil
			}
			q.closed = true
		case "properties":
			var props map[string]map[string]json.RawMessage
			if json.Unmarshal(v, &props) != nil {
				return nil
			}
			for name, p := range props {
				var t jsonTypes
				for pk, pv := range p {
					switch pk {
					case "description", "title":
					case "type":
						var ok bool
						if t, ok = parseTypes(pv); !ok {
							return nil
						}
					default:
						return nil
					}
				}
				q.props[name] = t
			}
		default:
			return nil
		}
	}
	if _, typed := top["type"]; !typed {
		return nil
	}
	return q
}

// parseTypes reads a "type" value: a name or a list of names.
func parseTypes(raw json.RawMessage) (jsonTypes, bool) {
	var names []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		names = []string{one}
	} else if json.Unmarshal(raw, &names) != nil || len(names) == 0 {
		return 0, false
	}
	var t jsonTypes
	for _, n := range names {
		bit, ok := typeNames[n]
		if !ok {
			return 0, false
		}
		t |= bit
	}
	return t, true
}

// accepts reports that inst, a decoded JSON value, surely satisfies the
// schema. False means "ask the library", not "invalid".
func (q *quickSchema) accepts(inst any) bool {
	obj, ok := inst.(map[string]any)
	if !ok {
		return false
	}
	for _, name := range q.required {
		if _, ok := obj[name]; !ok {
			return false
		}
	}
	for name, v := range obj {
		t, known := q.props[name]
		if !known {
			if q.closed {
				return false
			}
			continue
		}
		if t != 0 && !t.has(v) {
			return false
		}
	}
	return true
}

// acceptsRaw is accepts on the arguments as they came, JSON text that is
// not decoded first: the members are walked in place and each value's type
// read from its first byte, so valid arguments cost no decoding beyond the
// skill's own. A member name that repeats is checked every time (the
// decoded value keeps the last). False means "ask the library".
func (q *quickSchema) acceptsRaw(args []byte) bool {
	args = bytes.TrimSpace(args)
	if len(args) < 2 || args[0] != '{' {
		return false
	}
	need := len(q.required)
	var seen uint64 // bit i: required[i] was present; need <= 64 below
	if need > 64 {
		return false
	}
	ok := protocol.EachMember(args, func(key, val []byte) bool {
		for i, r := range q.required {
			if string(key) == r {
				seen |= 1 << i
			}
		}
		t, known := q.props[string(key)]
		if !known {
			return !q.closed
		}
		return t == 0 || t.hasRaw(val)
	})
	return ok && seen == 1<<need-1
}

// hasRaw reports that the JSON text v is surely one of the types of t,
// from its first byte (and, for a number, its characters).
func (t jsonTypes) hasRaw(v []byte) bool {
	switch v[0] {
	case 'n':
		return t&typeNull != 0 && string(v) == "null"
	case 't':
		return t&typeBoolean != 0 && string(v) == "true"
	case 'f':
		return t&typeBoolean != 0 && string(v) == "false"
	case '"':
		return t&typeString != 0
	case '{':
		return t&typeObject != 0
	case '[':
		return t&typeArray != 0
	}
	if !isNumber(v) {
		return false
	}
	if t&typeNumber != 0 {
		return true
	}
	// An integer beyond doubt: digits only, well inside float64's exact
	// range (15 digits < 2^53).
	digits := bytes.TrimPrefix(v, []byte("-"))
	if t&typeInteger == 0 || len(digits) == 0 || len(digits) > 15 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isNumber reports that v is a JSON number (RFC 8259 §6).
func isNumber(v []byte) bool {
	i := 0
	digits := func() bool { // at least one digit at i, all of them consumed
		start := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(v) && v[i] == '-' {
		i++
	}
	if i < len(v) && v[i] == '0' {
		i++
	} else if i >= len(v) || v[i] < '1' || v[i] > '9' || !digits() {
		return false
	}
	if i < len(v) && v[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(v)
}

// has reports that v is surely of one of the types of t.
func (t jsonTypes) has(v any) bool {
	switch v := v.(type) {
	case nil:
		return t&typeNull != 0
	case bool:
		return t&typeBoolean != 0
	case string:
		return t&typeString != 0
	case map[string]any:
		return t&typeObject != 0
	case []any:
		return t&typeArray != 0
	case float64:
		if t&typeNumber != 0 {
			return true
		}
		// An integer well inside float64's exact range, beyond doubt.
		return t&typeInteger != 0 && v == math.Trunc(v) && math.Abs(v) < 1<<53
	}
	return false
}
