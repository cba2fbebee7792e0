package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// bad returns an ErrInvalidHistory that says what was wrong (format, args)
// and where.
func bad(where, format string, args ...any) error {
	return fmt.Errorf("translate: %s: %s: %w", where, fmt.Sprintf(format, args...), ErrInvalidHistory)
}

// jobj is a decoded JSON object with its values still raw.
type jobj map[string]json.RawMessage

// jsonType names the JSON type of a valid value: object, array, string,
// number, boolean or null.
func jsonType(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// object decodes raw as a JSON object.
func object(raw json.RawMessage, where string) (jobj, error) {
	if t := jsonType(raw); t != "object" {
		return nil, bad(where, "must be a JSON object, not %s", t)
	}
	var o jobj
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, bad(where, "%v", err)
	}
	return o, nil
}

// str reads key as a string; present is false when the key is missing. A key
// that holds something else than a string is an error.
func str(o jobj, key, where string) (s string, present bool, err error) {
	raw, ok := o[key]
	if !ok {
		return "", false, nil
	}
	if t := jsonType(raw); t != "string" {
		return "", true, bad(where, "%q must be a string, not %s", key, t)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, bad(where, "%q: %v", key, err)
	}
	return s, true, nil
}

// needStr reads key as a string that must be present.
func needStr(o jobj, key, where string) (string, error) {
	s, ok, err := str(o, key, where)
	if err == nil && !ok {
		err = bad(where, "missing %q", key)
	}
	return s, err
}

// needID reads key as a string that must be present and not empty.
func needID(o jobj, key, where string) (string, error) {
	s, err := needStr(o, key, where)
	if err == nil && s == "" {
		err = bad(where, "%q must not be empty", key)
	}
	return s, err
}

// optBool reads key as a boolean; nil when the key is missing.
func optBool(o jobj, key, where string) (*bool, error) {
	raw, ok := o[key]
	if !ok {
		return nil, nil
	}
	if t := jsonType(raw); t != "boolean" {
		return nil, bad(where, "%q must be a boolean, not %s", key, t)
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, bad(where, "%q: %v", key, err)
	}
	return &b, nil
}

// needObj reads key as an object that must be present.
func needObj(o jobj, key, where string) (jobj, error) {
	raw, err := needRawObj(o, key, where)
	if err != nil {
		return nil, err
	}
	return object(raw, where+": "+key)
}

// needRawObj returns the JSON object o[key] undecoded (tool arguments and
// results keep their exact bytes).
func needRawObj(o jobj, key, where string) (json.RawMessage, error) {
	raw, ok := o[key]
	if !ok {
		return nil, bad(where, "missing %q", key)
	}
	if t := jsonType(raw); t != "object" {
		return nil, bad(where, "%q must be an object, not %s", key, t)
	}
	return raw, nil
}

// array decodes raw as a JSON array of at most limit elements; what names the
// elements in the error.
func array(raw json.RawMessage, what string, limit int, where string) ([]json.RawMessage, error) {
	if t := jsonType(raw); t != "array" {
		return nil, bad(where, "%s must be an array, not %s", what, t)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, bad(where, "%s: %v", what, err)
	}
	if len(items) > limit {
		return nil, bad(where, "%d %s, more than the limit of %d", len(items), what, limit)
	}
	return items, nil
}

// keySet is a set of field names.
type keySet map[string]bool

func keys(names ...string) keySet {
	s := make(keySet, len(names))
	for _, n := range names {
		s[n] = true
	}
	return s
}

// unknownFields returns the fields of o that known does not name, compacted,
// or nil.
func unknownFields(o jobj, known keySet) map[string]json.RawMessage {
	var out map[string]json.RawMessage
	for k, v := range o {
		if known[k] {
			continue
		}
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		out[k] = compact(v)
	}
	return out
}

// compact returns raw, a valid JSON value, without insignificant space.
func compact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return json.RawMessage(raw)
	}
	return b.Bytes()
}

// quote returns s as a JSON string, without escaping <, > and &.
func quote(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// marshal returns v as JSON, without escaping <, > and &.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// arrayOf joins JSON values into a JSON array.
func arrayOf[T ~[]byte](items []T) json.RawMessage {
	b := []byte{'['}
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

// objBuf writes a JSON object field by field, in the order of the calls.
type objBuf struct{ b []byte }

func newObj() *objBuf { return &objBuf{b: []byte{'{'}} }

// raw adds a field whose value is already JSON.
func (o *objBuf) raw(k string, v []byte) *objBuf {
	if len(o.b) > 1 {
		o.b = append(o.b, ',')
	}
	o.b = append(o.b, quote(k)...)
	o.b = append(o.b, ':')
	o.b = append(o.b, v...)
	return o
}

// str adds a string field.
func (o *objBuf) str(k, v string) *objBuf { return o.raw(k, quote(v)) }

// fields adds the fields of m whose names skip does not hold, sorted by name.
func (o *objBuf) fields(m map[string]json.RawMessage, skip keySet) *objBuf {
	names := make([]string, 0, len(m))
	for k := range m {
		if !skip[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		o.raw(k, m[k])
	}
	return o
}

// nested adds the fields that extra holds for the nested object named name
// (see extras), except those that skip holds.
func (o *objBuf) nested(extra map[string]json.RawMessage, name string, skip keySet) *objBuf {
	raw, ok := extra[name]
	if !ok || jsonType(raw) != "object" {
		return o
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return o
	}
	return o.fields(m, skip)
}

// done returns the object.
func (o *objBuf) done() []byte { return append(o.b, '}') }

// validMediaType reports whether mt can stand as a media type in every format:
// not empty and without a comma (it ends the header of a data: URL).
func validMediaType(mt string) bool {
	return mt != "" && !strings.ContainsAny(mt, ",")
}

// dataURL returns a base64 data: URL.
func dataURL(mediaType, data string) string {
	return "data:" + mediaType + ";base64," + data
}

// parseDataURL splits a base64 data: URL of an image into its media type and
// data; ok is false for anything else.
func parseDataURL(u string) (mediaType, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mediaType, found = strings.CutSuffix(meta, ";base64")
	if !found || !strings.HasPrefix(mediaType, "image/") {
		return "", "", false
	}
	return mediaType, data, true
}

// messageHead decodes what every provider's message starts with: message i
// must be an object with a string "role". where names it in errors.
func messageHead(raw json.RawMessage, i int) (where string, o jobj, role string, err error) {
	where = fmt.Sprintf("message %d", i)
	if o, err = object(raw, where); err != nil {
		return where, nil, "", err
	}
	role, err = needStr(o, "role", where)
	return where, o, role, err
}
