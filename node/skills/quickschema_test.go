package skills

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpv2/mcpv2/protocol"
)

// quickSchemas are the schemas the differential fuzz target checks: the
// standard skills' that have a quickSchema, and made-up ones for every
// type and keyword it knows.
func quickSchemas(t testing.TB) (quick []*quickSchema, lib []*jsonschema.Resolved) {
	t.Helper()
	docs := []string{
		`{"type":"object"}`,
		`{"type":"object","additionalProperties":false}`,
		`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":["string","null"]},"c":{}},"required":["a"],"additionalProperties":false}`,
		`{"type":"object","properties":{"n":{"type":"number"},"o":{"type":"object"},"l":{"type":"array"},"t":{"type":"boolean"}},"required":["n","t"]}`,
		`{"type":"object","title":"x","description":"y","properties":{"i":{"type":["integer","boolean"],"description":"z"}}}`,
	}
	r := NewRegistry(nil)
	RegisterStandard(r, Deps{PeerID: "p"})
	for _, d := range r.List() {
		docs = append(docs, string(d.InputSchema))
	}
	for _, d := range docs {
		var s jsonschema.Schema
		if err := json.Unmarshal([]byte(d), &s); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		if q := newQuickSchema([]byte(d)); q != nil {
			quick, lib = append(quick, q), append(lib, rs)
		}
	}
	return quick, lib
}

// FuzzQuickSchema: whatever the arguments, a quickSchema never accepts
// what jsonschema-go refuses. (It may refuse what the library accepts:
// Call then asks the library.)
func FuzzQuickSchema(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":1.5}`, `{"a":1e300}`, `{"a":-0}`, `{"a":1,"b":null,"c":[1]}`,
		`{"a":1,"x":2}`, `{"n":1,"t":true,"o":{},"l":[]}`, `{"n":"1","t":true}`, `{"i":9007199254740993}`,
		`{"payload":"x"}`, `{"query":"q","model":5}`, `[]`, `null`, `"s"`, `{"A":1}`, `{"a":1,"a":"x"}`, `{"a":1,"a":2.5}`,
		` { "a" : 1 , "b" : "\u0041" } `, `{"\u0061":1}`, `{"a":-0.0e+1}`, `{"a":123456789012345}`, `{"a":1234567890123456}`,
		`{"n":1,"t":false,"o":[],"l":{}}`, `{"b":nul}`} {
		f.Add([]byte(s))
	}
	quick, lib := quickSchemas(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var inst any
		if protocol.Unmarshal(data, &inst) != nil {
			return
		}
		for i, q := range quick {
			if q.accepts(inst) {
				if err := lib[i].Validate(inst); err != nil {
					t.Fatalf("schema %d: quick accepts %s, jsonschema-go refuses: %v", i, data, err)
				}
			}
			if q.acceptsRaw(data) {
				if err := lib[i].Validate(inst); err != nil {
					t.Fatalf("schema %d: quick accepts the text %s, jsonschema-go refuses: %v", i, data, err)
				}
			}
		}
	})
}

// TestQuickSchemaCovers: the shortcut is taken for the schemas it is for
// (ping, ask, get_skill…) and refused for keywords it does not know.
func TestQuickSchemaCovers(t *testing.T) {
	r := NewRegistry(nil)
	RegisterStandard(r, Deps{PeerID: "p"})
	for _, name := range []string{"ping", "ask", "list_files", "delete_file", "get_skill"} {
		if r.byName[name].quick == nil {
			t.Errorf("%s: no quick schema for %s", name, r.byName[name].desc.InputSchema)
		}
	}
	for _, doc := range []string{`{"type":"object","properties":{"e":{"enum":[1]}}}`, `{"type":"object","additionalProperties":{"type":"string"}}`,
		`{"type":"object","properties":{"l":{"type":"array","items":{"type":"string"}}}}`, `{"type":"object","minProperties":1}`,
		`{"properties":{}}`, `{"type":"array"}`, `{"type":"object","properties":{"a":true}}`, `{"$ref":"#"}`} {
		if newQuickSchema([]byte(doc)) != nil {
			t.Errorf("a quick schema for %s", doc)
		}
	}
	q := newQuickSchema([]byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}`))
	for in, want := range map[string]bool{`{"a":1}`: true, `{"a":1.5}`: false, `{}`: false, `{"a":1,"b":2}`: false, `{"a":"1"}`: false, `[]`: false} {
		var v any
		if err := protocol.Unmarshal([]byte(in), &v); err != nil {
			t.Fatal(err)
		}
		if got := q.accepts(v); got != want {
			t.Errorf("accepts(%s) = %v, want %v", in, got, want)
		}
		if got := q.acceptsRaw([]byte(in)); got != want {
			t.Errorf("acceptsRaw(%s) = %v, want %v", in, got, want)
		}
	}
}

// TestIsNumber holds isNumber to RFC 8259's number grammar, which
// encoding/json's Valid also follows (on a token: no whitespace around it).
func TestIsNumber(t *testing.T) {
	for _, s := range []string{"0", "-0", "7", "-12", "1.5", "0.25", "1e9", "1E+9", "-2.5e-3", "123456789012345678901234567890",
		"", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1.2.3", "0x10", "1 ", "NaN", "--1", "1e1.5"} {
		if got, want := isNumber([]byte(s)), json.Valid([]byte(s)) && s != "" && !bytes.ContainsAny([]byte(s), " \t\r\n") && (s[0] == '-' || s[0] >= '0' && s[0] <= '9'); got != want {
			t.Errorf("isNumber(%q) = %v, want %v", s, got, want)
		}
	}
}
