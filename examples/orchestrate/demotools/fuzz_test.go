package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzTools feeds arbitrary arguments to every tool: no tool panics, a
// success is one JSON object on stdout and nothing on stderr, a failure is
// one line on stderr that names the tool and nothing on stdout, and
// file_reader never answers for a path that is absolute or holds "..".
func FuzzTools(f *testing.F) {
	f.Add(byte(0), []byte(`{"operation":"multiply","a":7,"b":6}`))
	f.Add(byte(1), []byte(`{"city":"Tokyo, Japan"}`))
	f.Add(byte(2), []byte(`{"action":"filter","department":"platform","role":"Engineers","where":"salary over 150k"}`))
	f.Add(byte(3), []byte(`{"query":"kademlia DHT","limit":3}`))
	f.Add(byte(4), []byte(`{"path":"handbook.txt","max_lines":2}`))
	f.Add(byte(4), []byte(`{"path":"sub/../../etc/passwd"}`))
	names := slices.Sorted(maps.Keys(tools))
	root, err := filepath.Abs(filesDir)
	if err != nil {
		f.Fatal(err)
	}
	env := func(k string) string {
		if k == envFiles {
			return root
		}
		return ""
	}
	f.Fuzz(func(t *testing.T, which byte, args []byte) {
		name := names[int(which)%len(names)]
		var out, errb bytes.Buffer
		code := run([]string{name}, bytes.NewReader(args), &out, &errb, env)
		switch code {
		case 0:
			var m map[string]any
			if err := json.Unmarshal(out.Bytes(), &m); err != nil || errb.Len() != 0 {
				t.Fatalf("%s %q: exit 0, stdout %q (%v), stderr %q", name, args, out.String(), err, errb.String())
			}
			if p, ok := m["path"].(string); name == "file_reader" && (!ok || filepath.IsAbs(p) || slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..")) {
				t.Fatalf("file_reader %q answered for path %q", args, m["path"])
			}
		case 1:
			if out.Len() != 0 || !strings.HasPrefix(errb.String(), "demotools "+name+": ") || strings.Count(errb.String(), "\n") != 1 {
				t.Fatalf("%s %q: exit 1, stdout %q, stderr %q", name, args, out.String(), errb.String())
			}
		default:
			t.Fatalf("%s %q: exit %d (stderr %q)", name, args, code, errb.String())
		}
	})
}
