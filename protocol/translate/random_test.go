package translate

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
)

// randomN is the number of random histories per format TestRandomRoundTrip
// checks: go test ./protocol/translate/ -run Random -random 20000
var randomN = flag.Int("random", 400, "random histories per format in TestRandomRoundTrip")

// gen builds random histories in one format: every block kind, with and
// without ids, in every content shape, with unknown fields; mostly valid.
type gen struct {
	r     *rand.Rand
	calls []string // ids of the calls so far
	names map[string]string
	n     int
}

func (g *gen) pick(xs ...any) any    { return xs[g.r.IntN(len(xs))] }
func (g *gen) chance(p float64) bool { return g.r.Float64() < p }
func (g *gen) text() string {
	return g.pick("hi", "", "a <b> & c", "multi\nline", "{\"k\":1}", `{"output":"x"}`, `{"error":"e"}`, "é ✓", " {\"a\": 1} ").(string)
}
func (g *gen) id() string {
	g.n++
	return fmt.Sprint(g.pick("call_", "toolu_", "mcpv2_1_", "x"), g.n)
}
func (g *gen) args() string {
	return g.pick(`{"a":1}`, `{"a": [1, 2.50, "x"]}`, `{}`, ``, `not json`, `[1]`, `"s"`, `{"z":null,"b":{"c":true}}`).(string)
}
func (g *gen) anyCall() (string, bool) {
	if len(g.calls) == 0 {
		return "", false
	}
	return g.calls[g.r.IntN(len(g.calls))], true
}
func (g *gen) extra(m map[string]any) map[string]any {
	if g.chance(0.15) {
		m["x_unknown"] = g.pick(1, "v", nil, map[string]any{"n": []any{1, 2}})
	}
	return m
}

func (g *gen) history(provider string) []any {
	g.calls, g.names = nil, map[string]string{}
	var h []any
	for range g.r.IntN(7) {
		switch provider {
		case provClaude:
			h = append(h, g.claude())
		case provGemini:
			h = append(h, g.gemini())
		default:
			h = append(h, g.openai(provider == provDeepSeek)...)
		}
	}
	return h
}

func (g *gen) claude() any {
	role := g.pick("system", "user", "assistant", "assistant", "user").(string)
	var blocks []any
	for range g.r.IntN(4) {
		var b map[string]any
		switch role {
		case "system":
			b = map[string]any{"type": "text", "text": g.text()}
		case "user":
			switch g.r.IntN(5) {
			case 0:
				b = map[string]any{"type": "text", "text": g.text()}
			case 1:
				b = map[string]any{"type": "image", "source": g.pick(
					map[string]any{"type": "url", "url": "https://x/a.png"},
					map[string]any{"type": "base64", "media_type": "image/png", "data": "AAAA"})}
			case 2:
				b = map[string]any{"type": "document", "source": map[string]any{"type": "text", "media_type": "text/plain", "data": "doc"}}
			default:
				id, ok := g.anyCall()
				if !ok {
					continue
				}
				b = map[string]any{"type": "tool_result", "tool_use_id": id}
				switch g.r.IntN(3) {
				case 0:
					b["content"] = g.text()
				case 1:
					b["content"] = []any{map[string]any{"type": "text", "text": g.text()}, g.pick(
						map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": "https://x/b.jpg"}},
						map[string]any{"type": "text", "text": "more"})}[:1+g.r.IntN(2)]
				}
				if g.chance(0.4) {
					b["is_error"] = g.chance(0.5)
				}
			}
		default:
			switch g.r.IntN(4) {
			case 0:
				b = map[string]any{"type": "text", "text": g.text()}
			case 1:
				b = map[string]any{"type": "thinking", "thinking": g.text(), "signature": "sig"}
			case 2:
				b = map[string]any{"type": "redacted_thinking", "data": "opaque"}
			default:
				id := g.id()
				g.calls = append(g.calls, id)
				b = map[string]any{"type": "tool_use", "id": id, "name": g.pick("f", "g").(string), "input": json.RawMessage(g.pick(`{}`, `{"a": 1}`, `{"b":[true]}`).(string))}
			}
		}
		if g.chance(0.1) {
			b["cache_control"] = map[string]any{"type": "ephemeral"}
		}
		blocks = append(blocks, b)
	}
	var content any = blocks
	if len(blocks) == 1 && g.chance(0.5) && blocks[0].(map[string]any)["type"] == "text" && len(blocks[0].(map[string]any)) == 2 {
		content = blocks[0].(map[string]any)["text"]
	} else if blocks == nil {
		content = []any{}
	}
	return g.extra(map[string]any{"role": role, "content": content})
}

func (g *gen) gemini() any {
	role := g.pick("system", "user", "model", "model", "user", "function").(string)
	var parts []any
	for range g.r.IntN(4) {
		var p map[string]any
		switch {
		case role == "system":
			p = map[string]any{"text": g.text()}
		case role == "model":
			switch g.r.IntN(5) {
			case 0:
				p = map[string]any{"text": g.text()}
			case 1:
				p = map[string]any{"text": g.text(), "thought": true}
			case 2:
				p = map[string]any{"executableCode": map[string]any{"language": "PYTHON", "code": "1"}}
			default:
				fc := map[string]any{"name": g.pick("f", "g").(string)}
				if a := g.args(); a != "" && a[0] == '{' {
					fc["args"] = json.RawMessage(a)
				}
				if g.chance(0.5) {
					id := g.id()
					fc["id"] = id
					g.calls = append(g.calls, id)
				} else {
					g.calls = append(g.calls, "")
				}
				g.names[fmt.Sprint(len(g.calls)-1)] = fc["name"].(string)
				p = map[string]any{"functionCall": fc}
			}
		default:
			switch g.r.IntN(4) {
			case 0:
				p = map[string]any{"text": g.text()}
			case 1:
				p = g.pick(map[string]any{"inlineData": map[string]any{"mimeType": "image/jpeg", "data": "AAAA"}},
					map[string]any{"fileData": map[string]any{"fileUri": "gs://b/v.mp4", "mimeType": "video/mp4"}},
					map[string]any{"fileData": map[string]any{"fileUri": "https://x/a.png"}}).(map[string]any)
			default:
				if len(g.calls) == 0 {
					continue
				}
				k := g.r.IntN(len(g.calls))
				fr := map[string]any{"name": g.names[fmt.Sprint(k)], "response": json.RawMessage(g.pick(`{"output":"x"}`, `{"error":"bad"}`, `{"a":1}`, `{}`, `{"output":{"n":1}}`).(string))}
				if g.calls[k] != "" {
					fr["id"] = g.calls[k]
				}
				p = map[string]any{"functionResponse": fr}
			}
		}
		if g.chance(0.15) {
			p["thoughtSignature"] = "c2ln"
		}
		if g.chance(0.05) {
			p["thought"] = false
		}
		parts = append(parts, g.extra(p))
	}
	if parts == nil {
		parts = []any{}
	}
	return map[string]any{"role": role, "parts": parts}
}

func (g *gen) openai(deepseek bool) []any {
	roles := []any{"system", "user", "assistant", "assistant", "tool", "tool"}
	if !deepseek {
		roles = append(roles, "developer")
	}
	role := g.pick(roles...).(string)
	content := func(kinds int) any {
		switch g.r.IntN(3) {
		case 0:
			return g.text()
		}
		var parts []any
		for range g.r.IntN(3) {
			switch g.r.IntN(kinds) {
			case 0:
				parts = append(parts, g.extra(map[string]any{"type": "text", "text": g.text()}))
			case 1:
				iu := map[string]any{"url": g.pick("https://x/a.png", "data:image/png;base64,AAAA", "data:text/plain;base64,AA").(string)}
				if g.chance(0.3) {
					iu["detail"] = "low"
				}
				parts = append(parts, map[string]any{"type": "image_url", "image_url": iu})
			case 2:
				parts = append(parts, map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": "AAAA", "format": "mp3"}})
			}
		}
		if parts == nil {
			return []any{}
		}
		return parts
	}
	m := map[string]any{"role": role}
	switch role {
	case "system", "developer":
		m["content"] = content(1)
	case "user":
		kinds := 4
		if deepseek {
			kinds = 1
		}
		m["content"] = content(kinds)
	case "assistant":
		switch g.r.IntN(4) {
		case 0:
			m["content"] = nil
		case 1:
			m["content"] = content(1)
		case 2:
			if !deepseek {
				m["content"] = []any{map[string]any{"type": "refusal", "refusal": "no"}}
			}
		}
		if deepseek && g.chance(0.5) {
			m["reasoning_content"] = g.text()
		}
		var calls []any
		for range g.r.IntN(3) {
			id := g.id()
			g.calls = append(g.calls, id)
			calls = append(calls, g.extra(map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "f", "arguments": g.args()}}))
		}
		if calls != nil {
			m["tool_calls"] = calls
		}
	case "tool":
		id, ok := g.anyCall()
		if !ok {
			return nil
		}
		m["tool_call_id"] = id
		m["content"] = content(1)
	}
	if role != "tool" && g.chance(0.1) {
		m["name"] = "nm"
	}
	return []any{g.extra(m)}
}

// TestRandomRoundTrip checks the round-trip property on random histories of
// every format, through every other format and every pair of them.
func TestRandomRoundTrip(t *testing.T) {
	n := *randomN
	if testing.Short() {
		n = 50
	}
	valid := map[string]int{}
	for seed := range n {
		g := &gen{r: rand.New(rand.NewPCG(uint64(seed), 7))}
		for _, a := range Providers() {
			raw, err := json.Marshal(g.history(a))
			if err != nil {
				t.Fatal(err)
			}
			if !checkAllPaths(t, raw, a, fmt.Sprintf("seed %d", seed)) {
				continue // the generator made an invalid history
			}
			valid[a]++
		}
	}
	for _, a := range Providers() {
		if valid[a] < n/2 {
			t.Errorf("only %d of %d random %s histories were valid: the generator tests too little", valid[a], n, a)
		}
	}
	t.Logf("valid random histories: %v", valid)
}

// checkAllPaths checks that raw, a history in format a, translates through
// every format and every pair of formats back to its normal form; false when
// raw is not a valid history.
func checkAllPaths(t *testing.T, raw []byte, a, name string) bool {
	t.Helper()
	norm, err := Translate(raw, a, a)
	if err != nil {
		return false
	}
	if again, err := Translate(norm, a, a); err != nil || !sameJSON(t, again, norm) {
		t.Fatalf("%s %s: the normal form is not stable:\n%s\n%s", name, a, norm, again)
	}
	for _, b := range Providers() {
		ab, err := Translate(raw, a, b)
		if err != nil {
			t.Fatalf("%s: %s→%s: %v\n%s", name, a, b, err, raw)
		}
		back, err := Translate(ab, b, a)
		if err != nil {
			t.Fatalf("%s: %s→%s→%s: %v\nin:  %s\nvia: %s", name, a, b, a, err, raw, ab)
		}
		if !sameJSON(t, back, norm) {
			t.Fatalf("%s: %s→%s→%s differs\nin:   %s\nvia:  %s\nback: %s\nnorm: %s", name, a, b, a, raw, ab, back, norm)
		}
		for _, c := range Providers() {
			bc, err := Translate(ab, b, c)
			if err != nil {
				t.Fatalf("%s: %s→%s→%s: %v", name, a, b, c, err)
			}
			back, err := Translate(bc, c, a)
			if err != nil {
				t.Fatalf("%s: %s→%s→%s→%s: %v\nvia: %s", name, a, b, c, a, err, bc)
			}
			if !sameJSON(t, back, norm) {
				t.Fatalf("%s: %s→%s→%s→%s differs\nin:   %s\nvia:  %s\nback: %s", name, a, b, c, a, raw, bc, back)
			}
		}
	}
	return true
}

// TestEdgeRoundTrip checks the round-trip property on histories made to hit
// the corners: odd orders, id collisions, side fields written by hand.
func TestEdgeRoundTrip(t *testing.T) {
	cases := []struct{ name, from, in string }{
		{"claude text before tool result", "claude", `[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"a"}]}]`},
		{"claude two user turns of results", "claude", `[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}},{"type":"tool_use","id":"b","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"b","content":[]}]},{"role":"user","content":"more"}]`},
		{"claude interleaved thinking", "claude", `[{"role":"assistant","content":[{"type":"thinking","thinking":"t1","signature":"s1"},{"type":"tool_use","id":"a","name":"f","input":{"x":1}},{"type":"thinking","thinking":"t2","signature":""},{"type":"text","text":"done"}]}]`},
		{"claude results with images", "claude", `[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"shot","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"here"},{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lG"}}],"is_error":false}]}]`},
		{"claude empty texts", "claude", `[{"role":"user","content":""},{"role":"assistant","content":[{"type":"text","text":""},{"type":"text","text":"x"}]}]`},
		{"claude unknown fields everywhere", "claude", `[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/a.png","extra_src":1},"cache_control":{"type":"ephemeral"}}],"metadata":{"k":"v"}}]`},
		{"openai assistant empty array", "openai", `[{"role":"assistant","content":[]},{"role":"assistant"},{"role":"assistant","content":""}]`},
		{"openai tools then user then tools", "openai", `[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"f","arguments":" {} "}}]},{"role":"tool","tool_call_id":"a","content":"1"},{"role":"user","content":"mid","name":"n"},{"role":"tool","tool_call_id":"b","content":[]},{"role":"user","content":[{"type":"text","text":"end"}]}]`},
		{"openai side split and name", "openai", `[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"1","mcpv2":{"name":"who","form":"array","extra":{"openai":{"foo":1}}}},{"role":"tool","tool_call_id":"a","content":"2","mcpv2":{"split":true}}]`},
		{"openai crafted dropped parts", "openai", `[{"role":"user","content":"u","mcpv2":{"dropped":[{"at":0,"part":{"type":"tool_call","id":"z","name":"f","arguments":"{}"}},{"at":2,"part":{"type":"thinking","text":"t","signature":"s","signature_from":"gemini"}}]}},{"role":"assistant","content":"a","mcpv2":{"dropped":[{"at":0,"part":{"type":"tool_result","id":"z","content":[{"type":"media","url":"https://x/v.mp4","media_type":"video/mp4"}]}}]}}]`},
		{"openai media types", "openai", `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/svg+xml;charset=utf-8;base64,PHN2Zz4=","detail":"auto"}},{"type":"image_url","image_url":{"url":"data:image/png,notbase64"}},{"type":"input_audio","input_audio":{"data":"AA","format":"wav"}},{"type":"file","file":{"file_id":"file-1"}}]}]`},
		{"gemini id collisions", "gemini", `[{"role":"model","parts":[{"functionCall":{"id":"mcpv2_0_1","name":"f"}},{"functionCall":{"name":"f"}},{"functionCall":{"name":"g"}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}},{"functionResponse":{"name":"f","response":{}}},{"functionResponse":{"id":"mcpv2_0_2","name":"h","response":{"output":"x"}}}]}]`},
		{"gemini duplicate ids", "gemini", `[{"role":"model","parts":[{"functionCall":{"id":"d","name":"f"}}]},{"role":"model","parts":[{"functionCall":{"id":"d","name":"g"}}]},{"role":"user","parts":[{"functionResponse":{"id":"d","name":"f","response":{}}},{"functionResponse":{"name":"f","response":{"error":{"code":1}}}}]}]`},
		{"gemini thoughts around calls", "gemini", `[{"role":"model","parts":[{"text":"t1","thought":true},{"functionCall":{"name":"f","args":{}},"thoughtSignature":"s"},{"text":"t2","thought":true,"thoughtSignature":"s2"},{"text":"answer"},{"inlineData":{"mimeType":"image/png","data":"AA"}}]}]`},
		{"gemini snake case", "gemini", `[{"role":"user","parts":[{"inline_data":{"mime_type":"image/png","data":"AA"}},{"file_data":{"file_uri":"gs://b/f.pdf","mime_type":"application/pdf"}}]},{"role":"function","parts":[{"text":"r"}]}]`},
		{"deepseek reasoning only", "deepseek", `[{"role":"assistant","reasoning_content":"","content":null},{"role":"assistant","reasoning_content":"r","content":[],"tool_calls":[{"id":"a","function":{"name":"f","arguments":"x"}}]},{"role":"tool","tool_call_id":"a","content":"ok"}]`},
	}
	for _, c := range cases {
		if !checkAllPaths(t, []byte(c.in), c.from, c.name) {
			_, err := Translate(json.RawMessage(c.in), c.from, c.from)
			t.Errorf("%s: not a valid %s history: %v", c.name, c.from, err)
		}
	}
}
