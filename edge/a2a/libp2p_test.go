package a2a_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/p2p/net/gostream"

	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/node"
)

// p2pClient is an HTTP client of A2A over libp2p, as docs/a2a.md
// specifies it (HTTP/1.1 on a stream of a2a.LibP2PProtocol), from the
// libp2p host client to the node at the multiaddr addr (with
// /p2p/PeerID), and the http:// URL prefix of its requests.
func p2pClient(t *testing.T, client host.Host, addr string) (*http.Client, string) {
	t.Helper()
	info, err := peer.AddrInfoFromString(addr)
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	client.Peerstore().AddAddrs(info.ID, info.Addrs, peerstore.TempAddrTTL)
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return gostream.Dial(ctx, client, info.ID, a2a.LibP2PProtocol)
		},
		DisableKeepAlives: true,
	}}, "http://" + info.ID.String()
}

// p2pHTTP is p2pClient's do: it sends one request to path and returns the
// status and body.
func p2pHTTP(t *testing.T, client host.Host, addr string) (do func(method, path, v string, body []byte) (int, []byte)) {
	t.Helper()
	hc, prefix := p2pClient(t, client, addr)
	return func(method, path, v string, body []byte) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, prefix+path, bytes.NewReader(body))
		if v != "" {
			req.Header.Set(a2a.VersionHeader, v)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s over libp2p: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
}

// TestA2AOverLibp2p: another libp2p host reads the node's card on its
// edge, takes the interface of A2A over libp2p from it (a multiaddr with
// /p2p/PeerID, for A2A 1.0 and 0.3) and speaks A2A JSON-RPC to the node
// there, as docs/a2a.md specifies it: its tasks run as its PeerID, with
// what the node's policy grants that PeerID (a skill it is not granted is
// rejected), its extended card lists those skills, and the card over
// libp2p is signed by the node.
func TestA2AOverLibp2p(t *testing.T) {
	client, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	me := client.ID().String()
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"grants":{"`+me+`":["list_files"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// On every interface: the card leaves loopback addresses out.
	r := newRigWith(t, func(c *node.Config) { c.PolicyFile, c.ListenAddrs = policy, []string{"/ip4/0.0.0.0/tcp/0"} }, nil)
	srv, err := r.face.ServeLibP2P(r.n.Host())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
		if err := srv.Close(); err == nil {
			t.Error("a second Close: no error")
		}
	})
	var card struct {
		SupportedInterfaces []struct{ URL, ProtocolBinding, ProtocolVersion string }
	}
	if err := json.Unmarshal(fetchCard(t, r.base+a2a.CardPath, "1.0"), &card); err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	for _, i := range card.SupportedInterfaces {
		if i.ProtocolBinding == a2a.LibP2PBinding {
			versions[i.ProtocolVersion] = i.URL
		}
	}
	addr := versions["1.0"]
	if addr == "" || versions["0.3"] == "" || !strings.HasSuffix(addr, "/p2p/"+r.n.ID().String()) {
		t.Fatalf("the card names no A2A-over-libp2p interface for 1.0 and 0.3 (does this machine have a non-loopback address?): %+v", card.SupportedInterfaces)
	}
	do := p2pHTTP(t, client, addr)
	rpc := func(v, method string, params any) json.RawMessage {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "method": method, "params": params})
		status, b := do(http.MethodPost, a2a.Path, v, body)
		var out struct {
			Result json.RawMessage `json:"result"`
			Error  any             `json:"error"`
		}
		if err := json.Unmarshal(b, &out); status != http.StatusOK || err != nil || out.Error != nil {
			t.Fatalf("%s over libp2p: %d %s", method, status, b)
		}
		return out.Result
	}
	type task struct {
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	send := func(skill string) task {
		t.Helper()
		var res struct{ Task task }
		if err := json.Unmarshal(rpc("1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": skill}})}), &res); err != nil || res.Task.ID == "" {
			t.Fatalf("SendMessage %s: %v", skill, err)
		}
		return res.Task
	}
	ping := send("ping")
	if ping.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("ping over libp2p: %s", ping.Status.State)
	}
	var got task
	if err := json.Unmarshal(rpc("1.0", "GetTask", map[string]any{"id": ping.ID}), &got); err != nil || got.ID != ping.ID || got.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("GetTask over libp2p: %+v %v", got, err)
	}
	if s := send("list_files").Status.State; s != "TASK_STATE_COMPLETED" {
		t.Errorf("a granted skill over libp2p: %s", s)
	}
	if s := send("slow").Status.State; s != "TASK_STATE_REJECTED" {
		t.Errorf("a skill not granted to the peer over libp2p: %s, want rejected", s)
	}
	// v0.3 on the same URL, without a header.
	var v03 struct {
		Kind   string `json:"kind"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if err := json.Unmarshal(rpc("", "tasks/get", map[string]any{"id": ping.ID}), &v03); err != nil || v03.Kind != "task" || v03.Status.State != "completed" {
		t.Errorf("tasks/get (v0.3) over libp2p: %+v %v", v03, err)
	}
	// The caller is the client's PeerID: its tasks are its own, and the
	// node's audit lines name it.
	if list := rpc("1.0", "ListTasks", map[string]any{}); !strings.Contains(string(list), ping.ID) || !strings.Contains(string(list), `"totalSize":3`) {
		t.Errorf("ListTasks over libp2p: %s", list)
	}
	if res, e := r.rpc(t, r.token(), "1.0", "GetTask", map[string]any{"id": ping.ID}); e == nil {
		t.Errorf("a secret holder on the edge got the peer's task: %s", res)
	}
	var asPeer bool
	for _, l := range auditLines(t, r) {
		if l["method"] == "a2a SendMessage" && l["caller"] == me && l["auth"] == "peer" {
			asPeer = true
		}
	}
	if !asPeer {
		t.Errorf("no audit line of a2a SendMessage by peer %s", me)
	}
	// Its extended card: the open skills and its grant.
	ext := rpc("1.0", "GetExtendedAgentCard", map[string]any{})
	if id, err := a2a.VerifyCard(ext); err != nil || id != r.n.ID().String() {
		t.Fatalf("extended card over libp2p: %v %s", err, id)
	}
	if ids := skillIDs(t, ext); !slices.Equal(ids, []string{"list_files", "ping"}) {
		t.Errorf("the peer's extended card lists %v", ids)
	}
	// The card over libp2p, signed, naming the edge's URL.
	status, p2pCard := do(http.MethodGet, a2a.CardPath, "1.0", nil)
	if id, err := a2a.VerifyCard(p2pCard); status != http.StatusOK || err != nil || id != r.n.ID().String() || !strings.Contains(string(p2pCard), `/a2a"`) {
		t.Fatalf("card over libp2p: %d %v %s", status, err, p2pCard)
	}
}

// TestA2AOverLibp2pWithoutEdge: a node without an edge is an A2A agent
// over libp2p all the same: a task runs, and its card (signed, with an
// extended one) names its libp2p interfaces only.
func TestA2AOverLibp2pWithoutEdge(t *testing.T) {
	client, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	n, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Name: "edgeless"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	f, err := a2a.New(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	srv, err := f.ServeLibP2P(n.Host())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	do := p2pHTTP(t, client, n.P2PAddrs()[0])
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "a", "method": "SendMessage",
		"params": map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "ping"}})}})
	if status, b := do(http.MethodPost, a2a.Path, "1.0", body); status != http.StatusOK || !strings.Contains(string(b), "TASK_STATE_COMPLETED") {
		t.Fatalf("ping over libp2p, no edge: %d %s", status, b)
	}
	status, card := do(http.MethodGet, a2a.CardPath, "1.0", nil)
	if id, err := a2a.VerifyCard(card); status != http.StatusOK || err != nil || id != n.ID().String() {
		t.Fatalf("card over libp2p, no edge: %d %v %s", status, err, card)
	}
	if strings.Contains(string(card), `"JSONRPC"`) || !strings.Contains(string(card), `"extendedAgentCard":true`) {
		t.Errorf("card over libp2p, no edge: %s", card)
	}
	if status, b := do(http.MethodGet, a2a.Path, "1.0", nil); status != http.StatusMethodNotAllowed {
		t.Errorf("GET %s over libp2p: %d %s", a2a.Path, status, b)
	}
}

// TestA2AOverLibp2pPeerCap: a peer holds at most 8 requests in flight
// over libp2p: with 8 event streams open, its next request is 503 with
// -32000; once they end, it is served again.
func TestA2AOverLibp2pPeerCap(t *testing.T) {
	client, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"grants":{"`+client.ID().String()+`":["slow"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRigWith(t, func(c *node.Config) { c.PolicyFile = policy }, nil)
	srv, err := r.face.ServeLibP2P(r.n.Host())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hc, prefix := p2pClient(t, client, r.n.P2PAddrs()[0])
	post := func(method string, params any) (*http.Response, error) {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		req, _ := http.NewRequest(http.MethodPost, prefix+a2a.Path, bytes.NewReader(body))
		req.Header.Set(a2a.VersionHeader, "1.0")
		req.Header.Set("Accept", "text/event-stream")
		return hc.Do(req)
	}
	var streams []*http.Response
	for i := range 8 {
		resp, err := post("SendStreamingMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}})})
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %v %v", i, err, resp)
		}
		streams = append(streams, resp)
	}
	resp, err := post("ListTasks", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "-32000") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a ninth request in flight: %d %s", resp.StatusCode, b)
	}
	close(r.release) // the slow tasks end, and their streams with them
	for _, s := range streams {
		_, _ = io.Copy(io.Discard, s.Body)
		s.Body.Close()
	}
	resp, err = post("ListTasks", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"totalSize":8`) {
		t.Fatalf("after the streams ended: %d %s", resp.StatusCode, b)
	}
}
