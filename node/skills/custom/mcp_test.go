package custom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// mcpTestServerEnv switches the test binary into a local MCP server on
// stdio (go-sdk), with the tools echo, add, fail and pid.
const mcpTestServerEnv = "MCPV2_TEST_MCP_SERVER"

type echoIn struct {
	Text string `json:"text" jsonschema:"what to echo"`
}
type echoOut struct {
	Echo string `json:"echo"`
}
type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}
type addOut struct {
	Sum int `json:"sum"`
}

func runMCPTestServer() int {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-server", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back."}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
		return nil, echoOut{Echo: in.Text}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two integers."}, func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
		return nil, addOut{Sum: in.A + in.B}, nil
	})
	s.AddTool(&mcp.Tool{Name: "fail", Description: "Always fails.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the disk is on fire"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "pid", Description: "Says its process id, as text.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "test mcp server:", err)
		return 1
	}
	return 0
}

// mcpTestSkills loads skills that front the test server (this binary),
// returning the registry and the Loader that owns the server (closed when
// the test ends).
func mcpTestSkills(t *testing.T, sk ...any) (*skills.Registry, *Loader) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("command MCP servers need Linux")
	}
	r := newTestRegistry(t)
	l, err := New(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r.AddCloser(l) // as the node wires it: the registry's Close closes the Loader
	if _, err := l.LoadFile(writeFile(t, sk...)); err != nil {
		t.Fatal(err)
	}
	return r, l
}

func mcpTestHandler(extra map[string]any) map[string]any {
	h := map[string]any{"type": "mcp", "command": []string{os.Args[0]}, "env": map[string]string{mcpTestServerEnv: "1"}}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

// TestMCPTool: a skill that is one tool of a local MCP server has the
// tool's schema, validates arguments against it, returns its structured
// result, and turns a tool's failure into -32004.
func TestMCPTool(t *testing.T) {
	r, _ := mcpTestSkills(t,
		map[string]any{"name": "shout", "handler": mcpTestHandler(map[string]any{"tool": "echo"})},
		map[string]any{"name": "broken", "description": "mine", "handler": mcpTestHandler(map[string]any{"tool": "fail"})},
	)
	d, ok := r.Lookup("shout")
	if !ok || !strings.Contains(string(d.InputSchema), `"text"`) || d.Description != "Echo the text back." || !strings.Contains(strings.Join(d.Tags, ","), "mcp") {
		t.Fatalf("shout: %+v", d)
	}
	if d, _ := r.Lookup("broken"); d.Description != "mine" {
		t.Errorf("the file's description is kept: %q", d.Description)
	}
	out, err := r.Call(context.Background(), "shout", json.RawMessage(`{"text":"hello"}`))
	if err != nil || string(out) != `{"echo":"hello"}` {
		t.Fatalf("shout: %s %v", out, err)
	}
	if _, err := r.Call(context.Background(), "shout", json.RawMessage(`{"text":5}`)); codeOf(err) != protocol.CodeInvalidParams {
		t.Fatalf("a bad argument: %v", err)
	}
	_, err = r.Call(context.Background(), "broken", json.RawMessage(`{}`))
	if codeOf(err) != protocol.CodeToolExecution || !strings.Contains(err.Error(), "the disk is on fire") {
		t.Fatalf("a failing tool: %v", err)
	}
}

// TestMCPAllTools imports every tool of the server under a prefix.
func TestMCPAllTools(t *testing.T) {
	r, _ := mcpTestSkills(t, map[string]any{"name": "t", "handler": mcpTestHandler(map[string]any{"tools": "*", "prefix": "srv_"})})
	for _, name := range []string{"srv_echo", "srv_add", "srv_fail", "srv_pid"} {
		if _, ok := r.Lookup(name); !ok {
			t.Fatalf("%s not registered: %v", name, r.Names())
		}
	}
	out, err := r.Call(context.Background(), "srv_add", json.RawMessage(`{"a":2,"b":40}`))
	if err != nil || string(out) != `{"sum":42}` {
		t.Fatalf("srv_add: %s %v", out, err)
	}
}

// TestMCPRestart: the server starts at the first call, not at the
// load; killed, it is started again at a later call; the registry's Close
// (the node's path) closes the Loader, which stops and reaps it, and the
// Loader's own Close then says net.ErrClosed.
func TestMCPRestart(t *testing.T) {
	r, l := mcpTestSkills(t, map[string]any{"name": "pid", "handler": mcpTestHandler(map[string]any{"tool": "pid"})})
	pidOf := func() int {
		t.Helper()
		out, err := r.Call(context.Background(), "pid", json.RawMessage(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		var res struct{ Text string }
		_ = json.Unmarshal(out, &res)
		pid, err := strconv.Atoi(res.Text)
		if err != nil {
			t.Fatalf("pid answer %s", out)
		}
		return pid
	}
	first := pidOf()
	if again := pidOf(); again != first {
		t.Fatalf("a second call started another server: %d, %d", first, again)
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var second int
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := r.Call(context.Background(), "pid", json.RawMessage(`{}`))
		if err == nil {
			var res struct{ Text string }
			_ = json.Unmarshal(out, &res)
			second, _ = strconv.Atoi(res.Text)
			break
		}
		if codeOf(err) != protocol.CodeToolExecution || time.Now().After(deadline) {
			t.Fatalf("after the kill: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if second == first || second == 0 {
		t.Fatalf("not restarted: %d then %d", first, second)
	}
	if err := r.Close(); err != nil { // the node's path: registry → Loader → servers
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the Loader's Close after the registry's: %v; want net.ErrClosed", err)
	}
	// Gone within the transport's grace before it kills: exited (waitExit
	// wakes at the exit) and reaped, not left a zombie (kill(pid, 0) still
	// finds one). Nothing announces the reap to a process that is not the
	// parent, hence the bounded look after the exit.
	grace := time.Now().Add(3 * time.Second)
	if !waitExit(second, 3*time.Second) {
		t.Fatalf("the server %d still runs after Close", second)
	}
	for syscall.Kill(second, 0) != syscall.ESRCH {
		if time.Now().After(grace) {
			t.Fatalf("the server %d exited but was not reaped after Close", second)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := r.Call(context.Background(), "pid", json.RawMessage(`{}`)); err == nil {
		t.Fatal("a call after Close ran")
	}
}

// TestMCPLoadErrors: a server that does not start, a tool it lacks,
// and a prefix that makes bad names fail the load, naming the skill.
func TestMCPLoadErrors(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("command MCP servers need Linux")
	}
	for _, c := range []struct {
		name   string
		skill  map[string]any
		reason string
	}{
		{"no such tool", map[string]any{"name": "x", "handler": mcpTestHandler(map[string]any{"tool": "nope"})}, `handler.tool: the server has no tool "nope" (it has: add, echo, fail, pid)`},
		{"not an MCP server", map[string]any{"name": "x", "handler": map[string]any{"type": "mcp", "command": []string{"/bin/true"}, "tool": "t"}}, `the MCP server /bin/true: did not start`},
		{"unreachable URL", map[string]any{"name": "x", "handler": map[string]any{"type": "mcp", "url": "http://127.0.0.1:1/mcp", "tool": "t", "timeout_s": 5}}, `the MCP server http://127.0.0.1:1/mcp: did not start`},
		{"schema with all tools", map[string]any{"name": "x", "input_schema": map[string]any{"type": "object"}, "handler": mcpTestHandler(map[string]any{"tools": "*"})}, `input_schema: goes with one "tool"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadInto(t, newTestRegistry(t), writeFile(t, c.skill))
			if err == nil || !strings.Contains(err.Error(), c.reason) || !strings.Contains(err.Error(), `skill "x"`) {
				t.Fatalf("err = %v, want %q", err, c.reason)
			}
		})
	}
}

func codeOf(err error) int {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return 0
}
