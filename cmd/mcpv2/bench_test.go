package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/node"
)

// The edge is measured against the floor under it: a bare net/http server
// that decodes and re-encodes the same JSON body. Run both in one go for a
// ratio (docs/benchmarks.md):
//
//	go test -run '^$' -bench 'EdgeCall|BareHTTPEcho' -benchtime 3s ./cmd/mcpv2/

var pingSlot = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping","arguments":{"payload":"hello"}}}`)

func benchPost(b *testing.B, client *http.Client, url, session string) {
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(pingSlot))
		req.Header.Set("Content-Type", "application/json")
		if session != "" {
			req.Header.Set(edge.SessionHeader, session)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

func BenchmarkEdgeCall(b *testing.B) {
	n, err := node.New(node.Config{DataDir: b.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, RateLimit: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	srv, err := edge.New(n, edge.Config{Port: testenv.FreePort(b), PublicIP: "127.0.0.1", RateLimit: -1})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	tok, _ := srv.MintSession("127.0.0.1")
	benchPost(b, &http.Client{}, "http://"+srv.Addr().String()+"/mcpv2", tok)
}

func BenchmarkBareHTTPEcho(b *testing.B) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&v); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": v["id"], "result": v["params"]})
	}))
	defer ts.Close()
	benchPost(b, &http.Client{}, ts.URL, "")
}
