package localapi

import (
	"strings"
	"testing"
)

// FuzzDecodeAddKey: the decoder of POST /v1/keys never panics, refuses
// what is over the cap, and accepts only one object with a name.
func FuzzDecodeAddKey(f *testing.F) {
	f.Add([]byte(`{"name":"ci","grants":["echo"],"expires":"30d"}`))
	f.Add([]byte(`{"name":"ci"} {}`))
	f.Add([]byte(`{"nam":"x"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := decodeAddKey(strings.NewReader(string(b)))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "request body: ") {
				t.Fatalf("error %q does not name the body", err)
			}
			return
		}
		if len(b) > maxBody || req.Name == "" {
			t.Fatalf("accepted %q as %+v", b, req)
		}
	})
}

// FuzzDecodeCall: the decoder of POST /v1/call never panics, refuses what
// is over the cap, and accepts only one object with a skill, arguments an
// object (or absent) and a peer that looks like a PeerID (or absent).
func FuzzDecodeCall(f *testing.F) {
	f.Add([]byte(`{"skill":"ping","arguments":{}}`))
	f.Add([]byte(`{"peer":"12D3KooWBhMbLvQd8ZkZ8Jv6mTgVt4uYtbQDbH9eXK2QmPF9Sqkq","skill":"translate_history","arguments":{"messages":[]}}`))
	f.Add([]byte(`{"skill":"ping","arguments":[1]}`))
	f.Add([]byte(`{"skill":"<img src=x onerror=alert(1)>"}`))
	f.Add([]byte(`{"peer":"/ip4/1.2.3.4/tcp/1","skill":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := decodeCall(strings.NewReader(string(b)))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "request body: ") {
				t.Fatalf("error %q does not name the body", err)
			}
			return
		}
		a := strings.TrimSpace(string(req.Arguments))
		if len(b) > maxBody || req.Skill == "" || len(req.Skill) > 256 || (a != "" && a != "null" && a[0] != '{') {
			t.Fatalf("accepted %q as %+v", b, req)
		}
	})
}
