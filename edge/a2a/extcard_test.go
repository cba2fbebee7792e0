package a2a_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/keys"
)

// postRPC posts one JSON-RPC request to url with the bearer tok ("":
// none) in version v, and returns its result or fails the test.
func postRPC(t *testing.T, url, tok, v, method string, params any) []byte {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set(a2a.VersionHeader, v)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Result json.RawMessage `json:"result"`
		Error  any             `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Error != nil || len(out.Result) == 0 {
		t.Fatalf("%s (A2A %s): %d %s", method, v, resp.StatusCode, b)
	}
	return out.Result
}

// skillIDs are the ids of a card's skills, sorted.
func skillIDs(t *testing.T, card []byte) []string {
	t.Helper()
	var c struct {
		Skills []struct {
			ID string `json:"id"`
		} `json:"skills"`
	}
	if err := json.Unmarshal(card, &c); err != nil {
		t.Fatalf("card: %v: %s", err, card)
	}
	var out []string
	for _, s := range c.Skills {
		out = append(out, s.ID)
	}
	slices.Sort(out)
	return out
}

// TestExtendedCard: two API keys granted different skills get different
// extended cards, each signed by the node and listing the open skills and
// their own grants only; an anonymous caller gets the public card, byte
// for byte as GET serves it; the public card says an extended one is
// there, in both versions.
func TestExtendedCard(t *testing.T) {
	ring, err := keys.Open(filepath.Join(t.TempDir(), keys.FileName))
	if err != nil {
		t.Fatal(err)
	}
	alpha, _, err := ring.Add("alpha", []string{"list_files"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	beta, _, err := ring.Add("beta", []string{"get_skill", "read_file"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	base, n, _ := cardEdge(t, edge.Config{Keys: ring})
	for _, v := range []struct{ version, method, flag string }{
		{"1.0", "GetExtendedAgentCard", "extendedAgentCard"},
		{"0.3", "agent/getAuthenticatedExtendedCard", "supportsAuthenticatedExtendedCard"},
	} {
		public := fetchCard(t, base+a2a.CardPath, v.version)
		all := skillIDs(t, public)
		for _, s := range []string{"ping", "list_files", "get_skill", "read_file"} {
			if !slices.Contains(all, s) {
				t.Fatalf("A2A %s: the public card lacks skill %s: %v", v.version, s, all)
			}
		}
		var pc map[string]any
		_ = json.Unmarshal(public, &pc)
		flag := pc[v.flag]
		if caps, ok := pc["capabilities"].(map[string]any); ok && v.version == "1.0" {
			flag = caps[v.flag]
		}
		if flag != true {
			t.Fatalf("A2A %s: the public card does not say it has an extended card (%s): %s", v.version, v.flag, public)
		}

		cards := map[string][]string{}
		for name, tok := range map[string]string{"alpha": alpha, "beta": beta} {
			card := postRPC(t, base+a2a.Path, tok, v.version, v.method, map[string]any{})
			if id, err := a2a.VerifyCard(card); err != nil || id != n.ID().String() {
				t.Fatalf("A2A %s: %s's extended card: signer %q, %v", v.version, name, id, err)
			}
			cards[name] = skillIDs(t, card)
		}
		if v.version == "1.0" { // the HTTP+JSON binding reaches the same operation
			req, _ := http.NewRequest(http.MethodGet, base+a2a.RESTPath+"/extendedAgentCard", nil)
			req.Header.Set("Authorization", "Bearer "+alpha)
			req.Header.Set(a2a.VersionHeader, "1.0")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			card, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if id, err := a2a.VerifyCard(card); resp.StatusCode != http.StatusOK || err != nil || id != n.ID().String() ||
				!slices.Equal(skillIDs(t, card), []string{"list_files", "ping"}) {
				t.Errorf("GET %s/extendedAgentCard as alpha: %d %v %s", a2a.RESTPath, resp.StatusCode, err, card)
			}
		}
		if want := []string{"list_files", "ping"}; !slices.Equal(cards["alpha"], want) {
			t.Errorf("A2A %s: alpha's extended card lists %v, want %v", v.version, cards["alpha"], want)
		}
		if want := []string{"get_skill", "ping", "read_file"}; !slices.Equal(cards["beta"], want) {
			t.Errorf("A2A %s: beta's extended card lists %v, want %v", v.version, cards["beta"], want)
		}

		anon := postRPC(t, base+a2a.Path, "", v.version, v.method, nil)
		var a, p any
		_ = json.Unmarshal(anon, &a)
		_ = json.Unmarshal(public, &p)
		if !reflect.DeepEqual(a, p) {
			t.Errorf("A2A %s: the anonymous caller's extended card is not the public one:\n%s\n%s", v.version, anon, public)
		}
	}
}

// TestPeerFaceNoExtendedCard: the card a mesh peer signs for another
// edge's /peers/{PeerID} face claims no extended card, and that face
// answers -32007: what a caller may run on the peer is the peer's to say.
func TestPeerFaceNoExtendedCard(t *testing.T) {
	r := newRig(t, "")
	b, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Name: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fb, err := a2a.New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	b.SetA2ACard(fb.CardFor)
	r.n.Host().Peerstore().AddAddrs(b.ID(), b.Host().Addrs(), time.Hour)
	peerBase := r.base + "/peers/" + b.ID().String()
	card := fetchCard(t, peerBase+a2a.CardPath, "1.0")
	if signer, err := a2a.VerifyCard(card); err != nil || signer != b.ID().String() || strings.Contains(string(card), "extendedAgentCard") {
		t.Fatalf("B's card through A (signer %s, %v): %s", signer, err, card)
	}
	if own := fetchCard(t, r.base+a2a.CardPath, "1.0"); !strings.Contains(string(own), `"extendedAgentCard":true`) {
		t.Fatalf("A's own card: %s", own)
	}
	if _, e := rpcAt(t, peerBase+a2a.Path, r.token(), "1.0", "GetExtendedAgentCard"); e == nil || e.Code != -32007 {
		t.Fatalf("GetExtendedAgentCard through A's face of B: %+v", e)
	}
}

// rpcAt posts one JSON-RPC request without params to url and returns its
// result or its error.
func rpcAt(t *testing.T, url, tok, v, method string) (json.RawMessage, *struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set(a2a.VersionHeader, v)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return out.Result, out.Error
}
