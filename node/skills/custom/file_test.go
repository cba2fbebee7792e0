package custom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/node/guard"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// testToolEnv switches the test binary into a tiny JSON tool (see
// TestMain and runTestTool).
const testToolEnv = "MCPV2_TEST_TOOL"

// newTestRegistry returns a registry that already holds a "ping"
// skill, standing in for the standard skills.
func newTestRegistry(t *testing.T) *skills.Registry {
	t.Helper()
	r := skills.NewRegistry(nil)
	err := r.AddRaw(protocol.SkillDescriptor{Name: "ping", Description: "standard"}, func(context.Context, json.RawMessage) (any, error) {
		return map[string]bool{"pong": true}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// writeFile writes a skills file built from sk (marshalled as
// {"skills": sk}) into a fresh directory and returns its path.
func writeFile(t *testing.T, sk ...any) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"skills": sk})
	if err != nil {
		t.Fatal(err)
	}
	return writeRaw(t, string(data))
}

func writeRaw(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "skills.json")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadFile loads path into a fresh test registry with a Loader built from
// opts, closed when the test ends, and fails the test on error.
func loadFile(t *testing.T, path string, opts ...Option) *skills.Registry {
	t.Helper()
	r := newTestRegistry(t)
	if _, err := loadInto(t, r, path, opts...); err != nil {
		t.Fatalf("LoadFile: %v", err)
	}
	return r
}

// newTestLoader returns a Loader built from opts over a fresh test
// registry, closed when the test ends.
func newTestLoader(t *testing.T, opts ...Option) *Loader {
	t.Helper()
	l, err := New(newTestRegistry(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// loadInto loads path into r with a Loader built from opts (New's error is
// returned as is), closed when the test ends.
func loadInto(t *testing.T, r *skills.Registry, path string, opts ...Option) ([]string, error) {
	t.Helper()
	l, err := New(r, opts...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { l.Close() })
	return l.LoadFile(path)
}

// callSkill calls a skill and returns its result or its protocol error.
func callSkill(t *testing.T, ctx context.Context, r *skills.Registry, name, args string) (json.RawMessage, *protocol.Error) {
	t.Helper()
	out, err := r.Call(ctx, name, json.RawMessage(args))
	if err == nil {
		return out, nil
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("Call(%s) error %T %v; want *protocol.Error", name, err, err)
	}
	return nil, pe
}

// wantError checks a call failed with code and a message holding every
// one of parts.
func wantError(t *testing.T, pe *protocol.Error, code int, parts ...string) {
	t.Helper()
	if pe == nil {
		t.Fatalf("call succeeded; want error %d %q", code, parts)
	}
	if pe.Code != code {
		t.Errorf("error code %d (%s); want %d", pe.Code, pe.Message, code)
	}
	for _, p := range parts {
		if !strings.Contains(pe.Message, p) {
			t.Errorf("error message %q; want it to contain %q", pe.Message, p)
		}
	}
}

var greetSkill = map[string]any{
	"name": "greet", "description": "Greets someone", "tags": []string{"demo"},
	"input_schema": map[string]any{
		"type":       "object",
		"properties": map[string]any{"name": map[string]any{"type": "string"}},
		"required":   []string{"name"},
	},
	"handler": map[string]any{"type": "template", "template": "Hello, {{.name}}!"},
}

func templateSkill(name, tmpl string) map[string]any {
	return map[string]any{"name": name, "handler": map[string]any{"type": "template", "template": tmpl}}
}

func TestTemplate(t *testing.T) {
	ctx := t.Context()
	path := writeFile(t, greetSkill,
		templateSkill("numbers", `{{.n}} {{json .list}} {{join .list "+"}} {{upper .s}}`),
		templateSkill("index", `{{index .items 5}}`),
		templateSkill("long", `{{range .items}}0123456789{{end}}`),
	)
	r := loadFile(t, path, WithMaxOutput(64))

	d, ok := r.Lookup("greet")
	if !ok || d.Description != "Greets someone" || !slices.Equal(d.Tags, []string{"demo"}) ||
		string(d.InputSchema) != `{"properties":{"name":{"type":"string"}},"required":["name"],"type":"object"}` {
		t.Errorf("descriptor %+v (schema %s)", d, d.InputSchema)
	}
	if d, _ := r.Lookup("numbers"); string(d.InputSchema) != `{"type":"object"}` || d.Tags == nil {
		t.Errorf("default schema/tags: %s %#v", d.InputSchema, d.Tags)
	}

	out, pe := callSkill(t, ctx, r, "greet", `{"name":"World"}`)
	if pe != nil || string(out) != `{"result":"Hello, World!"}` {
		t.Fatalf("greet = %s, %v; want {\"result\":\"Hello, World!\"}", out, pe)
	}
	_, pe = callSkill(t, ctx, r, "greet", `{}`)
	wantError(t, pe, protocol.CodeInvalidParams, "greet")
	_, pe = callSkill(t, ctx, r, "greet", `{"name":5}`)
	wantError(t, pe, protocol.CodeInvalidParams)

	out, pe = callSkill(t, ctx, r, "numbers", `{"n":12345678901234567,"list":[1,"a"],"s":"up"}`)
	if pe != nil || string(out) != `{"result":"12345678901234567 [1,\"a\"] 1+a UP"}` {
		t.Errorf("numbers = %s, %v", out, pe)
	}
	_, pe = callSkill(t, ctx, r, "index", `{"items":[1]}`)
	wantError(t, pe, protocol.CodeSkillExecution, `template skill "index"`, "out of range")
	_, pe = callSkill(t, ctx, r, "long", `{"items":[1,2,3,4,5,6,7]}`)
	wantError(t, pe, protocol.CodeSkillExecution, `template skill "long": output exceeds 64 bytes`)
	out, pe = callSkill(t, ctx, r, "long", `{"items":[1,2]}`)
	if pe != nil || string(out) != `{"result":"01234567890123456789"}` {
		t.Errorf("long under the cap = %s, %v", out, pe)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, pe = callSkill(t, cctx, r, "greet", `{"name":"x"}`)
	wantError(t, pe, protocol.CodeSkillExecution, "canceled")
}

func TestHTTP(t *testing.T) {
	t.Setenv("MCPV2_TEST_HTTP_KEY", "k-123")
	const maxOut = 1024
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		switch req.URL.Path {
		case "/echo":
			if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
				http.Error(w, "want a JSON POST", http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, `{"got": %s, "auth": %q, "plain": %q}`+"\n", body, req.Header.Get("Authorization"), req.Header.Get("X-Plain"))
		case "/fail":
			http.Error(w, "secret internal detail", http.StatusInternalServerError)
		case "/big":
			fmt.Fprintf(w, `{"pad":%q}`, strings.Repeat("x", maxOut))
		case "/array":
			fmt.Fprint(w, `[1,2]`)
		case "/garbage":
			fmt.Fprint(w, `<html>`)
		case "/slow":
			select {
			case <-req.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}
	}))
	defer srv.Close()
	skill := func(name, path string, extra map[string]any) map[string]any {
		h := map[string]any{"type": "http", "url": srv.URL + path}
		for k, v := range extra {
			h[k] = v
		}
		return map[string]any{"name": name, "handler": h}
	}
	file := writeFile(t,
		skill("echo", "/echo", map[string]any{"headers": map[string]string{
			"Authorization": "Bearer ${ENV:MCPV2_TEST_HTTP_KEY}", "X-Plain": "literal"}}),
		skill("fail", "/fail", nil),
		skill("big", "/big", nil),
		skill("array", "/array", nil),
		skill("garbage", "/garbage", nil),
		skill("slow", "/slow", map[string]any{"timeout_s": 0.3}),
		skill("slow_long", "/slow", nil),
	)
	r := loadFile(t, file, WithHTTPClient(srv.Client()), WithMaxOutput(maxOut))
	ctx := t.Context()

	out, pe := callSkill(t, ctx, r, "echo", `{"q":[1,2]}`)
	if pe != nil || string(out) != `{"got":{"q":[1,2]},"auth":"Bearer k-123","plain":"literal"}` {
		t.Errorf("echo = %s, %v", out, pe)
	}
	_, pe = callSkill(t, ctx, r, "fail", `{}`)
	wantError(t, pe, protocol.CodeToolExecution, `http skill "fail": status 500`)
	if pe != nil && strings.Contains(pe.Message, "secret") {
		t.Errorf("error leaks the answer body: %q", pe.Message)
	}
	_, pe = callSkill(t, ctx, r, "big", `{}`)
	wantError(t, pe, protocol.CodeToolExecution, "answer exceeds 1024 bytes")
	_, pe = callSkill(t, ctx, r, "array", `{}`)
	wantError(t, pe, protocol.CodeToolExecution, "answer is a JSON array, want a JSON object")
	_, pe = callSkill(t, ctx, r, "garbage", `{}`)
	wantError(t, pe, protocol.CodeToolExecution, "answer is not valid JSON")

	start := time.Now()
	_, pe = callSkill(t, ctx, r, "slow", `{}`)
	wantError(t, pe, protocol.CodeToolExecution, `http skill "slow": timed out after 300ms`)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("timeout took %v", d)
	}

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	_, pe = callSkill(t, cctx, r, "slow_long", `{}`)
	wantError(t, pe, protocol.CodeToolExecution, "canceled")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
	if pe != nil && strings.Contains(pe.Message, srv.URL) {
		t.Errorf("error names the service URL: %q", pe.Message)
	}
}

// TestBadFiles checks that every kind of bad file fails as a whole,
// naming the file, the skill and the reason, and registers nothing.
func TestBadFiles(t *testing.T) {
	good := greetSkill
	handler := func(h map[string]any) map[string]any { return map[string]any{"name": "x", "handler": h} }
	tooMany := make([]any, MaxSkills+1)
	for i := range tooMany {
		tooMany[i] = templateSkill(fmt.Sprintf("s%d", i), "x")
	}
	big := map[string]any{"name": "big", "description": strings.Repeat("d", 4000),
		"handler": map[string]any{"type": "template", "template": "x"}}
	bigFile := make([]any, 0, 300)
	for i := range 260 {
		b := cloneArgs(big)
		b["name"] = fmt.Sprintf("big%d", i)
		bigFile = append(bigFile, b)
	}

	tests := []struct {
		name    string
		raw     string // the file, if set
		skills  []any  // else {"skills": skills}
		command bool   // needs command handler support
		skill   string // the skill label the error must name ("" for file-level errors)
		reason  string
	}{
		{name: "bad JSON", raw: "{\"skills\": [\n  {\"name\": \"a\",}\n]}", reason: "invalid JSON at line 2, column 16: invalid character '}'"},
		{name: "truncated JSON", raw: `{"skills": [`, reason: "invalid JSON"},
		{name: "trailing data", raw: `{"skills": []} {}`, reason: "trailing data"},
		{name: "not an object", raw: `[]`, reason: "got a JSON array, want an object"},
		{name: "unknown top-level field", raw: `{"skils": []}`, reason: `unknown field "skils"`},
		{name: "unknown skill field", skills: []any{good, map[string]any{"name": "b", "handlr": map[string]any{}}},
			skill: `skill "b"`, reason: `unknown field "handlr"`},
		{name: "unknown handler field", skills: []any{good, handler(map[string]any{"type": "template", "template": "x", "timeout_s": 3})},
			skill: `skill "x"`, reason: `handler: unknown field "timeout_s"`},
		{name: "skill not an object", skills: []any{good, "greet2"}, skill: "skill #2", reason: "not a JSON object"},
		{name: "wrong field type", skills: []any{good, map[string]any{"name": "b", "tags": "demo", "handler": map[string]any{"type": "template", "template": "x"}}},
			skill: `skill "b"`, reason: "tags: got a JSON string, want an array of strings"},
		{name: "read_only not a bool", skills: []any{good, map[string]any{"name": "b", "read_only": "yes", "handler": map[string]any{"type": "template", "template": "x"}}},
			skill: `skill "b"`, reason: "read_only: got a JSON string, want a boolean"},
		{name: "bad name", skills: []any{good, templateSkill("bad name!", "x")}, skill: `skill "bad name!"`, reason: "name: \"bad name!\" must match ^[A-Za-z0-9_.-]{1,64}$"},
		{name: "long name", skills: []any{good, templateSkill(strings.Repeat("n", 65), "x")}, skill: "skill \"nnn", reason: "must match"},
		{name: "missing name", skills: []any{good, map[string]any{"handler": map[string]any{"type": "template", "template": "x"}}}, skill: "skill #2", reason: `name: "" must match`},
		{name: "bad tag", skills: []any{good, map[string]any{"name": "b", "tags": []string{"ok", "no spaces"}, "handler": map[string]any{"type": "template", "template": "x"}}},
			skill: `skill "b"`, reason: `tags[1]: "no spaces" must match`},
		{name: "duplicate name", skills: []any{good, templateSkill("other", "x"), good}, skill: `skill "greet"`, reason: `name: skills: duplicate skill name "greet" (skills #1 and #3)`},
		{name: "clash with a registered skill", skills: []any{good, templateSkill("ping", "x")}, skill: `skill "ping"`, reason: `duplicate skill name "ping" (already registered)`},
		{name: "missing handler", skills: []any{good, map[string]any{"name": "b"}}, skill: `skill "b"`, reason: "handler: missing"},
		{name: "missing handler type", skills: []any{good, handler(map[string]any{"template": "x"})}, skill: `skill "x"`, reason: "handler.type: missing"},
		{name: "unknown handler type", skills: []any{good, handler(map[string]any{"type": "python"})}, skill: `skill "x"`, reason: `handler.type: unknown handler type "python" (want template, command, http, mcp or a2a)`},
		{name: "bad guard kind", skills: []any{good, map[string]any{"name": "g", "guard": map[string]string{"q": "html"}, "handler": map[string]any{"type": "template", "template": "x"}}},
			skill: `skill "g"`, reason: `guard: "q": "html" is not prompt, path, sql, sql+prompt, off or auto`},
		{name: "guard a string", skills: []any{good, map[string]any{"name": "g", "guard": "on", "handler": map[string]any{"type": "template", "template": "x"}}},
			skill: `skill "g"`, reason: `guard: want true, false or a map`},
		{name: "guard not a map", skills: []any{good, map[string]any{"name": "g", "guard": []string{"q"}, "handler": map[string]any{"type": "template", "template": "x"}}},
			skill: `skill "g"`, reason: `guard`},
		{name: "mcp handler without a server", skills: []any{good, handler(map[string]any{"type": "mcp", "tool": "t"})}, skill: `skill "x"`, reason: `handler.command: give "command" (a local server on stdio) or "url"`},
		{name: "mcp handler without a tool", skills: []any{good, handler(map[string]any{"type": "mcp", "url": "http://127.0.0.1:1/mcp"})}, skill: `skill "x"`, reason: `handler.tool: missing`},
		{name: "mcp handler tools not *", skills: []any{good, handler(map[string]any{"type": "mcp", "url": "http://127.0.0.1:1/mcp", "tools": "all"})}, skill: `skill "x"`, reason: `handler.tools: "all": the only value is "*"`},
		{name: "mcp handler file URL", skills: []any{good, handler(map[string]any{"type": "mcp", "url": "file:///etc/passwd", "tool": "t"})}, skill: `skill "x"`, reason: `handler.url: scheme "file" is not allowed`},
		{name: "bad template", skills: []any{templateSkill("greet", "Hello, {{ .name } }}!")}, skill: `skill "greet"`,
			reason: `handler.template: template: greet:1: unexpected "}" in operand`},
		{name: "empty template", skills: []any{good, handler(map[string]any{"type": "template", "template": ""})}, skill: `skill "x"`, reason: "handler.template: missing"},
		{name: "missing program", command: true, skills: []any{good, handler(map[string]any{"type": "command", "command": []string{"mcpv2-no-such-program-xyz"}})},
			skill: `skill "x"`, reason: `handler.command[0]: program "mcpv2-no-such-program-xyz": executable file not found in $PATH`},
		{name: "missing program path", command: true, skills: []any{good, handler(map[string]any{"type": "command", "command": []string{"./no-such-tool"}})},
			skill: `skill "x"`, reason: `handler.command[0]: program`},
		{name: "empty command", command: true, skills: []any{good, handler(map[string]any{"type": "command", "command": []string{}})},
			skill: `skill "x"`, reason: "handler.command: missing"},
		{name: "command timeout too long", command: true, skills: []any{good, handler(map[string]any{"type": "command", "command": []string{"true"}, "timeout_s": 601})},
			skill: `skill "x"`, reason: "handler.timeout_s: 601 is out of range (0, 600]"},
		{name: "command memory zero", command: true, skills: []any{good, handler(map[string]any{"type": "command", "command": []string{"true"}, "memory_mb": 0})},
			skill: `skill "x"`, reason: "handler.memory_mb: 0 is out of range"},
		{name: "command reserved env", command: true, skills: []any{good, handler(map[string]any{"type": "command", "command": []string{"true"}, "env": map[string]string{"HOME": "/"}})},
			skill: `skill "x"`, reason: "handler.env.HOME: is set by the node"},
		{name: "command env unset", command: true, skills: []any{good, handler(map[string]any{"type": "command", "command": []string{"true"}, "env": map[string]string{"K": "${ENV:MCPV2_TEST_SURELY_UNSET}"}})},
			skill: `skill "x"`, reason: "handler.env.K: environment variable MCPV2_TEST_SURELY_UNSET is not set"},
		{name: "bad url scheme", skills: []any{good, handler(map[string]any{"type": "http", "url": "file:///etc/passwd"})}, skill: `skill "x"`, reason: `handler.url: scheme "file" is not allowed (want http or https)`},
		{name: "ftp url", skills: []any{good, handler(map[string]any{"type": "http", "url": "ftp://example.com/x"})}, skill: `skill "x"`, reason: `scheme "ftp" is not allowed`},
		{name: "url without host", skills: []any{good, handler(map[string]any{"type": "http", "url": "http:///x"})}, skill: `skill "x"`, reason: "handler.url: no host"},
		{name: "url with credentials", skills: []any{good, handler(map[string]any{"type": "http", "url": "https://u:p@example.com/"})}, skill: `skill "x"`, reason: "handler.url: credentials"},
		{name: "header env unset", skills: []any{good, handler(map[string]any{"type": "http", "url": "https://example.com/", "headers": map[string]string{"Authorization": "Bearer ${ENV:MCPV2_TEST_SURELY_UNSET}"}})},
			skill: `skill "x"`, reason: "handler.headers.Authorization: environment variable MCPV2_TEST_SURELY_UNSET is not set"},
		{name: "header other substitution", skills: []any{good, handler(map[string]any{"type": "http", "url": "https://example.com/", "headers": map[string]string{"X-Key": "${HOME}"}})},
			skill: `skill "x"`, reason: "handler.headers.X-Key: only ${ENV:NAME} references are allowed"},
		{name: "reserved header", skills: []any{good, handler(map[string]any{"type": "http", "url": "https://example.com/", "headers": map[string]string{"Host": "evil"}})},
			skill: `skill "x"`, reason: "handler.headers.Host: may not be set"},
		{name: "http timeout zero", skills: []any{good, handler(map[string]any{"type": "http", "url": "https://example.com/", "timeout_s": 0})}, skill: `skill "x"`, reason: "handler.timeout_s: 0 is out of range"},
		{name: "schema bad type name", skills: []any{good, map[string]any{"name": "b", "input_schema": map[string]any{"type": "objekt"}, "handler": map[string]any{"type": "template", "template": "x"}}},
			skill: `skill "b"`, reason: `input_schema: /type: "objekt" is not a JSON Schema type`},
		{name: "schema not object type", skills: []any{good, map[string]any{"name": "b", "input_schema": map[string]any{"type": "string"}, "handler": map[string]any{"type": "template", "template": "x"}}},
			skill: `skill "b"`, reason: `input_schema: must have "type":"object"`},
		{name: "schema bad property", skills: []any{good, map[string]any{"name": "b", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "nope"}}}, "handler": map[string]any{"type": "template", "template": "x"}}},
			skill: `skill "b"`, reason: `input_schema: /properties/a/type: "nope" is not a JSON Schema type`},
		{name: "schema bad pattern", skills: []any{good, map[string]any{"name": "b", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string", "pattern": "("}}}, "handler": map[string]any{"type": "template", "template": "x"}}},
			skill: `skill "b"`, reason: "input_schema: jsonschema.Schema"},
		{name: "schema not a schema", skills: []any{good, map[string]any{"name": "b", "input_schema": []int{1}, "handler": map[string]any{"type": "template", "template": "x"}}},
			skill: `skill "b"`, reason: "input_schema: must be a JSON Schema object"},
		{name: "too many skills", skills: tooMany, reason: "257 skills, at most 256 are allowed"},
		{name: "oversize file", skills: bigFile, reason: "file is larger than 1048576 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.command && runtime.GOOS != "linux" {
				testenv.SkipEnv(t, "command handlers need Linux")
			}
			path := ""
			if tc.raw != "" {
				path = writeRaw(t, tc.raw)
			} else {
				path = writeFile(t, tc.skills...)
			}
			r := newTestRegistry(t)
			names, err := loadInto(t, r, path, WithScratchDir(filepath.Join(t.TempDir(), "scratch")))
			if err == nil {
				t.Fatalf("LoadFile succeeded with %q; want an error", names)
			}
			msg := err.Error()
			want := "custom skills file " + path + ": "
			if tc.skill != "" {
				want += tc.skill
			}
			if !strings.HasPrefix(msg, want) {
				t.Errorf("error %q\nwant prefix %q", msg, want)
			}
			if !strings.Contains(msg, tc.reason) {
				t.Errorf("error %q\nwant reason %q", msg, tc.reason)
			}
			if names != nil {
				t.Errorf("names = %q; want nil", names)
			}
			if got := r.Names(); !slices.Equal(got, []string{"ping"}) {
				t.Errorf("registry holds %q after a failed load; want only the pre-existing [ping]", got)
			}
		})
	}
}

// cloneArgs returns a shallow copy of m.
func cloneArgs(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestBadTemplateMessage(t *testing.T) {
	// The exact form of SPEC §3's "naming the file, the skill and the reason".
	path := writeFile(t, templateSkill("greet", "Hello, {{ .name } }}!"))
	_, err := loadInto(t, skills.NewRegistry(nil), path)
	want := `custom skills file ` + path + `: skill "greet": handler.template: template: greet:1: unexpected "}" in operand`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant     %s", err, want)
	}
}

func TestFileMissingAndEmpty(t *testing.T) {
	_, err := loadInto(t, skills.NewRegistry(nil), filepath.Join(t.TempDir(), "nope.json"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v; want fs.ErrNotExist", err)
	}
	for _, raw := range []string{`{}`, `{"skills":[]}`, `{"skills":null}`} {
		names, err := loadInto(t, skills.NewRegistry(nil), writeRaw(t, raw))
		if err != nil || len(names) != 0 {
			t.Errorf("%s: %q, %v; want no skills and no error", raw, names, err)
		}
	}
}

// TestGuardField: a custom skill is scanned by default, opts out with
// "guard": false, and sets kinds by name with a map ("*" for the rest).
func TestGuardField(t *testing.T) {
	l, err := New(skills.NewRegistry(nil), WithScratchDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, err := l.Parse([]byte(`{"skills":[
		{"name":"plain","handler":{"type":"template","template":"x"}},
		{"name":"database_lookup","handler":{"type":"template","template":"x"}},
		{"name":"out","guard":false,"handler":{"type":"template","template":"x"}},
		{"name":"some","guard":{"text":"prompt","blob":"off","*":"off"},"handler":{"type":"template","template":"x"}},
		{"name":"fmt","input_schema":{"type":"object","properties":{"target":{"type":"string","format":"path"}}},"guard":{"q":"sql"},"handler":{"type":"template","template":"x"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	plans := map[string]*guard.Plan{}
	for _, s := range got {
		plans[s.Descriptor.Name] = s.Guard
	}
	if p := plans["plain"]; p == nil || p.KindOf("query") != guard.Prompt || p.KindOf("file") != guard.Path || p.KindOf("where") != guard.SQLText {
		t.Errorf("default plan %+v", p)
	}
	if p := plans["database_lookup"]; p == nil || !p.SQLish || p.KindOf("department") != guard.SQLText {
		t.Errorf("database skill plan %+v", p)
	}
	if plans["out"] != nil {
		t.Errorf(`"guard": false: plan %+v, want nil`, plans["out"])
	}
	if p := plans["some"]; p == nil || p.KindOf("text") != guard.Prompt || p.KindOf("blob") != guard.Off || p.KindOf("other") != guard.Off {
		t.Errorf("map with *: plan %+v", p)
	}
	if p := plans["fmt"]; p == nil || p.KindOf("target") != guard.Path || p.KindOf("q") != guard.SQL || p.KindOf("note") != guard.Prompt {
		t.Errorf("schema format and map: plan %+v", p)
	}
	reg := skills.NewRegistry(nil)
	l2, err := New(reg, WithScratchDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if _, err := l2.Register(got); err != nil {
		t.Fatal(err)
	}
	if reg.GuardPlan("out") != nil || reg.GuardPlan("some").KindOf("blob") != guard.Off {
		t.Errorf("registered plans: out %+v, some %+v", reg.GuardPlan("out"), reg.GuardPlan("some"))
	}
}

// TestReadOnlyField: "read_only": true reaches the descriptor (and the
// registry's copy of it); absent or false, the skill is not read-only.
func TestReadOnlyField(t *testing.T) {
	reg := skills.NewRegistry(nil)
	l, err := New(reg, WithScratchDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, err := l.Parse([]byte(`{"skills":[
		{"name":"ro","read_only":true,"handler":{"type":"template","template":"x"}},
		{"name":"rw","read_only":false,"handler":{"type":"template","template":"x"}},
		{"name":"plain","handler":{"type":"template","template":"x"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Register(got); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"ro": true, "rw": false, "plain": false}
	for _, d := range reg.List() {
		if w, ok := want[d.Name]; ok && d.ReadOnly != w {
			t.Errorf("%s: ReadOnly %v; want %v", d.Name, d.ReadOnly, w)
		}
		delete(want, d.Name)
	}
	if len(want) != 0 {
		t.Errorf("not registered: %v", want)
	}
}
