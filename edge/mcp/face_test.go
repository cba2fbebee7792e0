package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/edge/mcp"
	"github.com/mcpv2/mcpv2/node/skills"
)

// callTool runs a tool and decodes its structured content.
func callTool(t *testing.T, cs *sdk.ClientSession, name string, args any) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: protocol error %v (a skill's failure must be an isError result)", name, err)
	}
	var sc map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &sc)
	}
	return res, sc
}

func errCode(sc map[string]any) int {
	e, _ := sc["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return int(c)
}

// TestFaceHTTPBothEras drives the face over streamable HTTP with the go-sdk
// client in each era, as a secret holder: every skill is a tool with its
// schema, calls succeed, a bad argument and a failing skill are isError
// results, files are resources, prompts render, and mesh_call reaches the
// second node.
func TestFaceHTTPBothEras(t *testing.T) {
	r := newRig(t, nil)
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs := connect(t, r.url, r.secretToken(), era, nil)

			lt, err := cs.ListTools(ctxT(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range lt.Tools {
				names = append(names, tool.Name)
				if tool.InputSchema == nil {
					t.Errorf("tool %s has no input schema", tool.Name)
				}
			}
			for _, want := range append(slices.Clone(skills.StandardNames), mcp.ToolMeshFind, mcp.ToolMeshCall) {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list lacks %s: %v", want, names)
				}
			}
			// The schema is the skill's own: upload_file's encoding enum.
			for _, tool := range lt.Tools {
				if tool.Name == "upload_file" {
					b, _ := json.Marshal(tool.InputSchema)
					if !strings.Contains(string(b), `"base64"`) || !strings.Contains(string(b), `"filename"`) {
						t.Errorf("upload_file schema is not the skill's: %s", b)
					}
				}
			}

			res, sc := callTool(t, cs, "ping", map[string]any{"payload": "hi"})
			if res.IsError || sc["payload"] != "hi" {
				t.Fatalf("ping: %+v %v", res, sc)
			}
			if tc, ok := res.Content[0].(*sdk.TextContent); !ok || !strings.Contains(tc.Text, `"payload":"hi"`) {
				t.Errorf("ping text content: %+v", res.Content)
			}
			res, sc = callTool(t, cs, "ask", map[string]any{"query": "what is 2+2?"})
			if res.IsError {
				t.Fatalf("ask: %+v", sc)
			}
			// A bad argument: the skill's schema refuses it, as a result.
			res, sc = callTool(t, cs, "upload_file", map[string]any{"filename": 7})
			if !res.IsError || errCode(sc) != -32602 {
				t.Fatalf("bad argument: isError=%v sc=%v", res.IsError, sc)
			}
			res, sc = callTool(t, cs, "no_such_skill", map[string]any{})
			if !res.IsError || errCode(sc) != -32002 {
				t.Fatalf("unknown skill: isError=%v sc=%v", res.IsError, sc)
			}

			name := "notes-" + era + ".txt"
			if res, sc = callTool(t, cs, "upload_file", map[string]any{"filename": name, "content": "hello from " + era}); res.IsError {
				t.Fatalf("upload: %v", sc)
			}
			lr, err := cs.ListResources(ctxT(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			var found *sdk.Resource
			for _, res := range lr.Resources {
				if res.URI == mcp.FilesURI+"/"+name {
					found = res
				}
			}
			if found == nil || found.Size != int64(len("hello from "+era)) || !strings.HasPrefix(found.MIMEType, "text/plain") {
				t.Fatalf("resources/list: file %s: %+v in %d resources", name, found, len(lr.Resources))
			}
			rr, err := cs.ReadResource(ctxT(t), &sdk.ReadResourceParams{URI: found.URI})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "hello from "+era {
				t.Fatalf("resources/read: %v %+v", err, rr)
			}
			rr, err = cs.ReadResource(ctxT(t), &sdk.ReadResourceParams{URI: mcp.CardURI})
			if err != nil || !strings.Contains(rr.Contents[0].Text, r.a.ID().String()) {
				t.Fatalf("card resource: %v %+v", err, rr)
			}

			lp, err := cs.ListPrompts(ctxT(t), nil)
			if err != nil || len(lp.Prompts) < 2 {
				t.Fatalf("prompts/list: %v %+v", err, lp)
			}
			gp, err := cs.GetPrompt(ctxT(t), &sdk.GetPromptParams{Name: "summarize", Arguments: map[string]string{"content": "The cat sat.", "style": "bullets"}})
			if err != nil || !strings.Contains(gp.Messages[0].Content.(*sdk.TextContent).Text, "bullet") ||
				!strings.Contains(gp.Messages[0].Content.(*sdk.TextContent).Text, "The cat sat.") {
				t.Fatalf("prompts/get summarize: %v %+v", err, gp)
			}
			if _, err := cs.GetPrompt(ctxT(t), &sdk.GetPromptParams{Name: "summarize", Arguments: map[string]string{"content": "x", "style": "epic"}}); err == nil ||
				!strings.Contains(err.Error(), "brief, detailed, bullets") {
				t.Fatalf("a style off the list: %v", err)
			}

			res, sc = callTool(t, cs, mcp.ToolMeshCall, map[string]any{"peer": r.b.ID().String(), "skill": "ping", "arguments": map[string]any{"payload": era}})
			if res.IsError || sc["payload"] != era || sc["peer_id"] != r.b.ID().String() {
				t.Fatalf("mesh_call ping to B: %v", sc)
			}
			res, sc = callTool(t, cs, mcp.ToolMeshCall, map[string]any{"peer": "not-a-peer", "skill": "ping"})
			if !res.IsError || errCode(sc) != -32602 {
				t.Fatalf("mesh_call to a bad peer: %v", sc)
			}
		})
	}
	// Each request was audited once, as the MCP face's.
	var mcpLines, initialize int
	for _, l := range auditLines(t, r.a) {
		if l["via"] == "mcp" {
			mcpLines++
			if l["method"] == "mcp initialize" {
				initialize++
			}
		}
	}
	if mcpLines < 20 || initialize != 1 {
		t.Errorf("audit: %d lines via mcp, %d of initialize (want the 2025-11-25 session's one)", mcpLines, initialize)
	}
}

// TestFaceResourceListChanged: a session of the 2025-11-25 era hears of a
// file stored by another face (here the node's own store): the list
// changed, and the file it subscribed to was updated. A subscription to
// what is no resource of the node is refused.
func TestFaceResourceListChanged(t *testing.T) {
	r := newRig(t, nil)
	changed := make(chan struct{}, 8)
	updated := make(chan string, 8)
	cs := connect(t, r.url, r.secretToken(), eraSessions, &sdk.ClientOptions{
		ResourceListChangedHandler: func(context.Context, *sdk.ResourceListChangedRequest) { changed <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
	})
	uri := mcp.FilesURI + "/late.txt"
	if err := cs.Subscribe(ctxT(t), &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(ctxT(t), &sdk.SubscribeParams{URI: "file:///etc/passwd"}); err == nil {
		t.Fatal("a subscription to a URI that is not the node's was accepted")
	}
	if _, err := r.a.Store().Files().Write("late.txt", strings.NewReader("late")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/resources/list_changed after a file was stored")
	}
	for got := ""; got != uri; {
		select {
		case got = <-updated:
		case <-time.After(10 * time.Second):
			t.Fatalf("no notifications/resources/updated for %s", uri)
		}
	}
}

// TestFacePeer: an MCP client of A's edge uses B, which has no edge of its
// own, at /peers/{B}/mcp: B's skills as tools, B's card and files as
// resources, every call forwarded over libp2p with the caller's own grants
// on A.
func TestFacePeer(t *testing.T) {
	r := newRig(t, nil)
	base := strings.TrimSuffix(r.url, mcp.Path)
	peerURL := base + "/peers/" + r.b.ID().String() + "/mcp"
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs := connect(t, peerURL, r.secretToken(), era, nil)
			lt, err := cs.ListTools(ctxT(t), nil)
			if err != nil || len(lt.Tools) < len(skills.StandardNames) {
				t.Fatalf("B's tools: %v %d", err, len(lt.Tools))
			}
			res, sc := callTool(t, cs, "ping", map[string]any{})
			if res.IsError || sc["peer_id"] != r.b.ID().String() {
				t.Fatalf("ping through /peers: %v", sc)
			}
			name := "for-bob-" + era + ".txt"
			if res, sc = callTool(t, cs, "upload_file", map[string]any{"filename": name, "content": "hi bob"}); res.IsError {
				t.Fatalf("upload to B: %v", sc)
			}
			if _, _, err := r.b.Store().Files().Open(name); err != nil {
				t.Fatalf("the file is not in B's store: %v", err)
			}
			rr, err := cs.ReadResource(ctxT(t), &sdk.ReadResourceParams{URI: mcp.CardURI})
			if err != nil || !strings.Contains(rr.Contents[0].Text, `"name":"bob"`) {
				t.Fatalf("B's card: %v %+v", err, rr)
			}
			rr, err = cs.ReadResource(ctxT(t), &sdk.ReadResourceParams{URI: mcp.FilesURI + "/" + name})
			if err != nil || rr.Contents[0].Text != "hi bob" {
				t.Fatalf("B's file: %v %+v", err, rr)
			}
		})
	}
	// An anonymous session gets no more from B through A than from A.
	cs := connect(t, peerURL, r.anonToken(t), eraStateless, nil)
	if res, sc := callTool(t, cs, "upload_file", map[string]any{"filename": "x.txt", "content": "x"}); !res.IsError || errCode(sc) != -32009 {
		t.Fatalf("anonymous upload to B through A: %v", sc)
	}
	if res, sc := callTool(t, cs, "ping", map[string]any{}); res.IsError || sc["peer_id"] != r.b.ID().String() {
		t.Fatalf("anonymous ping of B: %v", sc)
	}
	status, _, body := post(t, base+"/peers/nonsense/mcp", map[string]string{"Authorization": "Bearer " + r.secretToken()}, initBody)
	if status != http.StatusBadRequest || !strings.Contains(body, "not a PeerID") {
		t.Fatalf("a bad PeerID: %d %s", status, body)
	}
	// A's own PeerID is A's face.
	cs = connect(t, base+"/peers/"+r.a.ID().String()+"/mcp", r.secretToken(), eraStateless, nil)
	if res, sc := callTool(t, cs, "ping", map[string]any{}); res.IsError || sc["peer_id"] != r.a.ID().String() {
		t.Fatalf("A through its own PeerID: %v", sc)
	}
}
