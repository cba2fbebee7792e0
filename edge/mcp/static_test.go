package mcp_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/edge/mcp"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
)

// TestStaticResources: a node's own resources (--resources) are listed
// and read on the MCP face beside the mcpv2:// ones, in both eras; an
// anonymous caller sees and reads the public one only; the exported
// ListResources and ReadResource (the REST face's) answer the same; each
// read is audited.
func TestStaticResources(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prefs.json"), []byte(`{"theme":"dark"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	rf := filepath.Join(dir, "resources.json")
	if err := os.WriteFile(rf, []byte(`{"resources":[
		{"uri":"resource://company_knowledge","name":"company_knowledge","description":"Mission","json":{"mission":"m"},"public":true},
		{"uri":"resource://user_preferences","name":"user_preferences","file":"prefs.json"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, func(c *node.Config) { c.ResourcesFile = rf })
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			for _, who := range []struct {
				name, token string
				want        []string
			}{
				{"secret holder", r.secretToken(), []string{"resource://company_knowledge", "resource://user_preferences"}},
				{"anonymous", r.anonToken(t), []string{"resource://company_knowledge"}},
			} {
				cs := connect(t, r.url, who.token, era, nil)
				lr, err := cs.ListResources(ctxT(t), nil)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				hasCard := false
				for _, res := range lr.Resources {
					if strings.HasPrefix(res.URI, "resource://") {
						got = append(got, res.URI)
					}
					hasCard = hasCard || res.URI == mcp.CardURI
				}
				if strings.Join(got, " ") != strings.Join(who.want, " ") || !hasCard {
					t.Errorf("%s lists %v (card %v), want %v beside mcpv2://card", who.name, got, hasCard, who.want)
				}
				rr, err := cs.ReadResource(ctxT(t), &sdk.ReadResourceParams{URI: "resource://company_knowledge"})
				if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, `"mission": "m"`) || rr.Contents[0].MIMEType != "application/json" {
					t.Errorf("%s reads company_knowledge: %v %+v", who.name, err, rr)
				}
				rr, err = cs.ReadResource(ctxT(t), &sdk.ReadResourceParams{URI: "resource://user_preferences"})
				if who.name == "anonymous" {
					if err == nil || !strings.Contains(err.Error(), "read_resource") {
						t.Errorf("anonymous reads user_preferences: %v %+v", err, rr)
					}
				} else if err != nil || rr.Contents[0].Text != `{"theme":"dark"}` {
					t.Errorf("secret holder reads user_preferences: %v %+v", err, rr)
				}
				if _, err := cs.ReadResource(ctxT(t), &sdk.ReadResourceParams{URI: "resource://nope"}); err == nil || !strings.Contains(err.Error(), "not found") {
					t.Errorf("%s reads an unknown resource: %v", who.name, err)
				}
			}
		})
	}

	// The exported methods, as the REST face calls them.
	anon := protocol.Caller{ID: "http:127.0.0.1", Via: "rest", Kind: protocol.CallerAnonymous}
	holder := protocol.Caller{ID: "127.0.0.1", Via: "rest", Kind: protocol.CallerSecretHolder}
	ls, err := r.face.ListResources(ctxT(t), holder)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, res := range ls {
		uris = append(uris, res.URI)
	}
	if !strings.Contains(strings.Join(uris, " "), mcp.CardURI+" "+mcp.FilesURI) || !strings.HasSuffix(strings.Join(uris, " "), "resource://company_knowledge resource://user_preferences") {
		t.Errorf("ListResources for a secret holder: %v", uris)
	}
	if ls, _ := r.face.ListResources(ctxT(t), anon); len(ls) == 0 || ls[len(ls)-1].URI != "resource://company_knowledge" {
		t.Errorf("ListResources for an anonymous caller ends with %v", ls[len(ls)-1].URI)
	}
	for _, uri := range []string{mcp.CardURI, mcp.FilesURI, "resource://company_knowledge", "resource://user_preferences"} {
		rr, err := r.face.ReadResource(ctxT(t), holder, uri)
		if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text == "" || rr.CacheScope == "" {
			t.Errorf("ReadResource %s: %v %+v", uri, err, rr)
		}
	}
	_, err = r.face.ReadResource(ctxT(t), anon, "resource://user_preferences")
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != protocol.CodeNotPermitted {
		t.Errorf("ReadResource of a private one, anonymous: %v", err)
	}
	if _, err := r.face.ReadResource(ctxT(t), holder, "resource://nope"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("ReadResource of an unknown one: %v", err)
	}

	reads := 0
	for _, l := range auditLines(t, r.a) {
		if l["method"] == "resources/read" && l["skill"] == node.ReadResourceSkill {
			reads++
		}
	}
	// Per era: 3 reads × 2 callers; then 2 static reads, 1 refused, 1 unknown.
	if want := 2*6 + 4; reads != want {
		t.Errorf("%d audit lines of static reads, want %d", reads, want)
	}
}
