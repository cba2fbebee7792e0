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
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/p2p/net/gostream"

	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/node"
)

// TestA2AOverLibp2p: another libp2p host speaks A2A JSON-RPC to a node
// over libp2p HTTP (HTTP/1.1 on a stream of a2a.LibP2PProtocol, as
// docs/a2a.md specifies it, the multiaddr taken from the node's card): its tasks
// run as its PeerID, with what the node's policy grants that PeerID (a
// skill it is not granted is rejected), its extended card lists those
// skills, and the card over libp2p is signed by the node.
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
	r := newRigWith(t, func(c *node.Config) { c.PolicyFile = policy }, nil)
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
	// The node's A2A-over-libp2p interface, as its card would name it
	// (the card leaves loopback addresses out; this test has only those).
	info, err := peer.AddrInfoFromString(r.n.P2PAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	client.Peerstore().AddAddrs(info.ID, info.Addrs, peerstore.TempAddrTTL)
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return gostream.Dial(ctx, client, info.ID, a2a.LibP2PProtocol)
		},
		DisableKeepAlives: true,
	}}
	do := func(method, path, v string, body []byte) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+info.ID.String()+path, bytes.NewReader(body))
		req.Header.Set(a2a.VersionHeader, v)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s over libp2p: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
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
	status, card := do(http.MethodGet, a2a.CardPath, "1.0", nil)
	if id, err := a2a.VerifyCard(card); status != http.StatusOK || err != nil || id != r.n.ID().String() || !strings.Contains(string(card), `/a2a"`) {
		t.Fatalf("card over libp2p: %d %v %s", status, err, card)
	}
}
