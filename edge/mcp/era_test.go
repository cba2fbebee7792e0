package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mcpv2/mcpv2/edge/mcp"
	"github.com/mcpv2/mcpv2/protocol"
)

// rpcAnswer is one JSON-RPC answer as it came off the wire.
type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// wire sends one raw JSON-RPC request of an era and returns the answer
// as sent; name is the Mcp-Name value a 2026-07-28 client sends ("" for
// the methods that have none).
type wire func(t *testing.T, id int, method, name string, params map[string]any) rpcAnswer

// eraParams adds to params the _meta a 2026-07-28 request carries.
func eraParams(era string, params map[string]any) map[string]any {
	if params == nil {
		params = map[string]any{}
	}
	if era >= eraStateless {
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    era,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "era-test", "version": "1"},
		}
	}
	return params
}

func rpcBody(id int, method string, params map[string]any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return string(b)
}

// decodeAnswer reads a JSON answer or the data line of an SSE one.
func decodeAnswer(t *testing.T, body string) rpcAnswer {
	t.Helper()
	if i := strings.Index(body, "data: "); i >= 0 && !strings.HasPrefix(strings.TrimSpace(body), "{") {
		body = body[i+len("data: "):]
		if j := strings.IndexByte(body, '\n'); j >= 0 {
			body = body[:j]
		}
	}
	var a rpcAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("answer %q: %v", protocol.Clip(body, 300), err)
	}
	return a
}

// httpWire speaks era to url as the caller of token, with the headers a
// client of that era sends; a 2025-11-25 client initializes a session
// first.
func httpWire(t *testing.T, url, token, era string) wire {
	t.Helper()
	hdr := map[string]string{"Authorization": "Bearer " + token, "MCP-Protocol-Version": era}
	if era < eraStateless {
		status, h, body := post(t, url, hdr, initBody)
		if status != http.StatusOK || h.Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize: %d %s", status, body)
		}
		hdr["Mcp-Session-Id"] = h.Get("Mcp-Session-Id")
		if status, _, body := post(t, url, hdr, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
			t.Fatalf("initialized: %d %s", status, body)
		}
	}
	return func(t *testing.T, id int, method, name string, params map[string]any) rpcAnswer {
		t.Helper()
		h := map[string]string{"Mcp-Method": method}
		if name != "" {
			h["Mcp-Name"] = name
		}
		for k, v := range hdr {
			h[k] = v
		}
		status, _, body := post(t, url, h, rpcBody(id, method, eraParams(era, params)))
		a := decodeAnswer(t, body)
		if status != http.StatusOK && a.Error == nil {
			t.Fatalf("%s: HTTP %d %s", method, status, body)
		}
		return a
	}
}

// stdioWire serves the face on pipes (ServeStdio, as mcpv2 mcp does) and
// speaks era on them as the node's owner; a 2025-11-25 client initializes
// first.
func stdioWire(t *testing.T, f *mcp.Face, era string) wire {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = f.ServeStdio(ctx, protocol.Caller{ID: "local:stdio", Via: "mcp", Remote: "stdio", Kind: protocol.CallerSecretHolder}, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		outR.Close()
		wg.Wait()
	})
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 16<<20)
	var mu sync.Mutex
	send := func(t *testing.T, id int, msg string) rpcAnswer {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		if id == 0 {
			return rpcAnswer{}
		}
		for lines.Scan() {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(lines.Bytes(), &m) == nil && string(m.ID) == fmt.Sprint(id) {
				return decodeAnswer(t, lines.Text())
			}
		}
		t.Fatalf("stdio ended before the answer to %d: %v", id, lines.Err())
		return rpcAnswer{}
	}
	if era < eraStateless {
		if a := send(t, 1000, rpcBody(1000, "initialize", map[string]any{"protocolVersion": era, "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "era-test", "version": "1"}})); a.Error != nil {
			t.Fatalf("initialize: %+v", a.Error)
		}
		send(t, 0, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	return func(t *testing.T, id int, method, _ string, params map[string]any) rpcAnswer {
		t.Helper()
		return send(t, id, rpcBody(id, method, eraParams(era, params)))
	}
}

// cacheCase is one method of the walk and the cacheScope its result must
// carry ("" for a result that has no such field).
type cacheCase struct {
	method, name string
	params       map[string]any
	scope        string
}

// cacheCases are every method the face answers, with the scope of the
// cacheable ones: private where the answer depends on the caller's grants.
func cacheCases() []cacheCase {
	return []cacheCase{
		{method: "server/discover", scope: "public"},
		{method: "ping"},
		{method: "tools/list", scope: "public"},
		{method: "tools/call", name: "ping", params: map[string]any{"name": "ping", "arguments": map[string]any{}}},
		{method: "resources/list", scope: "private"},
		{method: "resources/templates/list", scope: "public"},
		{method: "resources/read", name: mcp.CardURI, params: map[string]any{"uri": mcp.CardURI}, scope: "public"},
		{method: "resources/read", name: mcp.FilesURI, params: map[string]any{"uri": mcp.FilesURI}, scope: "private"},
		{method: "resources/read", name: mcp.FilesURI + "/era.txt", params: map[string]any{"uri": mcp.FilesURI + "/era.txt"}, scope: "private"},
		{method: "prompts/list", scope: "public"},
		{method: "prompts/get", name: "summarize", params: map[string]any{"name": "summarize", "arguments": map[string]any{"content": "x"}}},
		{method: "completion/complete", params: map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "analyze"},
			"argument": map[string]any{"name": "focus", "value": "s"}}},
		{method: "logging/setLevel", params: map[string]any{"level": "info"}},
	}
}

// walkCacheScopes sends every method of cacheCases on w and checks that
// each result that carries cacheScope carries the right valid value, and
// that in 2026-07-28 each result says it is complete (resultType).
func walkCacheScopes(t *testing.T, w wire, era string) {
	for i, c := range cacheCases() {
		if c.method == "server/discover" && era < eraStateless {
			continue // not a method of the handshake era
		}
		a := w(t, i+1, c.method, c.name, c.params)
		if a.Error != nil {
			if c.scope != "" {
				t.Errorf("%s %s: error %d %s", c.method, c.name, a.Error.Code, a.Error.Message)
			}
			continue // a method the face does not offer has no result
		}
		var res map[string]json.RawMessage
		if err := json.Unmarshal(a.Result, &res); err != nil {
			t.Fatalf("%s: result %s: %v", c.method, a.Result, err)
		}
		if rt, has := res["resultType"]; era >= eraStateless && len(res) > 0 && (!has || string(rt) != `"complete"`) {
			t.Errorf("%s %s: resultType %s, want \"complete\" in %s", c.method, c.name, rt, protocol.Clip(string(a.Result), 200))
		}
		raw, has := res["cacheScope"]
		var scope string
		_ = json.Unmarshal(raw, &scope)
		switch {
		case c.scope != "" && !has:
			t.Errorf("%s %s: no cacheScope in %s", c.method, c.name, protocol.Clip(string(a.Result), 200))
		case has && scope != "public" && scope != "private":
			t.Errorf("%s %s: cacheScope %s, want public or private", c.method, c.name, raw)
		case c.scope != "" && scope != c.scope:
			t.Errorf("%s %s: cacheScope %q, want %q", c.method, c.name, scope, c.scope)
		}
	}
}

// TestEraEveryMethod walks every method of the face over HTTP (the node's
// face and a mesh peer's) and stdio, in both eras: a result that carries
// cacheScope carries public or private (an empty one fails MCP Inspector
// 2.12.0), private where it depends on the caller; and in 2026-07-28
// every result carries resultType "complete" (tools/call had none, which
// the inspector refuses too).
func TestEraEveryMethod(t *testing.T) {
	r := newRig(t, nil)
	if _, err := r.a.Store().Files().Write("era.txt", strings.NewReader("era")); err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		t.Run("http "+era, func(t *testing.T) {
			walkCacheScopes(t, httpWire(t, r.url, r.secretToken(), era), era)
		})
		t.Run("anonymous http "+era, func(t *testing.T) {
			w := httpWire(t, r.url, r.anonToken(t), era)
			for i, c := range cacheCases() {
				if strings.HasSuffix(c.method, "/list") {
					if a := w(t, i+1, c.method, c.name, c.params); a.Error != nil || !strings.Contains(string(a.Result), `"cacheScope":"`+c.scope+`"`) {
						t.Errorf("%s: %s %+v", c.method, protocol.Clip(string(a.Result), 200), a.Error)
					}
				}
			}
		})
		t.Run("stdio "+era, func(t *testing.T) {
			walkCacheScopes(t, stdioWire(t, r.face, era), era)
		})
		t.Run("peer http "+era, func(t *testing.T) {
			peerURL := strings.TrimSuffix(r.url, mcp.Path) + "/peers/" + r.b.ID().String() + "/mcp"
			w := httpWire(t, peerURL, r.secretToken(), era)
			for i, c := range cacheCases() {
				if strings.HasSuffix(c.method, "/list") {
					if a := w(t, i+1, c.method, c.name, c.params); a.Error != nil || !strings.Contains(string(a.Result), `"cacheScope":"`+c.scope+`"`) {
						t.Errorf("%s: %s %+v", c.method, protocol.Clip(string(a.Result), 200), a.Error)
					}
				}
			}
		})
	}
}

// TestStandardHeaders: in MCP 2026-07-28 a request names its method in
// Mcp-Method and, for tools/call, resources/read and prompts/get, its
// target in Mcp-Name; the face (the go-sdk's transport, before any
// method runs) refuses one whose headers are missing or disagree with
// the body with HTTP 400 and a JSON-RPC error (-32020) naming the header
// and both values, so that what a gateway routed on is what runs. The
// 2025-11-25 era has no such headers and is unaffected.
func TestStandardHeaders(t *testing.T) {
	r := newRig(t, nil)
	if _, err := r.a.Store().Files().Write("hdr.txt", strings.NewReader("hdr")); err != nil {
		t.Fatal(err)
	}
	tok := r.secretToken()
	peerURL := strings.TrimSuffix(r.url, mcp.Path) + "/peers/" + r.b.ID().String() + "/mcp"
	upload := map[string]any{"name": "upload_file", "arguments": map[string]any{"filename": "smuggled.txt", "content": "x"}}
	send := func(t *testing.T, url, era string, hdr map[string]string, method string, params map[string]any) (int, rpcAnswer) {
		t.Helper()
		h := map[string]string{"Authorization": "Bearer " + tok, "MCP-Protocol-Version": era}
		for k, v := range hdr {
			h[k] = v
		}
		status, _, body := post(t, url, h, rpcBody(7, method, eraParams(era, params)))
		return status, decodeAnswer(t, body)
	}
	named := []struct {
		method, name string
		params       map[string]any
	}{
		{"tools/call", "ping", map[string]any{"name": "ping", "arguments": map[string]any{}}},
		{"resources/read", mcp.FilesURI + "/hdr.txt", map[string]any{"uri": mcp.FilesURI + "/hdr.txt"}},
		{"prompts/get", "summarize", map[string]any{"name": "summarize", "arguments": map[string]any{"content": "x"}}},
	}

	t.Run("match", func(t *testing.T) {
		for _, url := range []string{r.url, peerURL} {
			for _, c := range named {
				if url == peerURL && c.method == "resources/read" {
					continue // the file is A's
				}
				status, a := send(t, url, eraStateless, map[string]string{"Mcp-Method": c.method, "Mcp-Name": c.name}, c.method, c.params)
				if status != http.StatusOK || a.Error != nil || len(a.Result) == 0 {
					t.Errorf("%s %s %s: %d %+v", url, c.method, c.name, status, a.Error)
				}
			}
			if status, a := send(t, url, eraStateless, map[string]string{"Mcp-Method": "tools/list"}, "tools/list", nil); status != http.StatusOK || a.Error != nil {
				t.Errorf("%s tools/list: %d %+v", url, status, a.Error)
			}
		}
	})

	refused := func(t *testing.T, what string, status int, a rpcAnswer, want ...string) {
		t.Helper()
		if status != http.StatusBadRequest || a.Error == nil || a.Error.Code != -32020 {
			t.Fatalf("%s: %d %+v, want 400 and -32020", what, status, a.Error)
		}
		for _, w := range want {
			if !strings.Contains(a.Error.Message, w) {
				t.Errorf("%s: %q does not name %q", what, a.Error.Message, w)
			}
		}
	}

	t.Run("Mcp-Method missing", func(t *testing.T) {
		status, a := send(t, r.url, eraStateless, nil, "tools/list", nil)
		refused(t, "no Mcp-Method", status, a, "Mcp-Method")
	})

	t.Run("Mcp-Method mismatch", func(t *testing.T) {
		// A gateway that lets tools/list through must not run an upload.
		status, a := send(t, r.url, eraStateless, map[string]string{"Mcp-Method": "tools/list", "Mcp-Name": "upload_file"}, "tools/call", upload)
		refused(t, "Mcp-Method tools/list, body tools/call", status, a, "Mcp-Method", "'tools/list'", "'tools/call'")
		if _, _, err := r.a.Store().Files().Open("smuggled.txt"); err == nil {
			t.Fatal("the refused call ran")
		}
		status, a = send(t, peerURL, eraStateless, map[string]string{"Mcp-Method": "ping"}, "tools/list", nil)
		refused(t, "a peer's face", status, a, "Mcp-Method", "'ping'", "'tools/list'")
	})

	for _, c := range named {
		t.Run("Mcp-Name missing "+c.method, func(t *testing.T) {
			status, a := send(t, r.url, eraStateless, map[string]string{"Mcp-Method": c.method}, c.method, c.params)
			refused(t, c.method+" without Mcp-Name", status, a, "Mcp-Name", c.method)
		})
		t.Run("Mcp-Name mismatch "+c.method, func(t *testing.T) {
			status, a := send(t, r.url, eraStateless, map[string]string{"Mcp-Method": c.method, "Mcp-Name": "other"}, c.method, c.params)
			refused(t, c.method+" Mcp-Name other", status, a, "Mcp-Name", "'other'", "'"+c.name+"'")
		})
	}
	t.Run("Mcp-Name mismatch runs nothing", func(t *testing.T) {
		status, a := send(t, r.url, eraStateless, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "ping"}, "tools/call", upload)
		refused(t, "Mcp-Name ping, body upload_file", status, a, "'ping'", "'upload_file'")
		if _, _, err := r.a.Store().Files().Open("smuggled.txt"); err == nil {
			t.Fatal("the refused call ran")
		}
	})

	t.Run("2025-11-25 unaffected", func(t *testing.T) {
		status, h, body := post(t, r.url, map[string]string{"Authorization": "Bearer " + tok}, initBody)
		if status != http.StatusOK {
			t.Fatalf("initialize: %d %s", status, body)
		}
		hdr := map[string]string{"Authorization": "Bearer " + tok, "Mcp-Session-Id": h.Get("Mcp-Session-Id"),
			"Mcp-Method": "tools/list", "Mcp-Name": "nonsense"}
		post(t, r.url, hdr, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		status, _, body = post(t, r.url, hdr, rpcBody(8, "tools/call", map[string]any{"name": "ping", "arguments": map[string]any{}}))
		if a := decodeAnswer(t, body); status != http.StatusOK || a.Error != nil || !strings.Contains(string(a.Result), "pong") {
			t.Fatalf("a 2025-11-25 call with headers of no meaning there: %d %s", status, body)
		}
	})

	// Each refusal is audited, as the go-sdk's transport answered it.
	var audited int
	for _, l := range auditLines(t, r.a) {
		if l["outcome"] == "error" && l["method"] == "http POST "+mcp.Path {
			audited++
		}
	}
	if audited < 2+2*len(named) {
		t.Errorf("%d refusals audited, want each", audited)
	}
}
