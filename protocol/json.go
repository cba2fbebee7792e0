package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Every message of the protocol is decoded by Unmarshal, the JSON v2
// implementation that Go ships as encoding/json/v2 (here from its module,
// github.com/go-json-experiment/json, since Go 1.26 builds encoding/json/v2
// only under GOEXPERIMENT=jsonv2). It validates while it decodes, in one
// pass, where encoding/json scans every value twice (checkValid, then the
// decode) at about a third of the speed: a 1 KiB slot decodes in 1.8 µs
// instead of 10 µs, and that is most of what a call costs
// (docs/benchmarks.md). Encoding stays with encoding/json, which is as fast.
//
// The rules are the protocol's, as encoding/json read them before:
// member names match exactly (a slot's case variants are refused by
// ParseRequest, a skill's by its schema), a repeated member name is allowed
// and the last one wins, and the text must be UTF-8 (ParseRequest always
// refused anything else; peers' answers now are too).
var decodeOptions = jsontext.AllowDuplicateNames(true)

// Unmarshal decodes the JSON value data into v with the protocol's rules.
// Errors are *jsontext.SyntacticError for text that is not JSON and
// *jsonv2.SemanticError for JSON that does not fit v; JSONErrorText turns
// either into a message for a caller.
func Unmarshal(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, decodeOptions)
}

// ValidJSON reports whether data is exactly one valid JSON value in UTF-8,
// as Unmarshal reads it. sureJSON checks it, eight bytes of string at a
// time, and its no is final for text that nests no deeper than it follows
// (FuzzSureJSON holds the two equal there); deeper text is jsontext's to
// judge. So text that is not JSON costs no allocation either: jsontext
// builds an error with a JSON pointer, which for a 10 KB batch once came
// to 110 KB.
func ValidJSON(data []byte) bool {
	if sureJSON(data) {
		return true
	}
	var sh shape
	if sh.scan(trimJSONSpace(data)); !sh.tooDeep {
		return false
	}
	return jsontext.Value(data).IsValid(decodeOptions)
}

// isSyntaxError reports an error of Unmarshal about text that is not JSON.
func isSyntaxError(err error) bool {
	var se *jsontext.SyntacticError
	return errors.As(err, &se)
}

// JSONErrorText turns an Unmarshal error into a short text for a caller
// that names the member at fault without Go type names.
func JSONErrorText(err error) string {
	var se *jsonv2.SemanticError
	if errors.As(err, &se) && se.JSONKind != 0 {
		field := strings.TrimPrefix(string(se.JSONPointer), "/")
		return fmt.Sprintf("field %q has the wrong type (%s)", field, kindName(se.JSONKind))
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		return fmt.Sprintf("not valid JSON at byte %d", syn.ByteOffset)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// kindName names a JSON kind as encoding/json's errors did.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "bool"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return k.String()
}

// JSONSyntaxError turns an encoding/json error about data that is not
// JSON into one that says where: "invalid JSON at line L, column C: …", or
// "invalid JSON at line L, column C: unexpected end of input" (the end of
// data) for text cut short. It returns nil for any other
// error, which the caller words itself. The files a person edits (the
// custom skills file, the policy file) report their syntax errors so.
func JSONSyntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		line, col := lineCol(data, se.Offset)
		return fmt.Errorf("invalid JSON at line %d, column %d: %s", line, col, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		line, col := lineCol(data, int64(len(data)))
		return fmt.Errorf("invalid JSON at line %d, column %d: unexpected end of input", line, col)
	}
	return nil
}

// lineCol is the 1-based line and column of byte offset off in data.
func lineCol(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	prefix := data[:off]
	line = bytes.Count(prefix, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(prefix, '\n') + 1)
	return line, max(col, 1)
}

// JSONFileError words an error of encoding/json (a Decoder with
// DisallowUnknownFields, or Unmarshal) about data, a file a person edits
// (the custom skills file, the policy file), in that person's terms: JSON
// fields and types, never Go's. Text that is not JSON is JSONSyntaxError's;
// a value of the wrong type is a *JSONFieldError, "tags: got a JSON
// string, want an array of strings"; an unknown field is "unknown field
// "grnts"" (JSONUnknownField names it, for a suggestion). When data is not
// nil, the last two add where: " at line L, column C" (the end of the
// value of the wrong type, the name of the unknown field). Pass nil data when
// the value decoded is a part of the file, whose offsets would mislead.
func JSONFileError(data []byte, err error) error {
	if data != nil {
		if serr := JSONSyntaxError(data, err); serr != nil {
			return serr
		}
	}
	at := func(off int64) string {
		if data == nil || off < 0 {
			return ""
		}
		line, col := lineCol(data, off)
		return fmt.Sprintf(" at line %d, column %d", line, col)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &JSONFieldError{Field: te.Field, Err: fmt.Errorf("got a JSON %s, want %s%s", te.Value, jsonTypeName(te.Type), at(te.Offset))}
	}
	if name, ok := JSONUnknownField(err); ok {
		off := int64(-1)
		if i := unknownFieldAt(data, name); i >= 0 {
			off = int64(i) + 1 // lineCol's offsets are past the byte meant
		}
		return fmt.Errorf("unknown field %q%s", name, at(off))
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

// JSONFieldError is a value of the wrong type at Field (dotted, as
// encoding/json names it; "" for the top-level value).
type JSONFieldError struct {
	Field string
	Err   error // the reason, "got a JSON string, want an array of strings"
}

// Error is the field, a colon and the reason; the reason alone for the
// top-level value.
func (e *JSONFieldError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

// Unwrap returns the reason.
func (e *JSONFieldError) Unwrap() error { return e.Err }

// JSONUnknownField returns the field name of encoding/json's error for a
// field that DisallowUnknownFields refused (it has no error type of its
// own), and whether err is one.
func JSONUnknownField(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	rest, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return "", false
	}
	name, qerr := strconv.Unquote(rest)
	return name, qerr == nil
}

// unknownFieldAt is the offset in data of the first member named name
// ("name" then a colon), or -1.
func unknownFieldAt(data []byte, name string) int {
	if data == nil {
		return -1
	}
	q, _ := json.Marshal(name)
	for off := 0; ; {
		i := bytes.Index(data[off:], q)
		if i < 0 {
			return -1
		}
		i += off
		if rest := bytes.TrimLeft(data[i+len(q):], " \t\r\n"); len(rest) > 0 && rest[0] == ':' {
			return i
		}
		off = i + len(q)
	}
}

// jsonTypeName names the JSON a Go type of a file's struct wants.
func jsonTypeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return "an object of strings"
		}
		return "an object"
	case reflect.Struct:
		return "an object"
	}
	return t.String()
}
