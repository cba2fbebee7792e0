package custom

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/http/httpguts"

	"github.com/mcpv2/mcpv2/protocol"
)

// A handler of type "mcp" forwards a skill to a tool of a local MCP server,
// so that an agent can share, say, a filesystem MCP server with the mesh:
//
//	{"type": "mcp", "command": ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"],
//	 "tool": "read_text_file"}
//	{"type": "mcp", "url": "http://127.0.0.1:3001/mcp", "headers"?: {...}, "tools": "*", "prefix"?: "docs_"}
//
// "tool" makes the skill that tool; "tools": "*" makes one skill of each of
// the server's tools, named prefix + the tool's name (prefix defaults to the
// skill's name and "_"). The skills carry the tools' own input schemas
// (unless the file gives input_schema, for a "tool") and descriptions. The
// load starts the server once to read its tools and stops it; the first call
// starts it again, and it then runs until the Loader is closed (when the
// node stops). A server that exits is started again at the next call, after
// a pause that doubles with each exit in a row (from 250 ms to 30 s). The
// skills of a Loader that name the same command (with the same env) or URL share one server.
//
// A command runs as the node's user (not --run-as), in the system temp
// directory, with PATH, HOME and the file's env only, in a process group of
// its own that dies with the node; its stderr goes to the node's log at
// Debug. Command servers need Linux, as command handlers do.

type mcpJSON struct {
	Type     string            `json:"type"`
	Command  []string          `json:"command"`
	URL      string            `json:"url"`
	Env      map[string]string `json:"env"`
	Headers  map[string]string `json:"headers"`
	Tool     string            `json:"tool"`
	Tools    string            `json:"tools"`
	Prefix   *string           `json:"prefix"`
	TimeoutS *float64          `json:"timeout_s"`
}

// mcpHandler is a parsed "mcp" handler: which server, and which of its tools.
// ResolveMCP turns it into skills once the server has told its tools.
type mcpHandler struct {
	srv    *mcpServer
	tool   string // one tool; "" with all
	all    bool
	prefix string
}

// Backoff of a server that exits, doubling with each exit in a row.
const (
	mcpMinBackoff = 250 * time.Millisecond
	mcpMaxBackoff = 30 * time.Second
)

func newMCP(name string, raw json.RawMessage, l *Loader, baseDir string) (*mcpHandler, error) {
	var mj mcpJSON
	if err := decodeStrict(raw, &mj); err != nil {
		return nil, jsonError(raw, err)
	}
	m := &mcpHandler{tool: mj.Tool}
	switch {
	case mj.Tool == "" && mj.Tools == "":
		return nil, fieldf("tool", `missing (name one tool of the server, or "tools": "*" for all of them)`)
	case mj.Tool != "" && mj.Tools != "":
		return nil, fieldf("tools", `give "tool" or "tools", not both`)
	case mj.Tools != "" && mj.Tools != "*":
		return nil, fieldf("tools", `%q: the only value is "*" (every tool of the server)`, mj.Tools)
	case mj.Tools == "*":
		m.all, m.prefix = true, name+"_"
		if mj.Prefix != nil {
			m.prefix = *mj.Prefix
		}
		if m.prefix != "" && !nameRE.MatchString(m.prefix) {
			return nil, fieldf("prefix", "%q must match %s", m.prefix, nameRE)
		}
	case mj.Prefix != nil:
		return nil, fieldf("prefix", `goes with "tools": "*"`)
	}
	timeout, err := parseTimeout(mj.TimeoutS)
	if err != nil {
		return nil, err
	}
	s := &mcpServer{timeout: timeout, log: l.cfg.log}
	switch {
	case (len(mj.Command) == 0) == (mj.URL == ""):
		return nil, fieldf("command", `give "command" (a local server on stdio) or "url" (streamable HTTP), one of them`)
	case mj.URL != "":
		if len(mj.Env) > 0 {
			return nil, fieldf("env", `goes with "command"`)
		}
		if s.url, s.header, err = mcpURL(mj.URL, mj.Headers); err != nil {
			return nil, err
		}
		s.key, s.label = "url "+s.url, mj.URL
	default:
		if len(mj.Headers) > 0 {
			return nil, fieldf("headers", `go with "url"`)
		}
		if err := commandSupported(); err != nil {
			return nil, fieldf("command", "%w", err)
		}
		if len(mj.Command) > maxArgv || mj.Command[0] == "" {
			return nil, fieldf("command", "want [\"program\", \"arg\", ...], at most %d", maxArgv)
		}
		for i, a := range mj.Command {
			if strings.IndexByte(a, 0) >= 0 {
				return nil, fieldf(fmt.Sprintf("command[%d]", i), "contains a NUL byte")
			}
		}
		if s.path, err = lookPath(mj.Command[0], baseDir); err != nil {
			return nil, fieldf("command[0]", "%w", err)
		}
		s.argv = mj.Command
		if s.env, err = mcpEnv(mj.Env); err != nil {
			return nil, err
		}
		s.key, s.label = "command "+strings.Join(append(append([]string{s.path}, s.argv[1:]...), s.env...), "\x00"), strings.Join(mj.Command, " ")
	}
	// The skills that name the same server share it.
	if s, err = l.addServer(s); err != nil {
		return nil, err
	}
	m.srv = s
	return m, nil
}

// mcpURL checks a server URL and its headers as the http handler does.
func mcpURL(raw string, headers map[string]string) (string, http.Header, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", nil, fieldf("url", "%w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", nil, fieldf("url", "scheme %q is not allowed (want http or https)", u.Scheme)
	case u.Host == "":
		return "", nil, fieldf("url", "no host")
	case u.User != nil:
		return "", nil, fieldf("url", "credentials in the URL are not allowed (use headers with ${ENV:NAME})")
	}
	h := http.Header{}
	for k, v := range headers {
		if !httpguts.ValidHeaderFieldName(k) {
			return "", nil, fieldf("headers", "%q is not a valid header name", k)
		}
		val, err := expandEnv(v)
		if err != nil {
			return "", nil, fieldf("headers."+k, "%w", err)
		}
		if !httpguts.ValidHeaderFieldValue(val) {
			return "", nil, fieldf("headers."+k, "not a valid header value")
		}
		h.Set(k, val)
	}
	return u.String(), h, nil
}

// mcpEnv is a command server's environment: PATH and HOME of the
// node, then the file's env (${ENV:NAME} expanded), sorted.
func mcpEnv(extra map[string]string) ([]string, error) {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range extra {
		kv, err := envEntry(k, v)
		if err != nil {
			return nil, err
		}
		if k == "PATH" || k == "HOME" {
			env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") })
		}
		env = append(env, kv)
	}
	sort.Strings(env)
	return env, nil
}

// ResolveMCP asks each MCP server that the skills name for its tools
// (starting it, and stopping it again) and returns the skills with every
// "mcp" skill made concrete: its schema and description from the tool, or
// one skill per tool for "tools": "*". The other skills pass unchanged.
// The servers stay the Loader's that parsed the skills, which stops them
// when it is closed. A server that does not start, or lacks a named tool, fails it
// all, naming the skill. ctx bounds the whole.
func ResolveMCP(ctx context.Context, in []Skill) ([]Skill, error) {
	tools := map[*mcpServer][]*mcp.Tool{}
	var out []Skill
	for _, s := range in {
		if s.mcp == nil {
			out = append(out, s)
			continue
		}
		srv := s.mcp.srv
		list, ok := tools[srv]
		if !ok {
			var err error
			if list, err = srv.listTools(ctx); err != nil {
				return nil, fmt.Errorf("skill %q: handler: the MCP server %s: %w", s.Descriptor.Name, srv.label, err)
			}
			tools[srv] = list
		}
		made, err := s.mcp.concrete(s, list)
		if err != nil {
			return nil, fmt.Errorf("skill %q: handler.%w", s.Descriptor.Name, err)
		}
		out = append(out, made...)
	}
	return out, nil
}

// concrete makes the concrete skills of one "mcp" skill from its server's
// tools.
func (m *mcpHandler) concrete(s Skill, tools []*mcp.Tool) ([]Skill, error) {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	make1 := func(name string, t *mcp.Tool, fileSchema bool) (Skill, error) {
		c := s
		c.mcp = nil
		c.Descriptor.Name = name
		c.Descriptor.Tags = append(slices.Clone(s.Descriptor.Tags), "mcp")
		if c.Descriptor.Description == "" || m.all {
			c.Descriptor.Description = t.Description
		}
		if !fileSchema {
			raw, err := json.Marshal(t.InputSchema)
			if err != nil {
				return c, err
			}
			if c.Descriptor.InputSchema, err = inputSchema(raw); err != nil {
				return c, fmt.Errorf("the tool %q has an input schema this node cannot use: %w", t.Name, err)
			}
		}
		var err error
		if c.Guard, err = guardPlan(s.guardRaw, name, c.Descriptor.Tags, c.Descriptor.InputSchema); err != nil {
			return c, err
		}
		srv, tool := m.srv, t.Name
		c.Handler = func(ctx context.Context, args json.RawMessage) (any, error) { return srv.call(ctx, name, tool, args) }
		return c, nil
	}
	if !m.all {
		i := slices.Index(names, m.tool)
		if i < 0 {
			return nil, fieldf("tool", "the server has no tool %q (it has: %s)", m.tool, strings.Join(names, ", "))
		}
		c, err := make1(s.Descriptor.Name, tools[i], s.fileSchema)
		if err != nil {
			return nil, fieldf("tool", "%w", err)
		}
		return []Skill{c}, nil
	}
	// With every tool of a server, one that this node cannot serve (a name
	// that is no skill name, a schema it cannot compile) is left out with a
	// warning rather than failing the others.
	out := make([]Skill, 0, len(tools))
	for _, t := range tools {
		name := m.prefix + t.Name
		if !nameRE.MatchString(name) {
			m.srv.log.Warn("custom mcp: a tool is left out: its skill name would not match "+nameRE.String(), "skill", s.Descriptor.Name, "tool", t.Name)
			continue
		}
		c, err := make1(name, t, false)
		if err != nil {
			m.srv.log.Warn("custom mcp: a tool is left out", "skill", s.Descriptor.Name, "tool", t.Name, "err", err)
			continue
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fieldf("tools", "none of the server's %d tools can be served (see the log)", len(tools))
	}
	if len(out) > MaxSkills {
		return nil, fieldf("tools", "the server has %d tools, more than the %d skills a file may make", len(out), MaxSkills)
	}
	return out, nil
}

// mcpServer is one local MCP server: started on demand, restarted after it
// exits, stopped by Close. mu guards the fields below it; a start holds mu,
// so calls wait for it rather than start a second process.
type mcpServer struct {
	key, label string
	path       string // command: the program, absolute
	argv       []string
	env        []string
	url        string
	header     http.Header
	timeout    time.Duration
	log        *slog.Logger

	mu      sync.Mutex
	conn    *mcpConn // nil: not running
	exits   int      // exits in a row, for the backoff
	retryAt time.Time
	closed  bool
	wg      sync.WaitGroup // the goroutine that waits for the running server
}

// mcpConn is a running server: its session and, for a command, its
// process.
type mcpConn struct {
	cs  *mcp.ClientSession
	cmd *exec.Cmd // nil for a URL
}

// connect starts the server and initializes an MCP session with it.
func (s *mcpServer) connect(ctx context.Context) (*mcpConn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var t mcp.Transport
	var cmd *exec.Cmd
	if s.url != "" {
		hc := &http.Client{Transport: headerTransport{h: s.header, rt: http.DefaultTransport}}
		t = &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: hc, MaxRetries: -1}
	} else {
		cmd = exec.Command(s.path, s.argv[1:]...)
		cmd.Args[0] = s.argv[0]
		cmd.Env, cmd.Dir = s.env, os.TempDir()
		cmd.Stderr = &mcpStderr{log: s.log, server: s.label}
		mcpPrepareCommand(cmd)
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpv2", Version: "1"}, nil)
	cs, err := c.Connect(ctx, t, nil)
	if err != nil {
		if cmd != nil && cmd.Process != nil {
			_ = killGroup(cmd.Process.Pid)
		}
		return nil, fmt.Errorf("did not start: %v", clipErr(err))
	}
	return &mcpConn{cs: cs, cmd: cmd}, nil
}

// listTools starts the server, reads all its tools and stops it.
func (s *mcpServer) listTools(ctx context.Context) ([]*mcp.Tool, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var tools []*mcp.Tool
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("tools/list: %v", clipErr(err))
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// stop ends the session (for a command: closes its stdin, and after a
// grace kills it) and then whatever its process group left behind.
func (c *mcpConn) stop() {
	_ = c.cs.Close()
	if c.cmd != nil && c.cmd.Process != nil {
		_ = killGroup(c.cmd.Process.Pid)
	}
}

// session returns the running server's session, starting it when it is
// not running and its backoff has passed.
func (s *mcpServer) session(ctx context.Context, skill string) (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, protocol.Errorf(protocol.CodeToolExecution, "mcp skill %q: the node is stopping", skill)
	case s.conn != nil:
		return s.conn.cs, nil
	case time.Now().Before(s.retryAt):
		return nil, protocol.Errorf(protocol.CodeToolExecution, "mcp skill %q: the MCP server %s exited; it is started again in %s",
			skill, s.label, time.Until(s.retryAt).Round(time.Millisecond))
	}
	c, err := s.connect(ctx)
	if err != nil {
		s.exited()
		s.log.Warn("custom mcp server did not start", "skill", skill, "server", s.label, "err", err)
		return nil, protocol.Errorf(protocol.CodeToolExecution, "mcp skill %q: the MCP server %s %v", skill, s.label, err)
	}
	s.conn = c
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := c.cs.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.conn == c { // not stopped by Close
			s.conn = nil
			if c.cmd != nil && c.cmd.Process != nil {
				_ = killGroup(c.cmd.Process.Pid)
			}
			s.exited()
			s.log.Warn("custom mcp server exited; it is started again at the next call", "server", s.label, "err", err, "backoff", time.Until(s.retryAt).Round(time.Millisecond))
		}
	}()
	return c.cs, nil
}

// exited counts an exit or a failed start and sets the backoff; s.mu is
// held.
func (s *mcpServer) exited() {
	s.exits++
	d := mcpMinBackoff << min(s.exits-1, 8)
	s.retryAt = time.Now().Add(min(d, mcpMaxBackoff))
}

// call runs tool with args on the server, for the skill named skill.
func (s *mcpServer) call(ctx context.Context, skill, tool string, args json.RawMessage) (any, error) {
	cs, err := s.session(ctx, skill)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if cctx.Err() != nil {
			return nil, protocol.Errorf(protocol.CodeToolExecution, "mcp skill %q: the tool %q did not answer within %s", skill, tool, s.timeout)
		}
		return nil, protocol.Errorf(protocol.CodeToolExecution, "mcp skill %q: the MCP server %s failed: %v", skill, s.label, clipErr(err))
	}
	s.mu.Lock()
	s.exits = 0 // it answered: the next exit starts the backoff over
	s.mu.Unlock()
	text := mcpText(res.Content)
	if res.IsError {
		return nil, protocol.Errorf(protocol.CodeToolExecution, "mcp skill %q: the tool %q failed: %s", skill, tool, protocol.Clip(text, 1000))
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
			return json.RawMessage(b), nil
		}
	}
	content, err := json.Marshal(res.Content)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeToolExecution, "mcp skill %q: the tool's answer could not be encoded", skill)
	}
	return map[string]any{"text": text, "content": json.RawMessage(content)}, nil
}

// Close stops the server, when it runs, and waits for it.
func (s *mcpServer) Close() error {
	s.mu.Lock()
	s.closed = true
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	if c != nil {
		c.stop()
	}
	s.wg.Wait()
	return nil
}

// mcpText joins the text of a tool result's text contents.
func mcpText(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// mcpStderr logs a command server's stderr at Debug, a line at most 512
// bytes.
type mcpStderr struct {
	log    *slog.Logger
	server string
}

// Write logs each non-empty line of p; it never fails.
func (w *mcpStderr) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if line != "" {
			w.log.Debug("custom mcp server stderr", "server", w.server, "line", protocol.Clip(line, 512))
		}
	}
	return len(p), nil
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	h  http.Header
	rt http.RoundTripper
}

// RoundTrip sends a copy of r with the fixed headers set.
func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.h {
			r.Header[k] = v
		}
	}
	return t.rt.RoundTrip(r)
}

func clipErr(err error) string {
	if err == nil {
		return ""
	}
	return protocol.Clip(err.Error(), 300)
}
