package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/protocol"
)

func TestParseResources(t *testing.T) {
	dir := t.TempDir()
	rs, err := parseResources("r.json", dir, []byte(`{"resources":[
		{"uri":"resource://company_knowledge","description":"d","json":{"mission":"m","products":["a"]},"public":true},
		{"uri":"resource://prefs","name":"user_preferences","text":"theme: dark"},
		{"uri":"doc://handbook/v1/handbook.txt","file":"files/handbook.txt"},
		{"uri":"note:motd","file":"/abs/motd.md","mime_type":"text/markdown"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, mime, file string
		size             int64
		public           bool
	}{
		{"company_knowledge", "application/json", "", 0, true},
		{"user_preferences", "text/plain; charset=utf-8", "", 11, false},
		{"handbook.txt", "text/plain; charset=utf-8", filepath.Join(dir, "files", "handbook.txt"), 0, false},
		{"note:motd", "text/markdown", "/abs/motd.md", 0, false},
	}
	for i, w := range want {
		r := rs[i]
		if r.info.Name != w.name || r.info.MIMEType != w.mime || r.file != w.file || r.info.Public != w.public || (w.size != 0 && r.info.Size != w.size) {
			t.Errorf("resource %d: %+v file %q, want %+v", i, r.info, r.file, w)
		}
	}
	if !strings.Contains(string(rs[0].data), `"mission": "m"`) || rs[0].info.Size != int64(len(rs[0].data)) {
		t.Errorf("json content %q size %d", rs[0].data, rs[0].info.Size)
	}

	for _, c := range []struct{ in, want string }{
		{`{"resources":[{"uri":"resource://a","text":"x"},{"uri":"resource://a","text":"y"}]}`, `resource 2: uri "resource://a" is also resource 1's`},
		{`{"resources":[{"text":"x"}]}`, "resource 1: uri: missing"},
		{`{"resources":[{"uri":"company_knowledge","text":"x"}]}`, "no scheme"},
		{`{"resources":[{"uri":"mcpv2://card","text":"x"}]}`, "the mcpv2: scheme is the MCP face's own"},
		{`{"resources":[{"uri":"resource://a b","text":"x"}]}`, "spaces"},
		{`{"resources":[{"uri":"resource://a"}]}`, `resource 1 ("resource://a"): give exactly one of "text", "json" and "file"`},
		{`{"resources":[{"uri":"resource://a","text":"x","file":"f"}]}`, "exactly one"},
		{`{"resources":[{"uri":"resource://a","text":"x","mime_type":"not a type"}]}`, `mime_type "not a type"`},
		{`{"resources":[{"uri":"resource://a","json":{"a":}}]}`, "invalid character"},
		{`{"resources":[{"uri":"resource://a","txt":"x"}]}`, `did you mean "text"`},
		{`{"resources":[{"uri":"resource://a","text":"` + strings.Repeat("x", MaxResourceBytes+1) + `"}]}`, "more than"},
		{`{"resources":[{"uri":"resource://` + strings.Repeat("x", MaxResourceURI) + `","text":"x"}]}`, "more than 1024"},
		{`{"resources":[` + strings.Repeat(`{"uri":"r:x","text":""},`, MaxResources) + `{"uri":"r:y","text":""}]}`, "more than 256"},
		{`{"resources":[]} {}`, "data after"},
	} {
		if _, err := parseResources("r.json", dir, []byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "resources file r.json") {
			t.Errorf("%.80s: %v; want an error naming the file and saying %q", c.in, err, c.want)
		}
	}
}

// TestNodeResources: a real node serves a resources file's entries; a
// public one to anyone, the others to secret holders and to callers the
// policy grants read_resource; files are read at read time, capped; every
// read is audited.
func TestNodeResources(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("note.txt", "first")
	write("bin.dat", "\xff\xfe\x00")
	rf := write("resources.json", `{"resources":[
		{"uri":"resource://company_knowledge","json":{"mission":"m"},"public":true},
		{"uri":"resource://user_preferences","json":{"theme":"dark"}},
		{"uri":"resource://note","file":"note.txt"},
		{"uri":"resource://bin","file":"bin.dat","mime_type":"application/octet-stream"},
		{"uri":"resource://gone","file":"gone.txt","public":true}]}`)
	n := newTestNode(t, func(c *Config) {
		c.ResourcesFile = rf
		c.Secret = []byte("s")
		c.PolicyFile = writePolicy(t, map[string][]string{"key:reader": {ReadResourceSkill}})
	})
	anon := protocol.Caller{ID: "http:1.2.3.4", Via: "mcp", Kind: protocol.CallerAnonymous}
	holder := protocol.Caller{ID: "holder", Via: "mcp", Kind: protocol.CallerSecretHolder}
	reader := protocol.Caller{ID: "key:reader", Via: "mcp", Kind: protocol.CallerKey}
	uris := func(c protocol.Caller) string {
		var us []string
		for _, r := range n.Resources(c) {
			us = append(us, r.URI)
		}
		return strings.Join(us, " ")
	}
	if got := uris(anon); got != "resource://company_knowledge resource://gone" {
		t.Errorf("anonymous lists %q, want the public ones", got)
	}
	if got := uris(holder); strings.Count(got, "resource://") != 5 {
		t.Errorf("secret holder lists %q", got)
	}
	if got := uris(reader); got != uris(holder) {
		t.Errorf("read_resource grantee lists %q", got)
	}

	ctx := ctxT(t)
	rc, perr := n.ReadResource(ctx, anon, "resource://company_knowledge")
	if perr != nil || rc.MIMEType != "application/json" || !strings.Contains(rc.Text, `"mission": "m"`) {
		t.Errorf("public read: %+v %v", rc, perr)
	}
	if _, perr := n.ReadResource(ctx, anon, "resource://user_preferences"); perr == nil || perr.Code != protocol.CodeNotPermitted ||
		!strings.Contains(perr.Message, `{"grants": {"http": ["read_resource"]}}`) {
		t.Errorf("anonymous read of a private one: %v", perr)
	}
	if rc, perr := n.ReadResource(ctx, reader, "resource://note"); perr != nil || rc.Text != "first" || !strings.HasPrefix(rc.MIMEType, "text/plain") {
		t.Errorf("file read: %+v %v", rc, perr)
	}
	write("note.txt", "second") // read at read time
	if rc, _ := n.ReadResource(ctx, holder, "resource://note"); rc.Text != "second" {
		t.Errorf("file read after a change: %q", rc.Text)
	}
	if rc, perr := n.ReadResource(ctx, holder, "resource://bin"); perr != nil || rc.Text != "" || string(rc.Blob) != "\xff\xfe\x00" {
		t.Errorf("binary read: %+v %v", rc, perr)
	}
	if _, perr := n.ReadResource(ctx, holder, "resource://gone"); perr == nil || perr.Code != protocol.CodeToolExecution ||
		!strings.Contains(perr.Message, "does not exist") || strings.Contains(perr.Message, dir) {
		t.Errorf("missing file: %v", perr)
	}
	write("note.txt", strings.Repeat("x", MaxResourceBytes+1))
	if _, perr := n.ReadResource(ctx, holder, "resource://note"); perr == nil || !strings.Contains(perr.Message, "larger than") {
		t.Errorf("file over the cap: %v", perr)
	}
	if _, perr := n.ReadResource(ctx, holder, "resource://nope"); perr == nil || perr.Code != protocol.CodeFileNotFound {
		t.Errorf("unknown uri: %v", perr)
	}
	reads := 0
	for _, l := range readAudit(t, n) {
		if l["method"] == "resources/read" && l["skill"] == ReadResourceSkill {
			reads++
		}
	}
	if reads != 8 {
		t.Errorf("%d audit lines of resources/read, want 8 (one per read)", reads)
	}
}

// TestNodeResourceFolder: without a resources file, each regular file of
// <data-dir>/resources is a resource, not public; a named file that is
// missing fails New.
func TestNodeResourceFolder(t *testing.T) {
	data := t.TempDir()
	if err := os.MkdirAll(filepath.Join(data, "resources", "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"guide.md": "# Guide", "a b.txt": "spaced", ".hidden": "no"} {
		if err := os.WriteFile(filepath.Join(data, "resources", name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n := newTestNode(t, func(c *Config) { c.DataDir = data })
	holder := protocol.Caller{ID: "holder", Kind: protocol.CallerSecretHolder}
	rs := n.Resources(holder)
	if len(rs) != 2 || rs[0].URI != "resource://a%20b.txt" || rs[1].URI != "resource://guide.md" || rs[1].MIMEType != "text/markdown; charset=utf-8" || rs[0].Public {
		t.Fatalf("folder resources %+v", rs)
	}
	if rc, perr := n.ReadResource(ctxT(t), holder, rs[1].URI); perr != nil || rc.Text != "# Guide" {
		t.Errorf("read %+v %v", rc, perr)
	}
	if len(n.Resources(protocol.Caller{ID: "http:x", Kind: protocol.CallerAnonymous})) != 0 {
		t.Errorf("an anonymous caller sees the folder's resources")
	}
	if _, err := New(Config{DataDir: t.TempDir(), ListenAddrs: loopback, ResourcesFile: filepath.Join(t.TempDir(), "none.json")}); err == nil ||
		!strings.Contains(err.Error(), "resources file") {
		t.Errorf("a missing --resources file: %v", err)
	}
}

// FuzzParseResources: the parser never panics, and what it accepts holds
// URIs with a scheme, unique, with content or a file, within the caps.
func FuzzParseResources(f *testing.F) {
	for _, s := range []string{
		`{"resources":[{"uri":"resource://company_knowledge","json":{"mission":"m"},"public":true}]}`,
		`{"resources":[{"uri":"resource://a","text":"x"},{"uri":"resource://a","text":"y"}]}`,
		`{"resources":[{"uri":"doc://h","file":"h.txt","mime_type":"text/plain"}]}`,
		`{"resources":[{"uri":"x","text":"x"}]}`, `{"resources":null}`, `[`, ``, `{"resources":[{}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := parseResources("fuzz.json", "/base", data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, r := range rs {
			if checkResourceURI(r.info.URI) != nil || seen[r.info.URI] || (r.data == nil) == (r.file == "") && len(r.data) != 0 ||
				len(r.data) > MaxResourceBytes || r.info.MIMEType == "" || r.info.Name == "" {
				t.Fatalf("accepted %+v (file %q, %d bytes)", r.info, r.file, len(r.data))
			}
			seen[r.info.URI] = true
		}
	})
}
