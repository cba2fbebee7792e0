package main

import (
	"cmp"
	"encoding/base64"
	"mime"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestReadFileMIME: read_file names a text file's type by its content:
// text/plain unless its extension is a text type of its own; the
// extension table's guess is kept for binary files (issue 26, item 8:
// read_file go.mod said audio/x-mod). The table is the machine's
// (mime.TypeByExtension reads /etc/mime.types): .mod may be audio/x-mod
// here and nothing elsewhere, hence the binary case's want.
func TestReadFileMIME(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "policy.json"), `{"grants": {"http": ["upload_file", "read_file"]}}`)
	port := edgeFreePort(t, "127.0.0.1")
	ap := startEdgeProc(t, "A", nil, "--data-dir", dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mesh", "--no-mdns", "--no-nat",
		"--port", strconv.Itoa(port), "--public-ip", "127.0.0.1")
	a := newEdgePeer(t, "A", ap)
	a.client = edgeHTTPClient(t, "", nil)
	tok := a.anonSession(t, a.client).SessionID

	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01")
	tracker := []byte("Extreme Tracker\x00\x00\x00\x01\x02M.K.\xff\xfe") // binary: the table's guess stands
	for _, c := range []struct {
		name    string
		content []byte
		want    string
	}{
		{"go.mod", gomod, "text/plain; charset=utf-8"},
		{"notes.txt", []byte("héllo\n"), "text/plain; charset=utf-8"},
		{"page.html", []byte("<p>hi</p>\n"), "text/html; charset=utf-8"},
		{"data.json", []byte(`{"a": 1}`), "application/json"},
		{"README", []byte("# read me\n"), "text/plain; charset=utf-8"},
		{"pic.png", png, "image/png"},
		{"song.mod", tracker, cmp.Or(mime.TypeByExtension(".mod"), "application/octet-stream")}, // the machine's table
	} {
		var up struct {
			Filename string `json:"filename"`
		}
		a.mustCall(t, tok, "upload_file", map[string]any{"filename": c.name, "content": base64.StdEncoding.EncodeToString(c.content), "encoding": "base64"}, &up)
		var rd struct {
			MIMEType string `json:"mime_type"`
		}
		a.mustCall(t, tok, "read_file", map[string]any{"filename": up.Filename}, &rd)
		if rd.MIMEType != c.want {
			t.Errorf("read_file %s: mime_type %q, want %q", c.name, rd.MIMEType, c.want)
		}
	}
}
