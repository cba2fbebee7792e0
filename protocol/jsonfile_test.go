package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/protocol"
)

// TestJSONFileError: encoding/json's errors about a file a person edits,
// in JSON's words with where; a part of a file (nil data) without where.
func TestJSONFileError(t *testing.T) {
	type file struct {
		Tags  []string          `json:"tags"`
		Limit map[string]string `json:"limit"`
		N     *int              `json:"n"`
	}
	decode := func(data []byte) error {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		var f file
		return dec.Decode(&f)
	}
	for _, tc := range []struct {
		data  string
		want  string
		field string // of a *JSONFieldError
	}{
		{"{\"tags\": [\"a\",\n]}", "invalid JSON at line 2, column 1: invalid character ']'", ""},
		{`{"tags": "a"}`, `tags: got a JSON string, want an array of strings at line 1, column 12`, "tags"},
		{`{"n": true}`, `n: got a JSON bool, want a number at line 1, column`, "n"},
		{`{"limit": {"x": 1}}`, `limit: got a JSON number, want a string at line 1, column 17`, "limit"},
		{"{\"tags\": [],\n  \"tgs\": []}", `unknown field "tgs" at line 2, column 3`, ""},
		{`{"tags": ["tgs"], "tgs": 1}`, `unknown field "tgs" at line 1, column 19`, ""},
	} {
		err := protocol.JSONFileError([]byte(tc.data), decode([]byte(tc.data)))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.data, err, tc.want)
			continue
		}
		var fe *protocol.JSONFieldError
		if got := errors.As(err, &fe); got != (tc.field != "") || got && fe.Field != tc.field {
			t.Errorf("%s: JSONFieldError %v %+v, want field %q", tc.data, got, fe, tc.field)
		}
		if name, ok := protocol.JSONUnknownField(decode([]byte(tc.data))); ok != strings.HasPrefix(tc.want, "unknown field") || ok && name != "tgs" {
			t.Errorf("%s: JSONUnknownField %q %v", tc.data, name, ok)
		}
		if part := protocol.JSONFileError(nil, decode([]byte(tc.data))); !strings.HasPrefix(tc.want, "invalid") && strings.Contains(part.Error(), "line") {
			t.Errorf("%s: a part of a file says where: %v", tc.data, part)
		}
	}
}
