package node

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// skillCase is one call of a skill over a real libp2p connection: either
// want (a subset of the result's fields, compared as JSON) or code.
type skillCase struct {
	name  string
	skill string
	args  string
	want  map[string]any
	check func(t *testing.T, res map[string]any)
	code  int
}

func runSkillCases(t *testing.T, a *Node, b *Node, cases []skillCase) {
	t.Helper()
	addr := addrOf(t, b)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw, err := a.Client().CallSkill(ctxT(t), addr, c.skill, json.RawMessage(c.args), protocol.CallOptions{})
			if c.code != 0 {
				if codeOf(err) != c.code {
					t.Fatalf("want error %d, got %v (result %s)", c.code, err, raw)
				}
				return
			}
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			var res map[string]any
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatalf("result %s: %v", raw, err)
			}
			for k, v := range c.want {
				if !reflect.DeepEqual(res[k], v) {
					t.Errorf("%s = %#v, want %#v (result %s)", k, res[k], v, raw)
				}
			}
			if c.check != nil {
				c.check(t, res)
			}
		})
	}
}

func TestStandardSkillsOverLibp2p(t *testing.T) {
	a, b := pair(t, nil)
	bid := b.ID().String()
	hello := "hello, mesh\nsecond line\n"
	sum := sha256.Sum256([]byte(hello))
	cases := []skillCase{
		// ping
		{name: "ping", skill: "ping", args: `{}`, want: map[string]any{"pong": true, "peer_id": bid},
			check: func(t *testing.T, r map[string]any) {
				if r["time_unix_ms"].(float64) <= 0 {
					t.Error("no time_unix_ms")
				}
			}},
		{name: "ping payload", skill: "ping", args: `{"payload":{"x":[1,2]}}`, want: map[string]any{"payload": map[string]any{"x": []any{1.0, 2.0}}}},
		{name: "ping unknown arg", skill: "ping", args: `{"nope":1}`, code: protocol.CodeInvalidParams},
		// ask (stateless)
		{name: "ask", skill: "ask", args: `{"query":"What is mcpv2?"}`, want: map[string]any{"provider": "local", "turn": 1.0},
			check: func(t *testing.T, r map[string]any) {
				if !strings.Contains(r["response"].(string), "local") || r["model"] == "" {
					t.Errorf("ask result %v", r)
				}
			}},
		{name: "ask no query", skill: "ask", args: `{}`, code: protocol.CodeInvalidParams},
		{name: "ask empty query", skill: "ask", args: `{"query":"  "}`, code: protocol.CodeInvalidParams},
		{name: "ask query not string", skill: "ask", args: `{"query":5}`, code: protocol.CodeInvalidParams},
		// files
		{name: "upload utf-8", skill: "upload_file", args: mustJSON(map[string]any{"filename": "a.txt", "content": hello}),
			want: map[string]any{"filename": "a.txt", "size": float64(len(hello)), "sha256": hex.EncodeToString(sum[:])}},
		{name: "upload base64", skill: "upload_file", args: mustJSON(map[string]any{"filename": "b.bin", "content": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}), "encoding": "base64"}),
			want: map[string]any{"size": 4.0}},
		{name: "upload bad base64", skill: "upload_file", args: `{"filename":"c.bin","content":"@@@","encoding":"base64"}`, code: protocol.CodeInvalidParams},
		{name: "upload bad encoding", skill: "upload_file", args: `{"filename":"c.bin","content":"x","encoding":"rot13"}`, code: protocol.CodeInvalidParams},
		{name: "upload traversal", skill: "upload_file", args: `{"filename":"../x","content":"x"}`, code: protocol.CodeInvalidParams},
		{name: "list", skill: "list_files", args: `{}`, check: func(t *testing.T, r map[string]any) {
			files := r["files"].([]any)
			if len(files) != 2 || files[0].(map[string]any)["filename"] != "a.txt" || files[0].(map[string]any)["modified"] == "" {
				t.Errorf("files = %v", files)
			}
		}},
		// read_file: whole, paged, binary as base64, and its refusals.
		{name: "read", skill: "read_file", args: `{"filename":"a.txt"}`,
			want: map[string]any{"filename": "a.txt", "size": float64(len(hello)), "sha256": hex.EncodeToString(sum[:]), "offset": 0.0,
				"length": float64(len(hello)), "eof": true, "encoding": "utf-8", "content": hello, "mime_type": "text/plain; charset=utf-8"}},
		{name: "read page", skill: "read_file", args: `{"filename":"a.txt","offset":7,"length":4}`,
			want: map[string]any{"offset": 7.0, "length": 4.0, "eof": false, "content": "mesh", "size": float64(len(hello))}},
		{name: "read binary", skill: "read_file", args: `{"filename":"b.bin"}`,
			want: map[string]any{"encoding": "base64", "content": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}), "eof": true}},
		{name: "read at end", skill: "read_file", args: mustJSON(map[string]any{"filename": "a.txt", "offset": len(hello)}),
			want: map[string]any{"length": 0.0, "eof": true, "content": ""}},
		{name: "read past end", skill: "read_file", args: mustJSON(map[string]any{"filename": "a.txt", "offset": len(hello) + 1}), code: protocol.CodeInvalidParams},
		{name: "read missing", skill: "read_file", args: `{"filename":"zz.txt"}`, code: protocol.CodeFileNotFound},
		{name: "read traversal", skill: "read_file", args: `{"filename":"../../etc/passwd"}`, code: protocol.CodeInvalidParams},
		{name: "read too long", skill: "read_file", args: mustJSON(map[string]any{"filename": "a.txt", "length": skills.MaxReadLength + 1}), code: protocol.CodeInvalidParams},
		{name: "read negative offset", skill: "read_file", args: `{"filename":"a.txt","offset":-1}`, code: protocol.CodeInvalidParams},
		{name: "process", skill: "process_instructions", args: `{"filename":"a.txt","instructions":"summarise"}`,
			want: map[string]any{"filename": "a.txt", "stats": map[string]any{"bytes": float64(len(hello)), "lines": 2.0, "words": 4.0}}},
		{name: "process missing", skill: "process_instructions", args: `{"filename":"zz.txt","instructions":"x"}`, code: protocol.CodeFileNotFound},
		{name: "delete", skill: "delete_file", args: `{"filename":"a.txt"}`, want: map[string]any{"filename": "a.txt", "deleted": true}},
		{name: "delete missing", skill: "delete_file", args: `{"filename":"a.txt"}`, code: protocol.CodeFileNotFound},
		{name: "delete traversal", skill: "delete_file", args: `{"filename":"/etc/passwd"}`, code: protocol.CodeInvalidParams},
		// get_skill
		{name: "get_skill", skill: "get_skill", args: `{"name":"ask"}`, want: map[string]any{"name": "ask"},
			check: func(t *testing.T, r map[string]any) {
				if r["inputSchema"].(map[string]any)["type"] != "object" {
					t.Errorf("schema %v", r["inputSchema"])
				}
			}},
		{name: "get_skill missing", skill: "get_skill", args: `{"name":"nope"}`, code: protocol.CodeSkillNotFound},
		// pay
		{name: "pay", skill: "pay", args: `{"amount":1.5,"currency":"EUR","memo":"coffee"}`, want: map[string]any{"status": "pending", "stub": true},
			check: func(t *testing.T, r map[string]any) {
				if !strings.HasPrefix(r["transaction_id"].(string), "tx_") {
					t.Errorf("transaction_id %v", r["transaction_id"])
				}
			}},
		{name: "pay zero", skill: "pay", args: `{"amount":0}`, code: protocol.CodeInvalidParams},
		{name: "pay negative", skill: "pay", args: `{"amount":-3}`, code: protocol.CodeInvalidParams},
		{name: "pay string", skill: "pay", args: `{"amount":"10"}`, code: protocol.CodeInvalidParams},
		// negotiate
		{name: "negotiate", skill: "negotiate", args: `{"protocol_versions":["mcpv2/2.0","mcpv2/1.0"],"providers":["gemini","cohere"]}`,
			want: map[string]any{"protocol_version": "mcpv2/1.0", "providers": []any{"gemini"}},
			check: func(t *testing.T, r map[string]any) {
				l := r["limits"].(map[string]any)
				if l["max_batch"] != 100.0 || l["max_message"] != float64(8<<20) || l["rate_limit"] != 200.0 {
					t.Errorf("limits %v", l)
				}
			}},
		{name: "negotiate no common", skill: "negotiate", args: `{"protocol_versions":["mcpv2/9.0"]}`, code: protocol.CodeVersionMismatch},
		{name: "negotiate empty", skill: "negotiate", args: `{"protocol_versions":[]}`, code: protocol.CodeInvalidParams},
		// translate_history
		{name: "translate", skill: "translate_history", args: `{"from":"openai","to":"gemini","history":[{"role":"user","content":"Hi"}]}`,
			want: map[string]any{"from": "openai", "to": "gemini", "history": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "Hi"}}}}}},
		{name: "translate unknown provider", skill: "translate_history", args: `{"from":"openai","to":"cohere","history":[]}`, code: protocol.CodeUnsupportedProvider},
		{name: "translate bad history", skill: "translate_history", args: `{"from":"openai","to":"claude","history":[{"role":"wizard","content":"x"}]}`, code: protocol.CodeInvalidParams},
		{name: "translate history not array", skill: "translate_history", args: `{"from":"openai","to":"claude","history":"x"}`, code: protocol.CodeInvalidParams},
		// unknown skill
		{name: "unknown skill", skill: "nope", args: `{}`, code: protocol.CodeSkillNotFound},
	}
	runSkillCases(t, a, b, cases)
}

func TestToolsListHasStandardSkillsWithSchemas(t *testing.T) {
	a, b := pair(t, nil)
	raw, err := a.Client().CallMethod(ctxT(t), addrOf(t, b), protocol.MethodToolsList, protocol.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var tl struct {
		Tools []protocol.SkillDescriptor `json:"tools"`
	}
	if err := json.Unmarshal(raw, &tl); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tl.Tools {
		names = append(names, tool.Name)
		var s map[string]any
		if err := json.Unmarshal(tool.InputSchema, &s); err != nil || s["type"] != "object" {
			t.Errorf("%s: input schema %s", tool.Name, tool.InputSchema)
		}
		if tool.Description == "" {
			t.Errorf("%s: no description", tool.Name)
		}
	}
	// A node serves scan beside the standard skills (orchestrate too, with a mesh).
	if want := append(slices.Clone(skills.StandardNames), "scan"); !reflect.DeepEqual(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
}

func TestAgentCard(t *testing.T) {
	a, b := pair(t, func(c *Config) { c.Name = "bob"; c.LLMMode = true })
	raw, err := a.Client().CallMethod(ctxT(t), addrOf(t, b), protocol.MethodAgentCard, protocol.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var card protocol.AgentCard
	if err := json.Unmarshal(raw, &card); err != nil {
		t.Fatal(err)
	}
	if card.Name != "bob" || card.PeerID != b.ID().String() || len(card.Skills) != len(skills.StandardNames)+1 || !card.Capabilities.LLMMode ||
		card.Capabilities.MaxBatch != 100 || len(card.Addrs) == 0 || card.Seq == 0 || card.ProtocolVersions[0] != "mcpv2/1.0" {
		t.Errorf("card %s", raw)
	}
	second := b.Card()
	if second.Seq <= card.Seq {
		t.Errorf("seq did not grow: %d then %d", card.Seq, second.Seq)
	}
}

// TestFileRoundTripSizes: upload → list → process → delete at 1 KiB, 1 MiB
// and 16 MiB over libp2p (16 MiB base64 needs a larger --max-message).
func TestFileRoundTripSizes(t *testing.T) {
	a, b := pair(t, func(c *Config) { c.MaxMessage = 32 << 20 })
	a.client.maxMsg = 32 << 20
	addr := addrOf(t, b)
	for _, size := range []int{1 << 10, 1 << 20, 16 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := make([]byte, size)
			for i := range data {
				data[i] = "abc def\n"[i%8]
			}
			sum := sha256.Sum256(data)
			name := fmt.Sprintf("f%d.txt", size)
			call := func(skill string, args any) map[string]any {
				raw, err := a.Client().CallSkill(ctxT(t), addr, skill, json.RawMessage(mustJSON(args)), protocol.CallOptions{})
				if err != nil {
					t.Fatalf("%s: %v", skill, err)
				}
				var m map[string]any
				_ = json.Unmarshal(raw, &m)
				return m
			}
			up := call("upload_file", map[string]any{"filename": name, "content": base64.StdEncoding.EncodeToString(data), "encoding": "base64"})
			if up["sha256"] != hex.EncodeToString(sum[:]) || up["size"] != float64(size) {
				t.Fatalf("upload %v", up)
			}
			got, err := os.ReadFile(filepath.Join(b.DataDir(), "files", name))
			if err != nil || sha256.Sum256(got) != sum {
				t.Fatalf("stored file differs: %v", err)
			}
			list := call("list_files", map[string]any{})
			found := false
			for _, f := range list["files"].([]any) {
				fm := f.(map[string]any)
				found = found || (fm["filename"] == name && fm["sha256"] == hex.EncodeToString(sum[:]))
			}
			if !found {
				t.Fatalf("list %v lacks %s", list, name)
			}
			pr := call("process_instructions", map[string]any{"filename": name, "instructions": "count"})
			st := pr["stats"].(map[string]any)
			if st["bytes"] != float64(size) || st["lines"] != float64(size/8) || st["words"] != float64(size/4) {
				t.Fatalf("stats %v", st)
			}
			if del := call("delete_file", map[string]any{"filename": name}); del["deleted"] != true {
				t.Fatalf("delete %v", del)
			}
			if _, err := os.Stat(filepath.Join(b.DataDir(), "files", name)); !os.IsNotExist(err) {
				t.Fatalf("file still there: %v", err)
			}
		})
	}
}

func TestFileTraversalRefused(t *testing.T) {
	a, b := pair(t, nil)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(b.DataDir(), "files", "link.txt")); err != nil {
		t.Fatal(err)
	}
	addr := addrOf(t, b)
	names := []string{"../x", "/etc/passwd", "a/../../x", "x\x00y", "..", ".", "", "a/b", `a\b`, "link.txt"}
	for _, skill := range []string{"upload_file", "process_instructions", "delete_file"} {
		for _, name := range names {
			args := map[string]any{"filename": name, "content": "pwn", "instructions": "x"}
			if skill == "delete_file" {
				args = map[string]any{"filename": name}
			}
			_, err := a.Client().CallSkill(ctxT(t), addr, skill, json.RawMessage(mustJSON(args)), protocol.CallOptions{})
			if codeOf(err) != protocol.CodeInvalidParams {
				t.Errorf("%s(%q): want -32602, got %v", skill, name, err)
			}
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret" {
		t.Errorf("outside file changed: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(b.DataDir(), "files", "link.txt")); err != nil {
		t.Errorf("symlink was removed: %v", err)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
