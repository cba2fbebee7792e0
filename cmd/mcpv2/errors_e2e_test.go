package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestErrorsPeerIDMismatchExplained (issue 26 items 2 and 4): an address
// whose PeerID is not the node's that listens there (a stale address) is
// explained as such, naming both PeerIDs and `mcpv2 id`; libp2p's "peer
// id mismatch" shows only under --verbose, on a "cause:" line.
func TestErrorsPeerIDMismatchExplained(t *testing.T) {
	a := startNode(t, "", "--no-mdns", "--no-nat")
	other := peerIDOf(t, t.TempDir())
	caller := t.TempDir()
	for _, tr := range []string{"/tcp/", "/quic-v1"} {
		var live string
		for _, ad := range a.addrs {
			if strings.Contains(ad, tr) {
				live = ad
			}
		}
		if live == "" {
			t.Fatalf("no %s address in %v", tr, a.addrs)
		}
		stale := strings.TrimSuffix(live, a.peerID) + other
		_, errs, code := run(t, "call", stale, "ping", "--data-dir", caller)
		want := "belongs to another node: its PeerID is " + a.peerID + ", not " + other
		if code != 1 || !strings.Contains(errs, want) || !strings.Contains(errs, "mcpv2 id --data-dir") {
			t.Fatalf("call %s: exit %d, stderr:\n%s\nwant %q", stale, code, errs, want)
		}
		if strings.Contains(errs, "peer id mismatch") || strings.Contains(errs, "remote key matches") {
			t.Errorf("call %s: libp2p's words without --verbose:\n%s", stale, errs)
		}
		_, errs, code = run(t, "call", stale, "ping", "--data-dir", caller, "--verbose")
		if code != 1 || !strings.Contains(errs, want) || !strings.Contains(errs, "\n  cause: ") || !strings.Contains(errs, "peer id mismatch: expected "+other) {
			t.Fatalf("call %s --verbose: exit %d, stderr:\n%s", stale, code, errs)
		}
	}
}

// TestErrorsNoMeshPeersExplained (issue 26 item 4): a PeerID looked up in
// a DHT with no peers (the --bootstrap peer serves no DHT) says there are
// no mesh peers yet and what to pass, not kbucket's "failed to find any
// peer in table" (kept for --verbose); a find says the same.
func TestErrorsNoMeshPeersExplained(t *testing.T) {
	lone := startNode(t, "", "--no-mesh")
	boot := lone.tcpAddr(t)
	missing := peerIDOf(t, t.TempDir())
	caller := t.TempDir()
	const want = "no mesh peers yet"
	_, errs, code := run(t, "call", missing, "ping", "--bootstrap", boot, "--data-dir", caller, "--no-nat")
	if code != 1 || !strings.Contains(errs, want) || !strings.Contains(errs, "--bootstrap ADDR (or set MCPV2_BOOTSTRAP)") {
		t.Fatalf("call by PeerID: exit %d, stderr:\n%s", code, errs)
	}
	if strings.Contains(errs, "failed to find any peer in table") {
		t.Errorf("call by PeerID: kbucket's words without --verbose:\n%s", errs)
	}
	_, errs, code = run(t, "call", missing, "ping", "--bootstrap", boot, "--data-dir", caller, "--no-nat", "--verbose")
	if code != 1 || !strings.Contains(errs, want) || !strings.Contains(errs, "cause: ") || !strings.Contains(errs, "failed to find any peer in table") {
		t.Fatalf("call by PeerID --verbose: exit %d, stderr:\n%s", code, errs)
	}
	_, errs, code = run(t, "find", "ping", "--bootstrap", boot, "--data-dir", caller, "--no-nat")
	if code != 1 || !strings.Contains(errs, want) || strings.Contains(errs, "no DHT peer to ask") {
		t.Fatalf("find: exit %d, stderr:\n%s", code, errs)
	}
}

// TestErrorsMeshWrongSecret (issue 26 item 4): a mesh call carrying a
// session of another secret is refused in the edge's words ("minted by a
// node with another secret"), naming --secret.
func TestErrorsMeshWrongSecret(t *testing.T) {
	a := startNode(t, "", "--no-mdns", "--no-nat", "--secret", "right")
	_, errs, code := run(t, "call", a.tcpAddr(t), "ask", `{"query":"hi"}`, "--secret", "wrong", "--data-dir", t.TempDir())
	if code != 1 || !strings.Contains(errs, "error -32001: invalid session: bad signature: the token was altered, or minted by a node with another secret") ||
		!strings.Contains(errs, "--secret (MCPV2_SECRET)") {
		t.Fatalf("wrong secret: exit %d, stderr:\n%s", code, errs)
	}
}

// TestSkillNotFoundDidYouMeanEveryFace (issue 26 item 3): a mistyped skill
// is refused with a did-you-mean on the mesh, the HTTP edge, MCP's
// tools/call and an A2A data part alike: the node builds the message once.
func TestSkillNotFoundDidYouMeanEveryFace(t *testing.T) {
	a := startNode(t, "", "--no-mdns", "--no-nat", "--port", "0", "--bind-host", "127.0.0.1")
	port := a.First("MCPV2_BOUND_PORT")
	if port == "" {
		t.Fatalf("no MCPV2_BOUND_PORT in %v", a.Banner)
	}
	const want = `skill "pnig" not found (did you mean "ping"?)`
	for _, addr := range []string{a.tcpAddr(t), "mcpv2://127.0.0.1:" + port + "/mcpv2"} {
		_, errs, code := run(t, "call", addr, "pnig", "--data-dir", t.TempDir())
		if code != 1 || errs != "mcpv2: error -32002: "+want+"\n" {
			t.Errorf("call %s pnig: exit %d, stderr %q, want %q", addr, code, errs, want)
		}
	}
	base := "http://127.0.0.1:" + port
	if got := mcpToolCall(t, base, "pnig", map[string]any{}); !strings.Contains(got, `"isError":true`) || !strings.Contains(got, jsonQuote(want)) {
		t.Errorf("MCP tools/call pnig: %s", got)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"user","parts":[{"data":{"skill":"translat_history","arguments":{}}}]}}}`
	got := postJSON(t, base+"/a2a", map[string]string{"A2A-Version": "1.0"}, body)
	if w := jsonQuote(`skill "translat_history" not found (did you mean "translate_history"?)`); !strings.Contains(got, w) || strings.Contains(got, "skill not found") {
		t.Errorf("A2A data part translat_history: %s\nwant %s", got, w)
	}
}

// TestMeshFindTakesSkill (issue 26 item 4): mesh_find takes "skill", the
// name mesh_call gives the same thing; its old name skill_or_tag still
// works, both at once are refused naming the canonical one, and the
// schema requires skill.
func TestMeshFindTakesSkill(t *testing.T) {
	a := startNode(t, "", "--no-mdns", "--no-nat", "--port", "0", "--bind-host", "127.0.0.1")
	base := "http://127.0.0.1:" + a.First("MCPV2_BOUND_PORT")
	// The node finds itself once its own card is in its store, which it
	// says in its log a moment after "ready" (before that, with no DHT
	// peer, a find has nobody to ask).
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(a.Log.String(), "card stored locally"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the node did not store its own card in 10 s:\n%s", a.Log.String())
		}
	}
	for _, args := range []map[string]any{{"skill": "ping"}, {"skill_or_tag": "ping"}} {
		got := mcpToolCall(t, base, "mesh_find", args)
		if strings.Contains(got, `"isError":true`) || !strings.Contains(got, a.peerID) {
			t.Errorf("mesh_find %v: %s", args, got)
		}
	}
	got := mcpToolCall(t, base, "mesh_find", map[string]any{"skill": "ping", "skill_or_tag": "ping"})
	if !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "send only skill") {
		t.Errorf("mesh_find with both names: %s", got)
	}
	list := mcpRequest(t, base, "tools/list", "", map[string]any{})
	if !strings.Contains(list, `\"required\":[\"skill\"]`) && !strings.Contains(list, `"required":["skill"]`) {
		t.Errorf("tools/list: mesh_find's schema does not require skill: %.2000s", list)
	}
	if strings.Contains(list, `"required":["skill_or_tag"]`) {
		t.Errorf("tools/list: mesh_find still requires skill_or_tag")
	}
}

// TestIDShowsLiveAddressesOfP2PPort0 (issue 26 item 2), as the README has
// it: `mcpv2 node --p2p-port 0` in one terminal and `mcpv2 id` in another,
// both with the default data dir (a fresh HOME) or MCPV2_DATA_DIR: id
// prints the running node's random-port addresses, never the 4001
// defaults. Asked of another data dir, it says no node runs there and
// which --data-dir to pass.
func TestIDShowsLiveAddressesOfP2PPort0(t *testing.T) {
	home := t.TempDir()
	n := testenv.StartProc(t, "env", "HOME="+home, binPath, "node", "--p2p-port", "0", "--no-mdns", "--no-nat")
	live := n.Banner["MCPV2_P2P_ADDRESS"]
	if len(live) == 0 || strings.Contains(strings.Join(live, " "), "/tcp/4001/") {
		t.Fatalf("node banner addresses %v", live)
	}
	for name, env := range map[string][]string{
		"default data dir": {"HOME=" + home},
		"MCPV2_DATA_DIR":   {"HOME=" + t.TempDir(), "MCPV2_DATA_DIR=" + filepath.Join(home, ".mcpv2")},
	} {
		out, errs, code := runEnv(t, env, "id")
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if v, ok := strings.CutPrefix(l, "MCPV2_P2P_ADDRESS="); ok {
				got = append(got, v)
			}
		}
		if code != 0 || errs != "" || strings.Join(got, " ") != strings.Join(live, " ") || !strings.HasPrefix(out, "MCPV2_PEER_ID="+n.First("MCPV2_PEER_ID")+"\n") {
			t.Errorf("%s: id exit %d\n%s\nstderr %q\nwant the banner's %v", name, code, out, errs, live)
		}
	}
	other := t.TempDir()
	_, errs, code := run(t, "id", "--data-dir", other)
	if code != 0 || !strings.Contains(errs, "no node runs in "+other+": these are a PeerID created just now") ||
		!strings.Contains(errs, "pass the same one here: mcpv2 id --data-dir THAT_DIR") {
		t.Errorf("id of another data dir: exit %d, stderr %q", code, errs)
	}
	if _, errs, _ = run(t, "id", "--data-dir", other); !strings.Contains(errs, "these are its PeerID and the default listen addresses on port 4001") {
		t.Errorf("id of another data dir, again: stderr %q", errs)
	}
}

// jsonQuote is s as a JSON string's inside (quotes escaped), as it appears
// in a JSON answer.
func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// postJSON posts body to u with hdr and returns the answer's body.
func postJSON(t *testing.T, u string, hdr map[string]string, body string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mcpRequest sends one stateless MCP (2026-07-28) request to the edge's
// /mcp and returns the answer's body.
func mcpRequest(t *testing.T, base, method, name string, params map[string]any) string {
	t.Helper()
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	hdr := map[string]string{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		hdr["Mcp-Name"] = name
	}
	return postJSON(t, base+"/mcp", hdr, string(b))
}

// mcpToolCall runs tool with args through the edge's MCP face.
func mcpToolCall(t *testing.T, base, tool string, args map[string]any) string {
	t.Helper()
	return mcpRequest(t, base, "tools/call", tool, map[string]any{"name": tool, "arguments": args})
}

// TestErrorsSelfAddressExplained (issue 26, the README walk): a client
// run in the data dir of the node it calls has that node's PeerID, and is
// told to take a data dir of its own rather than only "that address is
// this node itself".
func TestErrorsSelfAddressExplained(t *testing.T) {
	a := startNode(t, "", "--no-mdns", "--no-nat")
	_, errs, code := run(t, "call", a.tcpAddr(t), "ping", "--data-dir", a.dataDir)
	if code != 1 || !strings.Contains(errs, "this client's own PeerID") || !strings.Contains(errs, "Give the client a data dir of its own") {
		t.Fatalf("call with the node's own data dir: exit %d, stderr:\n%s", code, errs)
	}
}

// TestErrorsUnknownPeerExplained (issue 26 item 4, from the review): a
// PeerID the mesh's DHT was asked for and does not know says so and what
// to check, not libp2p's "routing: not found" (kept for --verbose).
func TestErrorsUnknownPeerExplained(t *testing.T) {
	a := startNode(t, "", "--no-mdns", "--no-nat")
	missing := peerIDOf(t, t.TempDir())
	caller := t.TempDir()
	_, errs, code := run(t, "call", missing, "ping", "--bootstrap", a.tcpAddr(t), "--data-dir", caller, "--no-nat")
	if code != 1 || !strings.Contains(errs, "no peer of the mesh knows that PeerID") || strings.Contains(errs, "routing: not found") {
		t.Fatalf("call an unknown PeerID: exit %d, stderr:\n%s", code, errs)
	}
	_, errs, code = run(t, "call", missing, "ping", "--bootstrap", a.tcpAddr(t), "--data-dir", caller, "--no-nat", "--verbose")
	if code != 1 || !strings.Contains(errs, "cause: ") || !strings.Contains(errs, "routing: not found") {
		t.Fatalf("call an unknown PeerID --verbose: exit %d, stderr:\n%s", code, errs)
	}
}

// TestIDRefusesMissingDataDir (issue 26 item 2, from the README walk): a
// data dir that does not exist (a typo: ~/rely for ~/relay) is refused,
// not given a new identity whose port-4001 defaults are another node's.
func TestIDRefusesMissingDataDir(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "rely")
	out, errs, code := run(t, "id", "--data-dir", missing)
	if code != 1 || out != "" || !strings.Contains(errs, "id: no data dir "+missing+": no node has run there yet") {
		t.Fatalf("id --data-dir %s: exit %d, stdout %q, stderr:\n%s", missing, code, out, errs)
	}
	if fileExists(missing) {
		t.Errorf("id created %s", missing)
	}
}
