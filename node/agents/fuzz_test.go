package agents

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeFile: the registry file's decoder never panics, and what it
// accepts holds valid, distinct URLs within the cap, and reads back the
// same when written as the registry writes it. The seed corpus is in
// testdata/fuzz/FuzzDecodeFile.
func FuzzDecodeFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"agents":[]}`))
	f.Add([]byte(`{"version":1,"agents":[{"url":"https://a.example/","bridged":true,"added":"2026-01-02T03:04:05Z","agent":{"url":"x","name":"n","skills":[{"name":"s","description":"d","inputSchema":null,"tags":["t"]}],"healthy":true,"last_checked":"0001-01-01T00:00:00Z","signed":false,"bridged":false}}]}`))
	f.Add([]byte(`{"version":2,"agents":[]}`))
	f.Add([]byte(`{"version":1,"agents":[{"url":"ftp://a"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeFile(data, 8)
		if err != nil {
			return
		}
		if len(got) > 8 {
			t.Fatalf("%d agents over the cap of 8", len(got))
		}
		seen := map[string]bool{}
		for _, s := range got {
			u, err := NormalizeURL(s.URL)
			if err != nil || u != s.URL || seen[u] {
				t.Fatalf("accepted URL %q: %v (seen %v)", s.URL, err, seen[u])
			}
			seen[u] = true
		}
		b, err := json.Marshal(fileDoc{Version: 1, Agents: got})
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeFile(b, 8)
		if err != nil || len(back) != len(got) {
			t.Fatalf("re-read: %v, %d agents of %d", err, len(back), len(got))
		}
	})
}
