package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// update rewrites the expected outputs under testdata/golden instead of
// comparing against them: go test ./protocol/translate/ -run Golden -update
var update = flag.Bool("update", false, "rewrite the golden outputs in testdata/golden")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, a)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return reflect.DeepEqual(va, vb)
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("indent: %v\n%s", err, b)
	}
	return append(out.Bytes(), '\n')
}

// goldenCase is one directory of testdata/golden: a history in each
// provider's format (<provider>.json).
type goldenCase struct {
	name   string
	inputs map[string][]byte
}

func goldenCases(t *testing.T) []goldenCase {
	t.Helper()
	dirs, err := os.ReadDir(filepath.Join("testdata", "golden"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		c := goldenCase{name: d.Name(), inputs: map[string][]byte{}}
		for _, p := range Providers() {
			b, err := os.ReadFile(filepath.Join("testdata", "golden", d.Name(), p+".json"))
			if err != nil {
				t.Fatalf("case %s: %v", d.Name(), err)
			}
			c.inputs[p] = b
		}
		cases = append(cases, c)
	}
	if len(cases) < 7 {
		t.Fatalf("only %d golden cases", len(cases))
	}
	return cases
}

// TestGolden translates every golden input to the three other formats and
// compares with testdata/golden/<case>/<from>_to_<to>.json.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases(t) {
		for _, from := range Providers() {
			for _, to := range Providers() {
				if from == to {
					continue
				}
				t.Run(c.name+"/"+from+"_to_"+to, func(t *testing.T) {
					got, err := Translate(c.inputs[from], from, to)
					if err != nil {
						t.Fatal(err)
					}
					path := filepath.Join("testdata", "golden", c.name, from+"_to_"+to+".json")
					if *update {
						if err := os.WriteFile(path, indent(t, got), 0o644); err != nil {
							t.Fatal(err)
						}
						return
					}
					want, err := os.ReadFile(path)
					if err != nil {
						t.Fatalf("%v (run with -update to create it)", err)
					}
					if !sameJSON(t, got, want) {
						t.Errorf("%s differs (run with -update if the change is intended)\ngot:\n%s", path, indent(t, got))
					}
				})
			}
		}
	}
}

// TestIdentity: translating a golden input to its own format returns it.
func TestIdentity(t *testing.T) {
	for _, c := range goldenCases(t) {
		for _, p := range Providers() {
			got, err := Translate(c.inputs[p], p, p)
			if err != nil {
				t.Fatalf("%s/%s: %v", c.name, p, err)
			}
			if !sameJSON(t, got, c.inputs[p]) {
				t.Errorf("%s/%s: %s→%s changed the history:\n%s", c.name, p, p, p, indent(t, got))
			}
		}
	}
}

// TestRoundTrip: A→B→A and A→B→C→A return the original, for every golden
// case and every pair and triple of formats.
func TestRoundTrip(t *testing.T) {
	for _, c := range goldenCases(t) {
		for _, a := range Providers() {
			for _, b := range Providers() {
				ab, err := Translate(c.inputs[a], a, b)
				if err != nil {
					t.Fatalf("%s: %s→%s: %v", c.name, a, b, err)
				}
				back, err := Translate(ab, b, a)
				if err != nil {
					t.Fatalf("%s: %s→%s→%s: %v\n%s", c.name, a, b, a, err, ab)
				}
				if !sameJSON(t, back, c.inputs[a]) {
					t.Errorf("%s: %s→%s→%s differs from the original:\nvia:\n%s\nback:\n%s", c.name, a, b, a, indent(t, ab), indent(t, back))
				}
				for _, cc := range Providers() {
					bc, err := Translate(ab, b, cc)
					if err != nil {
						t.Fatalf("%s: %s→%s→%s: %v", c.name, a, b, cc, err)
					}
					back, err := Translate(bc, cc, a)
					if err != nil {
						t.Fatalf("%s: %s→%s→%s→%s: %v", c.name, a, b, cc, a, err)
					}
					if !sameJSON(t, back, c.inputs[a]) {
						t.Errorf("%s: %s→%s→%s→%s differs from the original:\n%s", c.name, a, b, cc, a, indent(t, back))
					}
				}
			}
		}
	}
}

// TestNoSideFieldWhenLossless: where the target holds everything, the output
// has no side field, so that it can be sent as it is.
func TestNoSideFieldWhenLossless(t *testing.T) {
	lossless := map[string][]string{
		"text_only":     {"claude", "openai", "gemini", "deepseek"},
		"system_prompt": {"claude", "openai", "gemini", "deepseek"},
	}
	for _, c := range goldenCases(t) {
		for _, from := range lossless[c.name] {
			for _, to := range lossless[c.name] {
				out, err := Translate(c.inputs[from], from, to)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(out, []byte(`"`+sideKey+`"`)) {
					t.Errorf("%s: %s→%s wrote a side field:\n%s", c.name, from, to, out)
				}
			}
		}
	}
	// A tool exchange loses only what the formats lack.
	cases := []struct{ in, from, to string }{
		{`[{"role":"user","content":"q"},{"role":"assistant","content":"a","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]`, "openai", "claude"},
		{`[{"role":"user","content":"q"},{"role":"assistant","content":"a","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]`, "openai", "deepseek"},
		{`[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"r"}]}]`, "claude", "gemini"},
	}
	for _, c := range cases {
		out, err := Translate(json.RawMessage(c.in), c.from, c.to)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(out, []byte(`"`+sideKey+`"`)) {
			t.Errorf("%s→%s wrote a side field:\n%s", c.from, c.to, out)
		}
	}
}

func TestProviders(t *testing.T) {
	want := []string{"claude", "openai", "gemini", "deepseek"}
	got := Providers()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Providers() = %v, want %v", got, want)
	}
	got[0] = "changed"
	if Providers()[0] != "claude" {
		t.Fatal("Providers returns a shared slice")
	}
}

func TestStrip(t *testing.T) {
	in := `[{"role":"user","content":"hi","mcpv2":{"name":"alice"}},{"role":"assistant","content":"yo"}]`
	got, err := Strip(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]`
	if string(got) != want {
		t.Fatalf("Strip = %s, want %s", got, want)
	}
	if _, err := Strip(json.RawMessage(`[1]`)); !errors.Is(err, ErrInvalidHistory) {
		t.Fatalf("Strip([1]) error = %v, want ErrInvalidHistory", err)
	}
	// Every golden output stripped is still a history of its format.
	for _, c := range goldenCases(t) {
		for _, from := range Providers() {
			for _, to := range Providers() {
				out, _ := Translate(c.inputs[from], from, to)
				s, err := Strip(out)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(s, []byte(`"`+sideKey+`"`)) {
					t.Errorf("%s %s→%s: side field left after Strip", c.name, from, to)
				}
				if _, err := Translate(s, to, to); err != nil {
					t.Errorf("%s %s→%s: stripped output is not valid %s: %v", c.name, from, to, to, err)
				}
			}
		}
	}
}

// TestArguments: tool call arguments survive byte for byte, including an
// OpenAI arguments string that is not a JSON object.
func TestArguments(t *testing.T) {
	for _, args := range []string{`{"a": 1,  "b":[1.0, 2e3]}`, `not json`, ``, `[1,2]`, `"str"`, `{"a":"\u00e9<>&"}`} {
		in := fmt.Sprintf(`[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":%s}}]}]`, quote(args))
		for _, to := range Providers() {
			mid, err := Translate(json.RawMessage(in), "openai", to)
			if err != nil {
				t.Fatalf("%q to %s: %v", args, to, err)
			}
			back, err := Translate(mid, to, "openai")
			if err != nil {
				t.Fatalf("%q back from %s: %v", args, to, err)
			}
			var got []struct {
				ToolCalls []struct {
					Function struct{ Arguments string }
				} `json:"tool_calls"`
			}
			if err := json.Unmarshal(back, &got); err != nil || len(got) != 1 || len(got[0].ToolCalls) != 1 {
				t.Fatalf("%q via %s: %s", args, to, back)
			}
			if a := got[0].ToolCalls[0].Function.Arguments; a != args {
				t.Errorf("arguments %q via %s came back as %q", args, to, a)
			}
		}
	}
}

// TestArgumentsObject: OpenAI and DeepSeek tool-call arguments given as a
// JSON object, as the seed accepted them, are read as the compacted object:
// OpenAI and DeepSeek write them back as the API's string, Claude and Gemini
// as the object, and every way back ends at that same normal form.
func TestArgumentsObject(t *testing.T) {
	const obj = `{"city": "Paris",  "days": [1, 2], "opts": {"unit": "C", "note": "\u00e9<>&"}}`
	var want any
	if err := json.Unmarshal([]byte(obj), &want); err != nil {
		t.Fatal(err)
	}
	compacted := string(compact([]byte(obj)))
	for _, from := range []string{"openai", "deepseek"} {
		in := `[{"role":"user","content":"weather?"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"weather","arguments":` + obj + `}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"sunny"}]`
		norm, err := Translate(json.RawMessage(in), from, from)
		if err != nil {
			t.Fatalf("%s→%s: %v", from, from, err)
		}
		for _, to := range Providers() {
			out, err := Translate(json.RawMessage(in), from, to)
			if err != nil {
				t.Fatalf("%s→%s: %v", from, to, err)
			}
			if bytes.Contains(out, []byte(`"`+sideKey+`"`)) {
				t.Errorf("%s→%s wrote a side field for object arguments:\n%s", from, to, out)
			}
			var got any
			switch to {
			case "openai", "deepseek":
				var msgs []struct {
					ToolCalls []struct {
						Function struct {
							Arguments json.RawMessage `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				}
				if err := json.Unmarshal(out, &msgs); err != nil || len(msgs) < 2 || len(msgs[1].ToolCalls) != 1 {
					t.Fatalf("%s→%s: %s (%v)", from, to, out, err)
				}
				var s string
				if err := json.Unmarshal(msgs[1].ToolCalls[0].Function.Arguments, &s); err != nil {
					t.Fatalf("%s→%s: arguments %s are not the API's JSON string", from, to, msgs[1].ToolCalls[0].Function.Arguments)
				}
				if s != compacted {
					t.Errorf("%s→%s: arguments %q, want %q", from, to, s, compacted)
				}
				if err := json.Unmarshal([]byte(s), &got); err != nil {
					t.Fatal(err)
				}
			case "claude":
				var msgs []json.RawMessage
				var call struct {
					Content []struct {
						Input json.RawMessage `json:"input"`
					} `json:"content"`
				}
				if err := json.Unmarshal(out, &msgs); err != nil || len(msgs) < 2 {
					t.Fatalf("%s→%s: %s (%v)", from, to, out, err)
				}
				if err := json.Unmarshal(msgs[1], &call); err != nil || len(call.Content) != 1 {
					t.Fatalf("%s→%s: %s (%v)", from, to, out, err)
				}
				if err := json.Unmarshal(call.Content[0].Input, &got); err != nil {
					t.Fatal(err)
				}
			case "gemini":
				var msgs []struct {
					Parts []struct {
						FunctionCall struct {
							Args json.RawMessage `json:"args"`
						} `json:"functionCall"`
					} `json:"parts"`
				}
				if err := json.Unmarshal(out, &msgs); err != nil || len(msgs) < 2 || len(msgs[1].Parts) != 1 {
					t.Fatalf("%s→%s: %s (%v)", from, to, out, err)
				}
				if err := json.Unmarshal(msgs[1].Parts[0].FunctionCall.Args, &got); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s→%s: arguments %v, want %v\n%s", from, to, got, want, out)
			}
			back, err := Translate(out, to, from)
			if err != nil {
				t.Fatalf("%s→%s→%s: %v", from, to, from, err)
			}
			if !bytes.Equal(back, norm) {
				t.Errorf("%s→%s→%s:\n%s\nwant the normal form\n%s", from, to, from, back, norm)
			}
		}
	}
}

// TestGeminiIDs: calls and responses without ids get made-up ids that the
// other formats carry and that the way back drops; responses match calls of
// the same name in order.
func TestGeminiIDs(t *testing.T) {
	in := `[{"role":"model","parts":[{"functionCall":{"name":"f","args":{"n":1}}},{"functionCall":{"name":"f","args":{"n":2}}},{"functionCall":{"id":"mcpv2_0_2","name":"g"}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"output":"one"}}},{"functionResponse":{"name":"g","response":{"output":"gee"}}},{"functionResponse":{"name":"f","response":{"output":"two"}}}]}]`
	out, err := Translate(json.RawMessage(in), "gemini", "openai")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []map[string]any
	if err := json.Unmarshal(out, &msgs); err != nil {
		t.Fatal(err)
	}
	calls := msgs[0]["tool_calls"].([]any)
	ids := []string{}
	for _, c := range calls {
		ids = append(ids, c.(map[string]any)["id"].(string))
	}
	if want := []string{"mcpv2_0_0", "mcpv2_0_1", "mcpv2_0_2"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("call ids = %v, want %v", ids, want)
	}
	var answered []string
	for _, m := range msgs[1:] {
		if m["role"] == "tool" {
			answered = append(answered, m["tool_call_id"].(string)+"="+m["content"].(string))
		}
	}
	if want := []string{"mcpv2_0_0=one", "mcpv2_0_2=gee", "mcpv2_0_1=two"}; !reflect.DeepEqual(answered, want) {
		t.Fatalf("results = %v, want %v", answered, want)
	}
	back, err := Translate(out, "openai", "gemini")
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, back, []byte(in)) {
		t.Fatalf("back to gemini:\n%s\nwant\n%s", back, in)
	}
}

func TestErrors(t *testing.T) {
	many := func(n int, item string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
	}
	cases := []struct {
		name, from, to, in string
		is                 error
		msg                string // a substring of the error
	}{
		{"unknown from", "cohere", "openai", `[]`, ErrUnknownProvider, `source provider "cohere"`},
		{"unknown to", "openai", "", `[]`, ErrUnknownProvider, `target provider ""`},
		{"empty", "openai", "claude", ``, ErrInvalidHistory, "empty"},
		{"malformed", "openai", "claude", `[{"role":`, ErrInvalidHistory, "not valid JSON"},
		{"object", "openai", "claude", `{"role":"user"}`, ErrInvalidHistory, "must be a JSON array of messages, not object"},
		{"null", "claude", "openai", `null`, ErrInvalidHistory, "not null"},
		{"string", "gemini", "openai", `"hi"`, ErrInvalidHistory, "not string"},
		{"message not object", "claude", "openai", `[{"role":"user","content":"a"},1]`, ErrInvalidHistory, "message 1: must be a JSON object, not number"},
		{"missing role", "openai", "claude", `[{"content":"a"}]`, ErrInvalidHistory, `message 0: missing "role"`},
		{"claude unknown role", "claude", "openai", `[{"role":"wizard","content":"a"}]`, ErrInvalidHistory, `message 0: unknown role "wizard"`},
		{"openai unknown role", "openai", "claude", `[{"role":"function","name":"f","content":"a"}]`, ErrInvalidHistory, `unknown role "function"`},
		{"gemini unknown role", "gemini", "claude", `[{"role":"assistant","parts":[]}]`, ErrInvalidHistory, `unknown role "assistant"`},
		{"deepseek developer", "deepseek", "claude", `[{"role":"developer","content":"a"}]`, ErrInvalidHistory, `unknown role "developer"`},
		{"claude unknown block", "claude", "openai", `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"foo"}]}]`, ErrInvalidHistory, `message 0: content block 1: unknown type "foo"`},
		{"openai unknown part", "openai", "claude", `[{"role":"user","content":[{"type":"video","video":{}}]}]`, ErrInvalidHistory, `message 0: content part 0: unknown type "video"`},
		{"gemini unknown part", "gemini", "claude", `[{"role":"user","parts":[{"foo":1}]}]`, ErrInvalidHistory, `message 0: part 0: a part holds exactly one of`},
		{"gemini two data fields", "gemini", "claude", `[{"role":"user","parts":[{"text":"a","inlineData":{}}]}]`, ErrInvalidHistory, `has text and inlineData`},
		{"deepseek image", "deepseek", "claude", `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]`, ErrInvalidHistory, "deepseek takes no image input"},
		{"claude missing content", "claude", "openai", `[{"role":"user"}]`, ErrInvalidHistory, `missing "content"`},
		{"claude tool_use in user", "claude", "openai", `[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]`, ErrInvalidHistory, "a tool_use block cannot be in a user message"},
		{"claude input not object", "claude", "openai", `[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":[1]}]}]`, ErrInvalidHistory, `"input" must be an object, not array`},
		{"claude bad media type", "claude", "openai", `[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"text/plain","data":"AA=="}}]}]`, ErrInvalidHistory, "not an image type"},
		{"claude unsigned thinking", "claude", "openai", `[{"role":"assistant","content":[{"type":"thinking","thinking":"hm"}]}]`, ErrInvalidHistory, `missing "signature"`},
		{"claude unknown call id", "claude", "openai", `[{"role":"user","content":[{"type":"tool_result","tool_use_id":"nope","content":"x"}]}]`, ErrInvalidHistory, `message 0: content block 0: tool result for "nope", which no earlier tool call has as id`},
		{"openai unknown call id", "openai", "claude", `[{"role":"user","content":"q"},{"role":"tool","tool_call_id":"nope","content":"x"}]`, ErrInvalidHistory, `message 1: tool result for "nope"`},
		{"deepseek unknown call id", "deepseek", "claude", `[{"role":"tool","tool_call_id":"nope","content":"x"}]`, ErrInvalidHistory, `tool result for "nope"`},
		{"gemini unknown call id", "gemini", "claude", `[{"role":"user","parts":[{"functionResponse":{"id":"nope","name":"f","response":{}}}]}]`, ErrInvalidHistory, `functionResponse id "nope" matches no earlier functionCall`},
		{"gemini unmatched name", "gemini", "claude", `[{"role":"model","parts":[{"functionCall":{"name":"f"}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}},{"functionResponse":{"name":"f","response":{}}}]}]`, ErrInvalidHistory, `message 1: part 1: functionResponse "f" answers no earlier functionCall`},
		{"call after result", "openai", "claude", `[{"role":"tool","tool_call_id":"c","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]`, ErrInvalidHistory, `tool result for "c"`},
		{"openai arguments array", "openai", "claude", `[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":[1]}}]}]`, ErrInvalidHistory, `message 0: tool_calls[0]: function: "arguments" must be a JSON string or object, not array`},
		{"deepseek arguments number", "deepseek", "openai", `[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":1}}]}]`, ErrInvalidHistory, `"arguments" must be a JSON string or object, not number`},
		{"openai arguments null", "openai", "gemini", `[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":null}}]}]`, ErrInvalidHistory, `"arguments" must be a JSON string or object, not null`},
		{"openai arguments missing", "openai", "gemini", `[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f"}}]}]`, ErrInvalidHistory, `function: missing "arguments"`},
		{"too many messages", "openai", "claude", many(MaxMessages+1, `{"role":"user","content":"a"}`), ErrInvalidHistory, "10001 messages, more than the limit of 10000"},
		{"too many blocks", "claude", "openai", `[{"role":"user","content":` + many(MaxParts+1, `{"type":"text","text":"a"}`) + `}]`, ErrInvalidHistory, "message 0: 1001 content blocks, more than the limit of 1000"},
		{"too many parts", "gemini", "openai", `[{"role":"user","parts":` + many(MaxParts+1, `{"text":"a"}`) + `}]`, ErrInvalidHistory, "1001 parts, more than the limit of 1000"},
		{"too many tool calls", "openai", "claude", `[{"role":"assistant","content":"x","tool_calls":` + many(MaxParts, `{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}`) + `}]`, ErrInvalidHistory, "more than 1000 parts"},
		{"too many tool results", "openai", "claude", `[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},` + strings.Trim(many(MaxParts+1, `{"role":"tool","tool_call_id":"c","content":"x"}`), "[]") + `]`, ErrInvalidHistory, "more than 1000 parts in the group of messages from message 1"},
		{"side not object", "claude", "openai", `[{"role":"user","content":"a","mcpv2":[]}]`, ErrInvalidHistory, "message 0: mcpv2: must be an object, not array"},
		{"side unknown field", "claude", "openai", `[{"role":"user","content":"a","mcpv2":{"colour":"red"}}]`, ErrInvalidHistory, `message 0: mcpv2: json: unknown field "colour"`},
		{"side order in claude", "claude", "openai", `[{"role":"user","content":"a","mcpv2":{"order":[0]}}]`, ErrInvalidHistory, `"order" and "split" are only used in openai and deepseek`},
		{"side bad order", "openai", "claude", `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"mcpv2":{"order":[0,0]}}]`, ErrInvalidHistory, "not a permutation"},
		{"side bad part index", "openai", "claude", `[{"role":"user","content":"a","mcpv2":{"parts":{"01":{"detail":"x"}}}}]`, ErrInvalidHistory, `parts["01"]: not the index`},
		{"side bad dropped", "openai", "claude", `[{"role":"user","content":"a","mcpv2":{"dropped":[{"at":5,"part":{"type":"text","text":"x"}}]}}]`, ErrInvalidHistory, `dropped[0]: "at" 5`},
		{"side dropped unknown type", "openai", "claude", `[{"role":"user","content":"a","mcpv2":{"dropped":[{"at":0,"part":{"type":"video"}}]}}]`, ErrInvalidHistory, `unknown part type "video"`},
		{"side stray field", "openai", "claude", `[{"role":"user","content":"a","mcpv2":{"dropped":[{"at":0,"part":{"type":"text","text":"x","url":"u"}}]}}]`, ErrInvalidHistory, "fields that a text part does not have"},
		{"side extra of known field", "claude", "openai", `[{"role":"user","content":"a","mcpv2":{"extra":{"claude":{"role":"x"}}}}]`, ErrInvalidHistory, `extra field "role" is a field that claude knows`},
		{"side on continuing message", "openai", "claude", `[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"},{"role":"user","content":"y","mcpv2":{"name":"a"}}]`, ErrInvalidHistory, "message 2: mcpv2: only the first message of a group (here message 1)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := Translate(json.RawMessage(c.in), c.from, c.to)
			if err == nil {
				t.Fatalf("no error; output %s", out)
			}
			if !errors.Is(err, c.is) {
				t.Fatalf("error %q is not %v", err, c.is)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %q does not say %q", err, c.msg)
			}
			if !strings.HasPrefix(err.Error(), "translate: ") {
				t.Fatalf("error %q does not start with the package name", err)
			}
		})
	}
}

// TestEmpty: an empty history is valid in every format.
func TestEmpty(t *testing.T) {
	for _, from := range Providers() {
		for _, to := range Providers() {
			out, err := Translate(json.RawMessage(" [ ] "), from, to)
			if err != nil || string(out) != "[]" {
				t.Errorf("%s→%s of [] = %s, %v", from, to, out, err)
			}
		}
	}
}
